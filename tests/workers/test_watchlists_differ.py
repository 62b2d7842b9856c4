"""Workers whose watchlists differ (issue 13 review, items 2 and 3), two `tracker poll` processes on
one PostgreSQL database against the replica.

Item 2: worker A re-reads an edited watchlist (SIGHUP) and schedules a new repo; worker B, whose
file does not list it, claims it once, re-reads its own watchlist at once, still does not know it,
and leaves it to A until its next sync; it does not claim and release it in a tight loop (before:
hundreds of PostgreSQL commits a second, until B's periodic re-read).

Item 3: B never removes from the schedule a repo it never listed (before: every sync of B pruned
A's repo, and A re-added it due at once, so it was polled every sync period instead of at its
interval). A repo re-added to the schedule is due at its last poll plus its interval."""

from __future__ import annotations

import itertools
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from workkit import Daemon, commit_eos, env_for, until

from tracker.replica import Replica
from tracker.replica.repos import init_repo
from tracker.store import Store
from tracker.store.workers import WorkStore

pytestmark = [pytest.mark.replica, pytest.mark.postgres]

INTERVAL_S = 3.0


def _commits(url: str) -> int:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return int(
                conn.execute(
                    sa.text(
                        "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
                    )
                ).scalar_one()
            )
    finally:
        engine.dispose()


def _lines(names: list[str], interval: str) -> str:
    return "repos:\n" + "".join(f"  - id: {rid}\n    poll_interval: {interval}\n" for rid in names)


def test_a_repo_another_worker_added_is_claimed_once_not_in_a_loop(
    tmp_path: Path, pg_database: Any
) -> None:
    root = tmp_path / "hub"
    for rid in ("acme/a", "acme/new"):
        commit_eos(init_repo(root, rid), 2)
    file_a, file_b = tmp_path / "watchlist.yaml", tmp_path / "watchlist-b.yaml"
    file_a.write_text(_lines(["acme/a"], "1h"))
    file_b.write_text(_lines(["acme/a"], "1h"))
    with pg_database("unknown") as url, Replica(root) as hub:
        env = env_for(tmp_path, hub.url, TRACKER_DATABASE_URL=url, TRACKER_WATCHLIST_SYNC_S="60")
        # A looks at the schedule every 5 s only (woken by its own syncs and polls): between
        # its polls the repo is due and unleased for seconds, with only B to claim it
        a = Daemon({**env, "TRACKER_QUEUE_CHECK_S": "5"})
        b = Daemon({**env, "TRACKER_WATCHLIST": str(file_b)})
        try:
            until(lambda: a.of("poll.started") and b.of("poll.started"), timeout=60)
            time.sleep(1.5)  # both settled
            start = _commits(url)
            time.sleep(4)
            baseline = _commits(url) - start
            file_a.write_text(_lines(["acme/a"], "1h") + _lines(["acme/new"], "1s")[7:])
            a.proc.send_signal(signal.SIGHUP)
            until(lambda: a.of("watchlist.repo_scheduled", repo="acme/new"), timeout=30)
            start = _commits(url)
            time.sleep(4)
            after = _commits(url) - start
            # A looks every 5 s: the 4 s window may end before its first poll of the repo
            until(lambda: a.of("repo.polled", repo="acme/new"), timeout=30)
            assert [x.stop() for x in (a, b)] == [0, 0]
        finally:
            for x in (a, b):
                if x.proc.poll() is None:
                    x.kill()
    # B re-read its watchlist at the first claim of the repo it does not list, then left it
    assert len(b.of("claim.unknown_repo", repo="acme/new")) <= 1
    assert a.of("repo.polled", repo="acme/new")  # A polls it
    assert not b.of("repo.polled", repo="acme/new")
    # the database's commits: a repo polled at 1 s, not a claim/release loop (before: 191 -> 2011)
    assert after <= 3 * baseline + 60, (baseline, after)


def test_a_worker_never_prunes_a_repo_it_never_listed(tmp_path: Path, pg_database: Any) -> None:
    root = tmp_path / "hub"
    for rid in ("acme/shared", "acme/only-a"):
        commit_eos(init_repo(root, rid), 2)
    file_a, file_b = tmp_path / "watchlist.yaml", tmp_path / "watchlist-b.yaml"
    file_a.write_text(_lines(["acme/shared", "acme/only-a"], f"{INTERVAL_S:g}s"))
    file_b.write_text(_lines(["acme/shared"], f"{INTERVAL_S:g}s"))
    with pg_database("differ") as url, Replica(root) as hub:
        env = env_for(tmp_path, hub.url, TRACKER_DATABASE_URL=url, TRACKER_WATCHLIST_SYNC_S="0.3")
        a = Daemon(env)
        b: Daemon | None = None
        try:
            until(lambda: a.of("repo.polled", repo="acme/only-a"), timeout=60)
            # B starts: its first read removes the row of acme/only-a (not leased: A polled it);
            # A's next sync re-adds it, due at its last poll plus the interval, not at once.
            b = Daemon({**env, "TRACKER_WATCHLIST": str(file_b)})
            until(lambda: b is not None and b.of("poll.started"), timeout=60)
            time.sleep(4 * INTERVAL_S)
            assert a.stop() == 0
            assert b.stop() == 0
            store = Store.open(url)
            try:
                rows = {r.repo_id: r for r in WorkStore(store.engine).schedule()}
            finally:
                store.close()
        finally:
            for x in (a, b):
                if x is not None and x.proc.poll() is None:
                    x.kill()
    polls = [t for t, _ in a.of("repo.polled", repo="acme/only-a")]
    gaps = [y - x for x, y in itertools.pairwise(polls)]
    assert len(polls) <= 4 * INTERVAL_S / INTERVAL_S + 2, gaps
    assert len(gaps) >= 2 and min(gaps) >= INTERVAL_S - 0.5, gaps  # its interval, every time
    assert sorted(rows) == ["acme/only-a", "acme/shared"]
    assert rows["acme/only-a"].last_poll is not None
