"""A short rate budget shared fairly (issue 13 review, item 1): one PostgreSQL worker, ten repos
due every second and a budget of about one API request a second. Waiting for the budget is not a
failure (no failure counted, no backoff, no error in `tracker status`), and the budget goes round
the repos, most overdue first: every repo gets its share. (Before: the waits were DeadlineErrors
counted as failures with backoff, and the repo that last succeeded took almost every poll.)"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from workkit import Daemon, commit_eos, env_for, run, status, until

from tracker.replica import Replica
from tracker.replica.repos import init_repo

pytestmark = [pytest.mark.replica, pytest.mark.postgres]

N, WINDOW_S, API_PER_WINDOW, BURST, CAP_S, RUN_S = 10, 10, 10, 2, 0.5, 20.0


def test_a_short_budget_goes_round_the_repos_and_fails_none(
    tmp_path: Path, pg_database: Any
) -> None:
    root = tmp_path / "hub"
    names = [f"acme/r{i}" for i in range(N)]
    for rid in names:
        commit_eos(init_repo(root, rid), 2)
    (tmp_path / "watchlist.yaml").write_text(
        "repos:\n" + "".join(f"  - id: {rid}\n    poll_interval: 1s\n" for rid in names)
    )
    with pg_database("fair") as url, Replica(root) as hub:
        env = env_for(tmp_path, hub.url, TRACKER_DATABASE_URL=url)
        first = run(env, "poll", "--once")  # every repo ingested: each later poll is one request
        assert first.returncode == 0, first.stderr
        before = sum(r.path.startswith("/api/") for r in hub.requests)
        budget = dict(
            TRACKER_RATE_BUDGET="on", TRACKER_RATE_WINDOW_S=str(WINDOW_S),
            TRACKER_RATE_API_PER_WINDOW=str(API_PER_WINDOW), TRACKER_RATE_BURST=str(BURST),
            TRACKER_RETRY_AFTER_CAP_S=str(CAP_S),
        )  # fmt: skip
        daemon = Daemon({**env, **budget})
        try:
            until(lambda: daemon.of("poll.started"), timeout=60)
            time.sleep(RUN_S)
            assert daemon.stop() == 0
        finally:
            if daemon.proc.poll() is None:
                daemon.kill()
        st = status(env)
        api = [r for r in hub.requests if r.path.startswith("/api/")]
    polls = Counter(e["repo"] for _, e in daemon.of("repo.polled"))
    assert {e["status"] for _, e in daemon.of("repo.polled")} == {"ok"}
    assert daemon.of("repo.waiting_for_budget")  # the budget was short
    assert set(polls) == set(names), polls
    assert max(polls.values()) - min(polls.values()) <= 1, polls
    # the budget's permits were all used: a burst and one a second, ten repos polled in turn
    assert sum(polls.values()) >= RUN_S * API_PER_WINDOW / WINDOW_S * 0.7, polls
    assert len(api) - before == sum(polls.values())  # one api request a poll; none while waiting
    assert [(r["repo"], r["consecutive_failures"], r["last_error"]) for r in st["repos"]] == [
        (rid, 0, None) for rid in names
    ]
