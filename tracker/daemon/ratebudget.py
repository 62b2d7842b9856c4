"""The Hub's rate budget, shared by every worker through the database (`tracker.store.workers`).

The Hub counts requests per account in three buckets (`api`: /api/…; `resolvers`: file URLs with
/resolve/; `pages`: the rest) over fixed 5-minute windows, with quotas per account tier
(https://huggingface.co/docs/hub/rate-limits). Before every request the Hub source takes one from
its bucket (`RateBudget.acquire`): within a window requests are paced, `rate_burst` at once and
the rest spread evenly, so a large watchlist never bursts; a request that would have to wait
longer than `retry_after_cap_s` (or than one and a half paced intervals, when that is longer: a
poll under way gets its next permit rather than starting over) is not waited for: the poll ends with a RateBudgetWait carrying
the wait, which is not a failure of the repo: the daemon leaves the repo due (its place in the
queue, most overdue first, kept) and claims nothing until the budget allows, then one repo at a
time while the budget stays short, so every repo gets its share. Every answer is read
(`RateBudget.observe`): `RateLimit: "api";r=0;t=N` or a `429` (its `Retry-After`, else the rest
of the window) block the bucket for every worker until then; a `RateLimit-Policy` quota below
the configured one is followed.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import structlog

from tracker.settings import Settings
from tracker.shared.errors import RateBudgetWait
from tracker.store.workers import WorkStore, window_start

log = structlog.get_logger(__name__)

BUCKETS = ("api", "resolvers", "pages")
TIER_QUOTAS: dict[str, dict[str, int]] = {
    "anonymous": {"api": 500, "resolvers": 3000, "pages": 100},
    "free": {"api": 1000, "resolvers": 5000, "pages": 200},
    "pro": {"api": 2500, "resolvers": 12000, "pages": 400},
    "team": {"api": 3000, "resolvers": 20000, "pages": 400},
    "enterprise": {"api": 6000, "resolvers": 50000, "pages": 600},
}
"""Requests per 5-minute window per bucket, as the Hub publishes them per account tier."""

_REMAINING = re.compile(r'"?(?P<bucket>[a-z]+)"?\s*;\s*r=(?P<r>\d+)\s*;\s*t=(?P<t>\d+)')
_POLICY = re.compile(r'"?(?P<bucket>[a-z]+)"?\s*;\s*q=(?P<q>\d+)\s*;\s*w=(?P<w>\d+)')


def bucket_of(path: str) -> str:
    """The Hub bucket a request path counts in."""
    if path.startswith("/api/"):
        return "api"
    if "/resolve/" in path:
        return "resolvers"
    return "pages"


def budget_enabled(settings: Settings) -> bool:
    """`rate_budget` on, or auto and the endpoint is huggingface.co (a mirror or the replica
    publishes no limits)."""
    if settings.rate_budget != "auto":
        return settings.rate_budget == "on"
    host = urlsplit(settings.hf_endpoint).hostname or ""
    return host == "huggingface.co" or host.endswith(".huggingface.co")


def quotas(settings: Settings) -> dict[str, int]:
    """Requests per window per bucket under `settings` (the tier's, or the overrides)."""
    tier = TIER_QUOTAS[settings.hub_tier]
    return {
        "api": settings.rate_api_per_window or tier["api"],
        "resolvers": settings.rate_resolvers_per_window or tier["resolvers"],
        "pages": settings.rate_pages_per_window or tier["pages"],
    }


class RateBudget:
    """The budget of one process's Hub requests, kept in the database (see the module docstring)."""

    def __init__(
        self,
        work: WorkStore,
        settings: Settings,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.work = work
        self.window_s = settings.rate_window_s
        self.burst = settings.rate_burst
        self.edge_s = min(1.0, self.window_s / 50)
        self.quotas = quotas(settings)
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()

    def acquire(self, path: str, cap_s: float) -> None:
        """Take one request for `path` from its bucket, waiting while the budget says so; a wait
        beyond `cap_s` in all (or one and a half paced intervals, `window / quota`, when that is
        longer) raises RateBudgetWait (with `retry_after`: when to come back)."""
        bucket = bucket_of(path)
        waited = 0.0
        while True:
            with self._lock:
                quota = self.quotas[bucket]
            wait = self.work.take(
                bucket, self._clock(), quota=quota, window_s=self.window_s, burst=self.burst,
                edge_s=self.edge_s,
            )  # fmt: skip
            if wait <= 0:
                return
            # a paced permit is always worth waiting for (a poll under way then finishes
            # instead of starting over); a longer wait (the quota spent, a server's block)
            # only up to the cap
            if waited + wait > max(cap_s, 1.5 * self.window_s / quota):
                raise RateBudgetWait(
                    f"{path}: the rate budget of the Hub's {bucket!r} bucket ({quota} requests "
                    f"per {self.window_s:g} s) allows the next request in {wait:.1f} s, over "
                    f"the cap of {cap_s:g} s: not waited for, the repo waits for the budget",
                    retry_after=wait,
                )
            self._sleep(wait)
            waited += wait

    def observe(self, path: str, status: int, headers: Mapping[str, str]) -> None:
        """Follow what the server says about its limits (see the module docstring)."""
        bucket = bucket_of(path)
        now = self._clock()
        policy = _POLICY.search(headers.get("RateLimit-Policy", ""))
        if policy is not None and policy["bucket"] in BUCKETS:
            q = int(policy["q"])
            with self._lock:
                if q < self.quotas[policy["bucket"]]:
                    log.warning("rate_budget.server_quota", bucket=policy["bucket"], quota=q)
                    self.quotas[policy["bucket"]] = q
        until: datetime | None = None
        remaining = _REMAINING.search(headers.get("RateLimit", ""))
        if remaining is not None and int(remaining["r"]) == 0:
            bucket = remaining["bucket"] if remaining["bucket"] in BUCKETS else bucket
            until = now + timedelta(seconds=int(remaining["t"]) + 1)
        if status == 429 and until is None:
            after = headers.get("Retry-After", "").strip()
            if after.isdigit():
                until = now + timedelta(seconds=int(after))
            else:  # the rest of the window
                until = window_start(now, self.window_s) + timedelta(seconds=self.window_s)
        if until is not None:
            log.warning("rate_budget.blocked", bucket=bucket, until=until.isoformat())
            self.work.block(bucket, until, quota=self.quotas[bucket], window_s=self.window_s)


__all__ = ["BUCKETS", "TIER_QUOTAS", "RateBudget", "bucket_of", "budget_enabled", "quotas"]
