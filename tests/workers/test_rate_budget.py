"""The rate budget as it meets the Hub (issue 13, item 2): two `tracker poll` workers on one
PostgreSQL database share one budget per bucket, against a replica that enforces the Hub's rate
limits itself (`Replica(rate_limits=...)`: `RateLimit`/`RateLimit-Policy` on every answer, a 429
over the quota). The workers are configured for more than the replica allows and follow the
replica's `RateLimit-Policy` quota; the replica's own request log shows that no window ever got
more than that quota, that each window's requests were spread after its burst, and that when
another client of the same account spent a window's quota, the replica's 429 (`RateLimit: r=0`)
stopped every worker's API requests until the reset."""

from __future__ import annotations

import math
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
import pytest
from workkit import Daemon, commit_eos, env_for, until

from tracker.daemon.ratebudget import bucket_of
from tracker.replica import Replica
from tracker.replica.repos import init_repo

pytestmark = [pytest.mark.replica, pytest.mark.postgres]

WINDOW_S, SERVER_QUOTA, CONFIGURED_QUOTA, BURST = 3, 8, 12, 2
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
    hub = Replica(root, rate_limits={"api": SERVER_QUOTA}, rate_window_s=WINDOW_S)
    with pg_database("budget") as url, hub:
        env = env_for(
            tmp_path, hub.url, TRACKER_DATABASE_URL=url, TRACKER_RATE_BUDGET="on",
            TRACKER_RATE_WINDOW_S=str(WINDOW_S),
            TRACKER_RATE_API_PER_WINDOW=str(CONFIGURED_QUOTA),
            TRACKER_RATE_RESOLVERS_PER_WINDOW="40", TRACKER_RATE_BURST=str(BURST),
        )  # fmt: skip
        daemons = [Daemon(env) for _ in range(2)]
        try:

            def polled() -> set[str]:
                return {e["repo"] for d in daemons for _, e in d.of("repo.polled")}

            until(lambda: polled() == set(names), timeout=120)

            def settled() -> bool:
                """Every revision analysed (the analysis workers, which import transformers and
                torch at start, have done their CPU-heavy part) and every repo polled again
                since: from here on the daemons only poll, once a second each."""
                analysed = {e["repo"] for d in daemons for _, e in d.of("revision.analysed")}
                polls = [e["repo"] for d in daemons for _, e in d.of("repo.polled")]
                return analysed == set(names) and all(polls.count(n) >= 3 for n in names)

            until(settled, timeout=120)
            # Another client of the same account spends a whole window's api quota at its start.
            time.sleep((math.floor(time.time() / WINDOW_S) + 1) * WINDOW_S - time.time() + 0.02)
            spent = math.floor(time.time() / WINDOW_S)
            with httpx.Client(base_url=hub.url) as other:
                answers = [
                    other.get("/api/models/acme/b0/refs", params={"other": "1"})
                    for _ in range(SERVER_QUOTA)
                ]
            assert answers[0].headers["RateLimit-Policy"] == (
                f'"fixed window";"api";q={SERVER_QUOTA};w={WINDOW_S}'
            )

            def refused() -> list[Any]:
                return [r for r in hub.requests if r.status == 429 and r.query != "other=1"]

            until(refused, timeout=60)
            blocked = refused()[0].at
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
    ours = [r for r in requests if r.query != "other=1"]
    # Only the window the other client spent refused the workers; the rest were within quota.
    assert {math.floor(r.at / WINDOW_S) for r in ours if r.status == 429} == {spent}
    assert {math.floor(r.at / WINDOW_S) for r in requests if r.query == "other=1"} == {spent}
    windows: dict[tuple[str, int], list[float]] = defaultdict(list)
    for r in ours:
        windows[(bucket_of(r.path), math.floor(r.at / WINDOW_S))].append(r.at)
    api = {w: sorted(ts) for (b, w), ts in windows.items() if b == "api"}
    assert len(api) >= 5
    # The server's quota (RateLimit-Policy), not the configured one, was the limit.
    assert max(len(ts) for ts in api.values()) <= SERVER_QUOTA, {w: len(t) for w, t in api.items()}
    assert max(len(ts) for ts in api.values()) == SERVER_QUOTA
    for w, ts in sorted(api.items())[1:]:  # paced (the first window: before the first answer)
        for i, at in enumerate(ts):
            permit = max(0, i - BURST + 1) * WINDOW_S / SERVER_QUOTA
            assert at - w * WINDOW_S >= permit - TOLERANCE_S, (w, i, at - w * WINDOW_S)
    # After the 429 (`RateLimit: "api";r=0;t=<to the reset>`) no worker sent an api request
    # until the reset plus the one second clients add to `t` (HUB-PROTOCOL.md §10).
    reset = (spent + 1) * WINDOW_S
    quiet = [r for r in ours
             if bucket_of(r.path) == "api" and blocked + TOLERANCE_S < r.at < reset + 1 - TOLERANCE_S]  # fmt: skip
    assert quiet == []
