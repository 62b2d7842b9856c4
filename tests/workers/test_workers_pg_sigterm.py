"""SIGTERM on PostgreSQL with two workers (issue 13 review, item 5; the must-show's SIGTERM case
beyond one SQLite worker): the worker ingesting a 40-revision repo (50 ms per replica answer)
gets SIGTERM, stops between two revisions, exits 0 and releases its lease; the other worker takes
the repo over at once (it is due now) and ingests the rest. Every revision is stored once and
analysed, and nothing stays leased."""

from __future__ import annotations

import json
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from workkit import Daemon, commit_eos, env_for, run, status, until

from tracker.replica import Replica
from tracker.replica.repos import init_repo
from tracker.shared.domain import RepoId
from tracker.store import Store
from tracker.store.workers import WorkStore

pytestmark = [pytest.mark.replica, pytest.mark.postgres]

REVISIONS = 40


def test_two_pg_workers_sigterm_one_mid_ingest_the_other_finishes(
    tmp_path: Path, pg_database: Any
) -> None:
    root = tmp_path / "hub"
    a = init_repo(root, "acme/a")
    heads = [commit_eos(a, 2 + i) for i in range(REVISIONS)]
    (tmp_path / "watchlist.yaml").write_text("repos:\n  - id: acme/a\n    poll_interval: 1h\n")
    with pg_database("sigterm") as url, Replica(root, latency_s=0.05) as hub:
        env = env_for(tmp_path, hub.url, TRACKER_DATABASE_URL=url, TRACKER_WATCHLIST_SYNC_S="3600")
        daemons = [Daemon(env), Daemon(env)]
        store = Store.open(url)
        try:
            until(lambda: any(d.of("revision.stored") for d in daemons), timeout=60)
            [victim] = [d for d in daemons if d.of("revision.stored")]
            [other] = [d for d in daemons if d is not victim]
            victim.proc.send_signal(signal.SIGTERM)  # mid-ingest: most revisions to go
            assert victim.wait() == 0

            def caught_up() -> bool:
                [row] = WorkStore(store.engine).schedule()
                return (
                    store.repo_state(RepoId("acme/a")).cursor == heads[-1]
                    and not store.pending_analysis(RepoId("acme/a"))
                    and row.lease_owner is None
                )

            until(caught_up, timeout=120, step=0.2)
            st = status(env)
            history = run(env, "history", "acme/a", "--json")
            assert other.stop() == 0
        finally:
            for d in daemons:
                if d.proc.poll() is None:
                    d.kill()
            store.close()
    names = victim.names()
    assert names[-1] == "poll.stopped" and "poll.stopping" in names
    first = [e["sha"] for _, e in victim.of("revision.stored")]
    rest = [e["sha"] for _, e in other.of("revision.stored")]
    k = len(first)
    assert 1 <= k < REVISIONS
    assert first + rest == heads  # in order, each once: the other took over where it stopped
    assert max(Counter(first + rest).values()) == 1
    [(_, polled)] = victim.of("repo.polled", repo="acme/a")
    assert (polled["revisions"], polled["stopped"], polled["left"]) == (k, True, REVISIONS - k)
    [(_, stopped)] = victim.of("poll.stopped")
    assert (stopped["handed_back"], stopped["released"]) == (0, 0)  # its poll released the lease
    assert history.returncode == 0, history.stderr
    assert [(r["sha"], r["analysed"]) for r in json.loads(history.stdout)["revisions"]] == [
        (sha, True) for sha in heads
    ]
    [row] = st["repos"]
    assert (row["repo"], row["lease_owner"], row["last_revision"]) == ("acme/a", None, heads[-1])
    assert (row["consecutive_failures"], row["last_error"]) == (0, None)
    assert [w["alive"] for w in st["workers"]] == [True]  # the victim unregistered
