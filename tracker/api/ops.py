"""Operations: `/healthz`, `/readyz` and `/metrics` (Prometheus text format, `prometheus-client`).

- `/healthz`: the process is up and answering; it touches nothing else (200 always).
- `/readyz`: the store answers and its schema is at this code's migration head: 200; otherwise
  503 with a problem document (`tracker.api.problem`, type `urn:tracker:problem:not-ready`)
  naming what is wrong (unreachable, behind, ahead, or no answer within `READY_TIMEOUT_S`).
- `/metrics`: what the store says, read at scrape time by `StoreCollector` (`tracker.store.ops`:
  a few grouped queries in one read transaction), so `tracker serve` reports what `tracker poll`
  (a separate process) did, and the numbers survive restarts of either; plus this process's own
  HTTP requests (`HttpMetrics`, counted in memory), what it rendered and read to answer them
  (`ServingCollector`: the answers the memo made, `tracker.api.memo`, and the SQL statements it
  ran on the store, not counting this scrape's and the readiness probe's own) and the
  `process_*` metrics.

Metric names and meanings are listed in the README (Operations). The probes never need a token;
`/metrics` needs a read token when reads do (it names the watched repos). None of these routes
appears in the OpenAPI document.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime

import structlog
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from tracker.api.auth import require_read
from tracker.api.encoding import COMPRESSIONS
from tracker.api.limits import ASGIApp, Message, Receive, Scope, Send
from tracker.api.problem import respond
from tracker.shared.domain import AdvisoryState, Clock, Severity
from tracker.shared.errors import TrackerError
from tracker.store.ops import OpsCounts, OpsReader
from tracker.store.statements import StatementCount, uncounted
from tracker.store.values import RepoStatus
from tracker.store.webhooks import DeliveryState, Outcome

log = structlog.get_logger(__name__)

READY_TIMEOUT_S = 3.0
"""`/readyz` answers 503 when the store has not answered within this long."""
_NO_STORE = {"cache-control": "no-store"}

router = APIRouter(include_in_schema=False)


@router.get("/healthz")
def healthz() -> Response:
    """The process is up (nothing else is asked)."""
    return JSONResponse({"status": "ok"}, headers=_NO_STORE)


def _readiness(reader: OpsReader) -> tuple[str | None, str | None, str]:
    """(problem or None, the store's revision, the head); never raises."""
    try:
        with uncounted():
            current, head = reader.schema()
    except Exception as exc:  # any failure to reach the store is the answer, not a 500
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return f"the store cannot be reached: {type(exc).__name__}: {first}"[:500], None, "?"
    if current == head:
        return None, current, head
    if current is None:
        return f"the store has no schema (this tracker needs migration {head})", None, head
    from tracker.store.engine import known_revision

    if known_revision(current):
        return (
            f"the store's schema is at migration {current}, behind {head}: `tracker migrate` "
            "(or any command that writes) migrates it",
            current,
            head,
        )
    return (
        f"the store's schema is at migration {current}, which this tracker does not know "
        f"(its newest is {head}): a newer release migrated it",
        current,
        head,
    )


@router.get("/readyz")
async def readyz(request: Request) -> Response:
    """Ready: the store is reachable and at the migration head (200), else 503 with why."""
    reader: OpsReader = request.app.state.ops_reader()
    try:
        # a thread of the loop's executor, not anyio's: a cancelled anyio thread call waits
        # for the thread, so a store that never answers would hold the probe past the timeout
        loop = asyncio.get_running_loop()
        problem, current, head = await asyncio.wait_for(
            loop.run_in_executor(None, _readiness, reader), READY_TIMEOUT_S
        )
    except TimeoutError:
        problem, current, head = f"the store did not answer within {READY_TIMEOUT_S:g} s", None, "?"
    if problem is not None:
        log.warning("readyz.not_ready", problem=problem)
        return respond(
            503,
            "not-ready",
            problem,
            request.url.path,
            title="Not ready",
            headers=_NO_STORE,
            schema=current,
            head=head,
        )
    return JSONResponse(
        {"status": "ready", "store": "reachable", "schema": current}, headers=_NO_STORE
    )


@router.get("/metrics", dependencies=[Depends(require_read)])
def metrics(request: Request) -> Response:
    """Prometheus text format; a read token when reads need one (`tracker.api.auth`)."""
    registry: CollectorRegistry = request.app.state.metrics
    with uncounted():  # the scrape's own reads are not what it reports
        body = generate_latest(registry)
    return Response(body, media_type=CONTENT_TYPE_LATEST, headers=_NO_STORE)


class ServingCollector(Collector):
    """What this process rendered, compressed and read to answer: the answers the memo made, by
    route (`tracker.api.memo.Memo.renders_by`; a kept answer served again, or a 304 from it, is
    not a render), the bodies it gzipped (`tracker.api.encoding.COMPRESSIONS`), and the SQL
    statements it ran on the store (`tracker.store.statements`)."""

    def __init__(self, state: object, statements: StatementCount | None) -> None:
        self.state = state
        self.statements = statements

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        renders = CounterMetricFamily(
            "tracker_http_renders",
            "Answers this process rendered to keep (pages, lists, feeds, diffs), by route.",
            labels=["route"],
        )
        memo = getattr(self.state, "memo", None)
        for route, n in sorted(dict(getattr(memo, "renders_by", {})).items()):
            renders.add_metric([route], n)
        yield renders
        compressions = CounterMetricFamily(
            "tracker_http_compressions",
            "Bodies this process gzipped: tagged (an answer's gzip form, made once with it), "
            "passing (an answer compressed on its way out).",
            labels=["kind"],
        )
        for kind in ("tagged", "passing"):
            compressions.add_metric([kind], COMPRESSIONS[kind])
        yield compressions
        if self.statements is not None:
            statements = CounterMetricFamily(
                "tracker_store_statements",
                "SQL statements this process ran on the store (not counting /metrics' and "
                "/readyz's own).",
            )
            statements.add_metric([], self.statements.n)
            yield statements


class StoreCollector(Collector):
    """The store's counts, read at each scrape (`tracker.store.ops.OpsReader.counts`)."""

    def __init__(
        self,
        reader: Callable[[], OpsReader],
        clock: Clock,
        *,
        worker_lease_s: float = 120.0,
        intervals: Callable[[], Mapping[str, float]] | None = None,
    ) -> None:
        self.reader = reader
        self.clock = clock
        self.worker_lease_s = worker_lease_s
        self.intervals = intervals

    def describe(self) -> list[Metric]:
        return []  # collected only at scrape time: registering must not read the store

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "tracker_store_up", "1 when this scrape read the store, 0 when the store failed."
        )
        try:
            counts = self.reader().counts(self.clock(), worker_lease_s=self.worker_lease_s)
        except TrackerError as exc:
            log.warning("metrics.store_failed", error=str(exc).splitlines()[0])
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from _store_metrics(counts)
        if self.intervals is not None:
            try:
                intervals = self.intervals()
            except (TrackerError, OSError) as exc:  # no watchlist here: no intervals
                log.info("metrics.no_watchlist", error=str(exc).splitlines()[0])
                intervals = {}
            family = GaugeMetricFamily(
                "tracker_repo_poll_interval_seconds",
                "Each watched repo's poll interval (the watchlist this server reads).",
                labels=["repo"],
            )
            for repo, seconds in sorted(intervals.items()):
                family.add_metric([repo], seconds)
            yield family


def _store_metrics(c: OpsCounts) -> Iterator[Metric]:
    polls = CounterMetricFamily(
        "tracker_polls", "Polls of each repo (scheduled and requested).", labels=["repo"]
    )
    failures = CounterMetricFamily(
        "tracker_poll_failures",
        "Polls of each repo that did not end ok (failing, gone or gated).",
        labels=["repo"],
    )
    ingest = HistogramMetricFamily(
        "tracker_ingest_seconds",
        "Seconds each poll took to list, fetch and store a repo's new revisions.",
        labels=["repo"],
    )
    revisions = CounterMetricFamily(
        "tracker_revisions_ingested",
        "Revisions of each repo in the store (rewritten-away ones included).",
        labels=["repo"],
    )
    pending = GaugeMetricFamily(
        "tracker_revisions_pending_analysis",
        "Ingested revisions of each repo not analysed yet.",
        labels=["repo"],
    )
    overrun = GaugeMetricFamily(
        "tracker_revisions_could_not_analyse",
        "Revisions of each repo whose analysis overran its budget (counted as pending too).",
        labels=["repo"],
    )
    consecutive = GaugeMetricFamily(
        "tracker_repo_consecutive_failures",
        "Failures of each repo since its last ok poll.",
        labels=["repo"],
    )
    state = GaugeMetricFamily(
        "tracker_repo_state", "1 for each repo's current state.", labels=["repo", "state"]
    )
    for r in c.repos:
        polls.add_metric([r.repo_id], r.polls)
        failures.add_metric([r.repo_id], r.poll_failures)
        buckets = [("+Inf" if le == float("inf") else repr(le), n) for le, n in r.ingest_buckets]
        ingest.add_metric([r.repo_id], buckets, r.ingest_sum)
        revisions.add_metric([r.repo_id], r.revisions)
        pending.add_metric([r.repo_id], r.pending_analysis)
        overrun.add_metric([r.repo_id], r.could_not_analyse)
        consecutive.add_metric([r.repo_id], r.consecutive_failures)
        for s in RepoStatus:
            state.add_metric([r.repo_id, s.value], 1 if r.state == s.value else 0)
    last_ok = GaugeMetricFamily(
        "tracker_repo_last_success_timestamp_seconds",
        "Unix time of each repo's last poll that ended ok (absent before the first).",
        labels=["repo"],
    )
    for r in c.repos:
        if r.last_success is not None:
            last_ok.add_metric([r.repo_id], r.last_success.timestamp())
    yield from (polls, failures, ingest, revisions, pending, overrun, consecutive, state, last_ok)

    workers = GaugeMetricFamily(
        "tracker_workers",
        "Polling workers registered in the store: alive (a heartbeat within a lease) or "
        "no_heartbeat (dead or hung; dropped after TRACKER_WORKER_FORGET_S).",
        labels=["state"],
    )
    for name in ("alive", "no_heartbeat"):
        workers.add_metric([name], c.workers.get(name, 0))
    yield workers
    leases = GaugeMetricFamily(
        "tracker_leases",
        "Repo leases: held (a worker is polling the repo) or expired (run out unreleased: its "
        "worker died or hung; another worker takes the repo over).",
        labels=["state"],
    )
    for name in ("held", "expired"):
        leases.add_metric([name], c.leases.get(name, 0))
    yield leases
    churn = CounterMetricFamily(
        "tracker_lease_churn",
        "Repo leases changing hands since the store was made: taken_over (a worker claimed a "
        "repo whose holder's lease had run out) or lost (a worker finished a poll and found "
        "its lease had run out and been taken).",
        labels=["kind"],
    )
    for name in ("taken_over", "lost"):
        churn.add_metric([name], c.lease_churn.get(name, 0))
    yield churn
    used = GaugeMetricFamily(
        "tracker_rate_budget_used",
        "Requests counted against each Hub bucket's rate budget in its current window.",
        labels=["bucket"],
    )
    quota = GaugeMetricFamily(
        "tracker_rate_budget_quota",
        "Each Hub bucket's quota per window.",
        labels=["bucket"],
    )
    for bucket, (n, q) in sorted(c.rate_budget.items()):
        used.add_metric([bucket], n)
        quota.add_metric([bucket], q)
    yield from (used, quota)

    advisories = GaugeMetricFamily(
        "tracker_advisories", "Advisories in the store.", labels=["severity", "state"]
    )
    for sev in Severity:
        for st in AdvisoryState:
            advisories.add_metric([sev.value, st.value], c.advisories.get((sev.value, st.value), 0))
    yield advisories

    deliveries = GaugeMetricFamily(
        "tracker_webhook_deliveries",
        "Webhook deliveries (outbox rows) by state: pending, delivered, failed (given up or "
        "410 Gone), cancelled (earlier releases cancelled a disabled subscription's; now held).",
        labels=["state"],
    )
    for ds in DeliveryState:
        deliveries.add_metric([ds.value], c.deliveries.get(ds.value, 0))
    yield deliveries
    attempts = GaugeMetricFamily(
        "tracker_webhook_attempts",
        "Webhook delivery attempts by outcome: delivered, retry (failed, retried later), "
        "failed (the last one failed), gone (410).",
        labels=["outcome"],
    )
    for o in Outcome:
        attempts.add_metric([o.value], c.attempts.get(o.value, 0))
    yield attempts
    yield GaugeMetricFamily(
        "tracker_webhook_queue_depth",
        "Webhook deliveries waiting to go out (pending outbox rows).",
        value=c.deliveries.get(DeliveryState.PENDING.value, 0),
    )
    requests = GaugeMetricFamily(
        "tracker_poll_requests",
        "Polls asked for (Hub webhooks, manual triggers): waiting, or claimed by the daemon.",
        labels=["state"],
    )
    for name in ("waiting", "claimed"):
        requests.add_metric([name], c.poll_requests.get(name, 0))
    yield requests


class HttpMetrics:
    """ASGI middleware: this process's HTTP requests by method, route template and status, and
    their duration by route (in memory; they start at zero with the process)."""

    def __init__(self, app: ASGIApp, registry: CollectorRegistry) -> None:
        self.app = app
        self.requests = Counter(
            "tracker_http_requests",
            "HTTP requests this `tracker serve` process answered.",
            ["method", "route", "status"],
            registry=registry,
        )
        self.seconds = Histogram(
            "tracker_http_request_duration_seconds",
            "Seconds this process took to answer, by route.",
            ["route"],
            registry=registry,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = getattr(scope.get("route"), "path", None) or "(unmatched)"
            self.requests.labels(scope["method"], route, str(status)).inc()
            self.seconds.labels(route).observe(time.perf_counter() - started)


def _now() -> datetime:
    return datetime.now(UTC)


def install(
    api: FastAPI,
    reader: Callable[[], OpsReader],
    clock: Clock = _now,
    statements: StatementCount | None = None,
    *,
    worker_lease_s: float = 120.0,
    intervals: Callable[[], Mapping[str, float]] | None = None,
) -> None:
    """Add the operations routes and the metrics registry (per app) to `api`; `reader` gives
    the store's reader when a probe or a scrape needs it (never at install time); `statements`
    counts what the store ran for this app."""
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    registry.register(
        StoreCollector(reader, clock, worker_lease_s=worker_lease_s, intervals=intervals)
    )
    registry.register(ServingCollector(api.state, statements))
    api.state.metrics = registry
    api.state.ops_reader = reader
    api.include_router(router)
    api.add_middleware(HttpMetrics, registry=registry)
