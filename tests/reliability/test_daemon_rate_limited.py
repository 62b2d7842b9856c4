"""Issue 10, item 7, as the daemon meets it: the installed `tracker poll` behind the fault proxy,
which answers every request about one repo with `429` and `Retry-After: 3600`.

That repo is rescheduled an hour out with its error recorded (`tracker status --json`), no thread
sleeps through the hour (the other repos keep polling and ingest their new commits, and SIGTERM
stops the daemon at once), and the rescheduled repo is asked once, not retried. Before the
deadline work (issue 10, item 7) the client slept the hour inside the poll: the poll thread was
held, and SIGTERM waited for it.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from workkit import Daemon, commit_eos, env_for, status, until

from tracker.replica import Replica
from tracker.replica.faultproxy import Fault, FaultProxy, Mode
from tracker.replica.repos import init_repo

pytestmark = pytest.mark.replica


def test_a_repo_rate_limited_for_an_hour_is_rescheduled_while_the_others_poll_on(
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    root = tmp_path / "hub"
    repos = {name: init_repo(root, f"acme/{name}") for name in ("alpha", "beta", "gamma")}
    heads = {name: commit_eos(path, 2) for name, path in repos.items()}
    (tmp_path / "watchlist.yaml").write_text(
        "repos:\n" + "".join(f"  - id: acme/{n}\n    poll_interval: 2s\n" for n in repos)
    )
    with Replica(root) as hub, FaultProxy(hub.url, seed=1) as proxy:
        proxy.add(Fault(Mode.RATE_LIMIT, path="acme/beta", retry_after=3600))
        env = env_for(tmp_path, proxy.url, TRACKER_WATCHLIST_SYNC_S="3600")
        daemon = Daemon(env)
        try:
            until(lambda: daemon.of("repo.rescheduled", repo="acme/beta"), timeout=20)
            for name in ("alpha", "gamma"):
                until(lambda n=name: daemon.of("revision.analysed", sha=heads[n]), timeout=20)
            # New commits on the other repos are ingested by their next polls (every 2 s) while
            # acme/beta waits out its hour.
            later = {n: commit_eos(repos[n], 3) for n in ("alpha", "gamma")}
            for sha in later.values():
                until(lambda s=sha: daemon.of("revision.analysed", sha=s), timeout=20)
            st = status(env)
            stopping = time.monotonic()
            assert daemon.stop(timeout=20) == 0
            assert time.monotonic() - stopping < 10  # no poll thread was asleep
        finally:
            if daemon.proc.poll() is None:
                daemon.kill()
        rows = {r["repo"]: r for r in st["repos"]}
        beta = rows["acme/beta"]
        wait = datetime.fromisoformat(beta["next_due"]) - datetime.fromisoformat(beta["last_poll"])
        assert wait == timedelta(seconds=3600)
        assert beta["last_revision"] is None and beta["consecutive_failures"] == 1
        assert "asks to retry after 3600 s, over the cap of 60 s: not waited for, the repo is " \
            "rescheduled" in beta["last_error"]  # fmt: skip
        for name in ("alpha", "gamma"):
            row = rows[f"acme/{name}"]
            assert (row["last_revision"], row["last_error"]) == (later[name], None)
            gap = datetime.fromisoformat(row["next_due"]) - datetime.fromisoformat(row["last_poll"])
            assert timedelta(seconds=2) <= gap <= timedelta(seconds=2.2)  # interval plus jitter
        # acme/beta was asked once, answered 429 once, and never again within the hour.
        asked = [r for r in proxy.records if "acme/beta" in r.path]
        assert [(r.status, r.fault) for r in asked] == [(429, Mode.RATE_LIMIT)]
        assert len([r for r in proxy.records if "acme/alpha" in r.path]) > len(asked)
    assert time.monotonic() - started < 60
