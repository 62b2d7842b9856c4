"""The rate budget as it meets the Hub (issue 13, item 2): two `tracker poll` workers on one
PostgreSQL database share one budget per bucket; the replica's own request log shows that no
window ever got more than its quota, that each window's requests were spread after its burst,
and that a `429` with `RateLimit: r=0` stopped every worker's API requests until the reset."""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from workkit import Daemon, commit_eos, env_for, until

from tracker.ratebudget import bucket_of
from tracker.replica import Replica
from tracker.replica.repos import init_repo

pytestmark = [pytest.mark.replica, pytest.mark.postgres]

WINDOW_S, API_QUOTA, BURST = 3.0, 8, 2
TOLERANCE_S = 0.25  # a request is taken from the budget shortly before the replica sees it


def test_two_workers_share_one_budget_that_no_window_exceeds(
    tmp_path: Path, pg_database: Any
) -> None:
    root = tmp_path / "hub"
    names = [f"acme/b{i}" for i in range(4)]
    for rid in names:
        commit_eos(init_repo(root, rid), 2)
    (tmp_path / "watchlist.yaml").write_text(
        "repos:\n" + "".join(f"  - id: {rid}\n    poll_interval: 1s\n" for rid in names)
    )
    with pg_database("budget") as url, Replica(root) as hub:
        env = env_for(
            tmp_path, hub.url, TRACKER_DATABASE_URL=url, TRACKER_RATE_BUDGET="on",
            TRACKER_RATE_WINDOW_S=str(WINDOW_S), TRACKER_RATE_API_PER_WINDOW=str(API_QUOTA),
            TRACKER_RATE_RESOLVERS_PER_WINDOW="40", TRACKER_RATE_BURST=str(BURST),
        )  # fmt: skip
        daemons = [Daemon(env) for _ in range(2)]
        try:

            def polled() -> set[str]:
                return {e["repo"] for d in daemons for _, e in d.of("repo.polled")}

            until(lambda: polled() == set(names), timeout=120)
            # The server says the api bucket is spent for 2 s (then 1 s more, as clients add).
            hub.inject_fault(
                r"^/api/models/acme/b0/refs", status=429, method="GET",
                headers={"RateLimit": '"api";r=0;t=2',
                         "RateLimit-Policy": '"fixed window";"api";q=8;w=3'},
            )  # fmt: skip
            until(lambda: any(r.status == 429 for r in hub.requests), timeout=60)
            blocked = next(r for r in hub.requests if r.status == 429).at
            # the 429's window and four more with api traffic: at least 5 windows whatever the speed
            until(
                lambda: max(r.at for r in hub.requests) > blocked + 4 * WINDOW_S + 0.5, timeout=60
            )
            assert [d.stop() for d in daemons] == [0, 0]
        finally:
            for d in daemons:
                if d.proc.poll() is None:
                    d.kill()
        requests = hub.requests
    windows: dict[tuple[str, int], list[float]] = defaultdict(list)
    for r in requests:
        windows[(bucket_of(r.path), math.floor(r.at / WINDOW_S))].append(r.at)
    api = {w: sorted(ts) for (b, w), ts in windows.items() if b == "api"}
    assert len(api) >= 5
    assert max(len(ts) for ts in api.values()) <= API_QUOTA, {w: len(t) for w, t in api.items()}
    assert max(len(ts) for ts in api.values()) == API_QUOTA  # the budget was the limit
    for w, ts in api.items():  # paced: the i-th request of a window not before its permit
        for i, at in enumerate(ts):
            permit = max(0, i - BURST + 1) * WINDOW_S / API_QUOTA
            assert at - w * WINDOW_S >= permit - TOLERANCE_S, (w, i, at - w * WINDOW_S)
    # After the 429 no worker sent an api request until the reset (t + 1 s).
    quiet = [r for r in requests
             if bucket_of(r.path) == "api" and blocked + TOLERANCE_S < r.at < blocked + 3 - TOLERANCE_S]  # fmt: skip
    assert quiet == []
