"""The pieces of the schedule and the rate budget, with exact values: backoff of a failing repo,
pacing within a window, the budget in the database (a fixed clock), what the server's headers do."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tracker.daemon.ratebudget import RateBudget, bucket_of, budget_enabled, quotas
from tracker.daemon.scheduler import next_due
from tracker.settings import load_settings
from tracker.shared.errors import DeadlineError, RateBudgetWait
from tracker.store import Store
from tracker.store.workers import WorkStore, paced_allowance, window_start

T0 = datetime(2026, 12, 1, 2, 0, 0, tzinfo=UTC)  # a window start (epoch-aligned, 300 s)


def test_a_failing_repo_backs_off_exponentially_capped() -> None:
    rng = random.Random(0)

    def wait(ok: bool, failures: int, retry_after: float | None = None) -> float:
        due = next_due(
            T0, interval_s=60, ok=ok, failures=failures, backoff_max_s=600, jitter=0.0,
            retry_after=retry_after, rng=rng,
        )  # fmt: skip
        return (due - T0).total_seconds()

    assert [wait(False, n) for n in range(1, 7)] == [60, 120, 240, 480, 600, 600]
    assert wait(True, 0) == 60
    assert wait(True, 0, retry_after=900) == 600  # honoured up to the backoff cap
    assert wait(False, 1, retry_after=590) == 590
    # Before: a Retry-After of 10**12 s raised OverflowError (the date), in the poll thread.
    assert wait(False, 1, retry_after=1e12) == 600
    jittered = next_due(T0, interval_s=100, ok=True, failures=0, backoff_max_s=600, jitter=0.1,
                        retry_after=None, rng=random.Random(1))  # fmt: skip
    assert timedelta(seconds=100) <= jittered - T0 <= timedelta(seconds=110)


def test_pacing_spreads_a_window_after_its_burst() -> None:
    assert [paced_allowance(300, 300, t, 10) for t in (0, 0.99, 1, 150, 289.9, 299)] == [
        10, 10, 11, 160, 299, 300,
    ]  # fmt: skip
    assert window_start(T0 + timedelta(seconds=299.5), 300) == T0
    assert window_start(T0 + timedelta(seconds=300), 300) == T0 + timedelta(seconds=300)


def test_buckets_tiers_and_when_the_budget_is_on(monkeypatch: pytest.MonkeyPatch) -> None:
    assert [bucket_of(p) for p in ("/api/models/a/b/refs", "/a/b/resolve/abc/config.json",
                                   "/a/b")] == ["api", "resolvers", "pages"]  # fmt: skip
    assert quotas(load_settings()) == {"api": 1000, "resolvers": 5000, "pages": 200}
    assert quotas(load_settings(hub_tier="pro", rate_api_per_window=7)) == {
        "api": 7, "resolvers": 12000, "pages": 400,
    }  # fmt: skip
    assert budget_enabled(load_settings()) is True  # huggingface.co
    assert budget_enabled(load_settings(hf_endpoint="http://127.0.0.1:8000")) is False
    assert budget_enabled(load_settings(hf_endpoint="http://127.0.0.1:8000", rate_budget="on"))


@pytest.fixture
def work(tmp_path: Path) -> Iterator[WorkStore]:
    store = Store.open(f"sqlite:///{tmp_path / 'budget.db'}")
    try:
        yield WorkStore(store.engine)
    finally:
        store.close()


def test_the_budget_in_the_database_never_gives_more_than_the_pace(work: WorkStore) -> None:
    def take(at: float) -> float:
        return work.take("api", T0 + timedelta(seconds=at), quota=6, window_s=60, burst=2,
                         edge_s=1.0)  # fmt: skip

    assert [take(0), take(0)] == [0.0, 0.0]  # the burst
    assert take(0) == pytest.approx(10.0)  # the third permit: 2 + floor(6 t / 60) > 2 at t = 10
    assert take(10) == 0.0
    assert take(10) == pytest.approx(10.0)
    assert [take(40), take(40), take(40)] == [0.0, 0.0, 0.0]  # 6 in all: the quota
    assert take(50) == pytest.approx(10.0)  # nothing more this window
    assert take(59.5) == pytest.approx(0.5)  # the window's edge
    assert take(60) == 0.0  # a new window
    [b] = work.budget(T0 + timedelta(seconds=61))
    assert (b.bucket, b.used, b.quota, b.window_start) == ("api", 1, 6, T0 + timedelta(seconds=60))


def test_server_headers_block_every_worker_and_long_waits_are_not_slept(work: WorkStore) -> None:
    now = [T0]
    slept: list[float] = []
    settings = load_settings(rate_window_s=60, rate_api_per_window=6, rate_burst=2)
    budget = RateBudget(work, settings, clock=lambda: now[0], sleep=slept.append)
    other = RateBudget(work, settings, clock=lambda: now[0], sleep=slept.append)
    budget.acquire("/api/models/a/b", cap_s=30)
    budget.observe("/api/models/a/b", 200, {"RateLimit": '"api";r=0;t=20'})
    with pytest.raises(DeadlineError) as exc:  # another worker: blocked 21 s; cap 5 s
        other.acquire("/api/models/c/d", cap_s=5)
    assert exc.value.retry_after == pytest.approx(21.0)
    assert slept == []
    budget.observe("/a/b/resolve/x/config.json", 429, {"Retry-After": "7"})
    [api, resolvers] = work.budget(now[0])
    assert (api.blocked_until, resolvers.blocked_until) == (
        T0 + timedelta(seconds=21), T0 + timedelta(seconds=7),
    )  # fmt: skip
    budget.observe("/api/x", 200, {"RateLimit-Policy": '"fixed window";"api";q=4;w=300'})
    assert budget.quotas["api"] == 4  # a smaller quota from the server is followed


def test_a_paced_permit_is_waited_for_a_spent_quota_is_not(work: WorkStore) -> None:
    """A poll under way waits for its next paced permit (window / quota = 10 s) even over a cap
    of 2 s, rather than ending and starting over; past one and a half paced intervals it gets
    RateBudgetWait, with the wait, and sleeps nothing."""
    now = [T0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += timedelta(seconds=s)

    settings = load_settings(rate_window_s=60, rate_api_per_window=6, rate_burst=2)
    budget = RateBudget(work, settings, clock=lambda: now[0], sleep=sleep)
    for _ in range(3):  # the burst, then the third permit at t = 10
        budget.acquire("/api/models/a/b", cap_s=2)
    assert slept == [pytest.approx(10.0)]
    now[0] = T0 + timedelta(seconds=41)
    for _ in range(3):  # 6 by t = 41: the quota
        budget.acquire("/api/models/a/b", cap_s=2)
    with pytest.raises(RateBudgetWait) as exc:  # the quota spent: 19 s to the next window
        budget.acquire("/api/models/a/b", cap_s=2)
    assert exc.value.retry_after == pytest.approx(19.0)
    assert len(slept) == 1
