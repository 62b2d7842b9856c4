"""A store outage as an operator reads it (issue 26, item 6, must show): two `tracker poll`
workers under systemd's marker (`JOURNAL_STREAM`) reach PostgreSQL through a TCP proxy on
loopback; the proxy is stopped for 30 s (every connection cut, new ones refused) and started
again. Every line either worker wrote is a JSON object (APScheduler's, SQLAlchemy's and psycopg's
records included), the outage is a few dozen lines per worker at most (`store.unreachable` once
per backoff step, each step twice the last up to the cap, then one `store.reachable`), and both
workers poll again and stop cleanly."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from tcpproxy import TcpProxy
from workkit import Daemon, commit_eos, env_for, until

from tracker.replica import Replica
from tracker.replica.repos import init_repo
from tracker.store import Store

pytestmark = [pytest.mark.replica, pytest.mark.postgres]

OUTAGE_S = 30.0


def test_a_30s_store_outage_is_a_few_json_lines_per_worker(
    tmp_path: Path, pg_database: Any
) -> None:
    root = tmp_path / "hub"
    repos = {f"acme/o{i}": init_repo(root, f"acme/o{i}") for i in range(3)}
    for git in repos.values():
        commit_eos(git, 2)
    (tmp_path / "watchlist.yaml").write_text(
        "repos:\n" + "".join(f"  - id: {rid}\n    poll_interval: 1s\n" for rid in repos)
    )
    with pg_database("outage") as url, Replica(root) as hub:
        Store.open(url).close()  # migrated while the store is reachable
        direct = sa.make_url(url)
        proxy = TcpProxy((direct.host or "127.0.0.1", direct.port or 5432))
        proxy.start()
        via_proxy = direct.set(host="127.0.0.1", port=proxy.port)
        env = env_for(
            tmp_path, hub.url,
            TRACKER_DATABASE_URL=via_proxy.render_as_string(hide_password=False),
            TRACKER_WORKER_LEASE_S="6", JOURNAL_STREAM="8:4242",
        )  # fmt: skip
        env.pop("INVOCATION_ID", None)
        daemons = [Daemon(env), Daemon(env)]
        try:
            until(lambda: all(d.of("poll.started") for d in daemons), timeout=120)
            until(lambda: len({e["repo"] for d in daemons for _, e in d.of("repo.polled")}) == 3,
                  timeout=120)  # fmt: skip
            before = [len(d.events) + len(d.plain) for d in daemons]
            proxy.stop()
            down_at = time.monotonic()
            time.sleep(OUTAGE_S)
            proxy.start()
            up_at = time.monotonic()
            until(lambda: all(d.of("store.reachable") for d in daemons), timeout=60)
            # polling goes on: each worker polls again after the outage
            until(lambda: all(any(t > up_at for t, _ in d.of("repo.polled")) for d in daemons),
                  timeout=60)  # fmt: skip
            during = [
                len(d.events) + len(d.plain) - n for d, n in zip(daemons, before, strict=True)
            ]
            assert [d.stop() for d in daemons] == [0, 0]
        finally:
            for d in daemons:
                if d.proc.poll() is None:
                    d.kill()
            proxy.stop()

    for d in daemons:
        assert d.plain == []  # every line is a JSON object
        names = d.names()
        assert "poll.stopped" in names
        steps = [e["retry_in_s"] for _, e in d.of("store.unreachable")]
        assert steps, names
        # one line per step, each step twice the last (capped at 30 s): 1, 2, 4, 8, 16 in 30 s
        assert steps == [min(2.0**i, 30.0) for i in range(len(steps))], steps
        assert 4 <= len(steps) <= 7, steps
        assert all(t >= down_at for t, _ in d.of("store.unreachable"))
        [(_, back)] = d.of("store.reachable")
        assert OUTAGE_S - 1 <= back["down_s"] <= OUTAGE_S + 35, back
        # no traceback of any library, no APScheduler job error
        assert not [e for _, e in d.events if "exception" in e and e["event"] != "poll.crashed"]
        assert not [e for _, e in d.events if str(e.get("logger", "")).startswith("apscheduler")]
    assert all(n <= 36 for n in during), during  # a few dozen lines per worker, at most
