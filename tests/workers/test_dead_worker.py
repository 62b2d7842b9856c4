"""A worker that dies (SIGKILL) as operators meet it (issue 26, item 6), on SQLite and on
PostgreSQL: it strands only the repos it was polling (it leases no more than its pool's
`TRACKER_POLL_CONCURRENCY` places) until their leases run out; `tracker status` shows it without a
heartbeat once a lease has passed, and no more once `TRACKER_WORKER_FORGET_S` has passed since its
last heartbeat. Before: it leased twice its concurrency (the pool and as many queued behind), all
stranded for a lease; dead workers stayed in `tracker status` for an hour at least (forever when
no worker was left to forget them).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest
from workkit import Daemon, commit_eos, env_for, status, until

from tracker.replica import Replica
from tracker.replica.repos import init_repo
from tracker.store import Store
from tracker.store.workers import WorkStore

pytestmark = pytest.mark.replica

CONCURRENCY = 2
LEASE_S = 2.0
FORGET_S = 15.0  # over a lease and `tracker status`'s start on a loaded machine (5-7 s seen)


@contextmanager
def _store_url(engine: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    if engine == "sqlite":
        yield f"sqlite:///{tmp_path / 'state' / 'tracker.db'}"
        return
    pg_database: Callable[[str], AbstractContextManager[str]] = request.getfixturevalue(
        "pg_database"
    )
    with pg_database("dead") as url:
        yield url


@pytest.mark.parametrize("engine", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_killed_worker_strands_only_its_polls_and_leaves_status(
    tmp_path: Path, engine: str, request: pytest.FixtureRequest
) -> None:
    root = tmp_path / "hub"
    repos = {f"acme/d{i}": init_repo(root, f"acme/d{i}") for i in range(6)}
    for git in repos.values():
        commit_eos(git, 2)
    (tmp_path / "watchlist.yaml").write_text(
        "repos:\n" + "".join(f"  - id: {rid}\n    poll_interval: 1h\n" for rid in repos)
    )
    # 0.3 s per answer: each poll lasts seconds, six repos are due at once
    with Replica(root, latency_s=0.3) as hub, _store_url(engine, tmp_path, request) as url:
        env = env_for(
            tmp_path, hub.url, TRACKER_POLL_CONCURRENCY=str(CONCURRENCY),
            TRACKER_WORKER_LEASE_S=str(LEASE_S), TRACKER_WORKER_FORGET_S=str(FORGET_S),
            TRACKER_DATABASE_URL=url,
        )  # fmt: skip
        daemon = Daemon(env)
        store = None
        try:
            until(lambda: daemon.of("poll.started"), timeout=120)
            [(_, started)] = daemon.of("poll.started")
            worker = started["worker"]
            store = Store.open(url)
            work = WorkStore(store.engine)
            held: list[int] = []
            deadline = time.monotonic() + 120
            while len(daemon.of("repo.polled")) < 2:  # two polls done, more under way
                held.append(sum(1 for r in work.schedule() if r.lease_owner == worker))
                assert time.monotonic() < deadline
                time.sleep(0.05)
            until(lambda: any(r.lease_owner == worker for r in work.schedule()), timeout=30)
            daemon.kill()
            killed_at = time.monotonic()
            stranded = sorted(r.repo_id for r in work.schedule() if r.lease_owner == worker)
            # six due, two places: the pool full, nothing leased behind it (before: [4, 4, ...])
            assert max(held) == CONCURRENCY, held
            assert 1 <= len(stranded) <= CONCURRENCY, stranded

            time.sleep(max(0.0, killed_at + LEASE_S + 0.5 - time.monotonic()))
            listed = status(env)["workers"]
            assert [(w["id"], w["alive"]) for w in listed] == [(worker, False)]
            until(lambda: status(env)["workers"] == [], timeout=FORGET_S + 15, step=0.5)
            gone_after = time.monotonic() - killed_at
            assert gone_after <= FORGET_S + 10, gone_after
        finally:
            if daemon.proc.poll() is None:
                daemon.kill()
            if store is not None:
                store.close()
