"""The polling daemon (`tracker poll` without `--once`): one worker among any number sharing one
database.

Work is handed out through the database (`tracker.store.workers`): every watched repo has a row in
the schedule with the time it is next due; a worker claims due repos (`FOR UPDATE SKIP LOCKED` on
PostgreSQL), each claim with its own job id and a lease of `worker_lease_s`, polls them on a pool
of `poll_concurrency` threads, then records the outcome and the next due time (its interval plus
jitter; a failing repo backs off exponentially, capped, and delays no other) and releases the
lease. The heartbeat (every third of the lease) renews the leases of the claims this worker holds,
by job id; a worker that dies leaves its repos to be taken over once their leases expire.
SQLite takes one worker: a second daemon on one SQLite store exits with one line
(`WorkerConflictError`).

APScheduler 3 (coalesce, max_instances=1, jitter) runs the periodic jobs: the heartbeat, the
watchlist re-read (also on SIGHUP) and the poll-request queue (a Hub webhook or a manual trigger
makes the repo due now, so that poll too goes through a lease). Due webhook deliveries are sent by
their own thread, each subscription's on a slot of a pool (`webhook_concurrency`), each attempt
bounded by `webhook_timeout_s`. SIGTERM/SIGINT: nothing new starts; webhook attempts in flight are
abandoned (handed back, due again at once); the analysis under way is handed back (its worker is
killed and the revision stays pending, nothing recorded: the stop never waits for the analysis
budget); a poll under way finishes storing the revision it is on (each revision is stored, and
analysed, in its own transactions) and stops before the next one, its repo due again at once (the revisions left go to the next run, or another worker); claims not yet
started are handed back and every lease is released; `poll.stopped` is the last event. The signal
handlers only write the signal's number to a pipe and a thread of its own acts on it
(`Daemon.on_signal`): a handler runs in the main thread, which may hold a lock it would wait on.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import signal
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import structlog

from tracker.app import App
from tracker.settings import Settings
from tracker.shared.domain import RepoId
from tracker.shared.errors import ConfigError, WorkerConflictError
from tracker.store import RepoStatus
from tracker.store.outage import StoreOutage, unreachable
from tracker.store.workers import Claim, WorkStore
from tracker.watchlist import WatchedRepo
from tracker.webhooks.deliver import Deliverer

log = structlog.get_logger(__name__)

REQUEST_LEASE_S = 900
"""A claimed poll request is claimed again after this long if its daemon died handling it."""


def sqlite_path(settings: Settings) -> Path | None:
    """The SQLite file of `settings`' store (None: PostgreSQL, or an in-memory database)."""
    url = settings.effective_database_url
    if not url.startswith("sqlite:///"):
        return None
    path = url.removeprefix("sqlite:///").split("?", 1)[0]
    return Path(path) if path and path != ":memory:" else None


@contextmanager
def single_worker(settings: Settings) -> Iterator[None]:
    """Hold the SQLite store's worker lock (`<db>.poll.lock`, `flock`) while the daemon runs; a
    second daemon on the same store raises WorkerConflictError. PostgreSQL: nothing to hold."""
    db = sqlite_path(settings)
    if db is None:
        yield
        return
    lock_path = db.with_name(db.name + ".poll.lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    handle: IO[str] = open(lock_path, "a+")  # noqa: SIM115 - held until the daemon stops
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise WorkerConflictError(
                f"another `tracker poll` daemon (pid {holder}) works on the SQLite store {db}; "
                "SQLite takes one worker: stop that one, or point every worker at one "
                "PostgreSQL database (TRACKER_DATABASE_URL)"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        yield
    finally:
        handle.close()  # closing the file releases the lock


def next_due(
    now: datetime,
    *,
    interval_s: float,
    ok: bool,
    failures: int,
    backoff_max_s: float,
    jitter: float,
    retry_after: float | None,
    rng: random.Random,
) -> datetime:
    """When a repo is due again after a poll: its interval later (plus up to `jitter` of it), or
    after `failures` consecutive failures its interval doubled `failures - 1` times, capped at
    `backoff_max_s` (or the interval when that is longer); never before a source's `retry_after`,
    which is honoured up to that same cap (a `Retry-After` of years neither parks the repo for
    good nor overflows the date)."""
    cap = max(interval_s, backoff_max_s)
    wait = interval_s
    if not ok and failures > 1:
        wait = min(interval_s * 2.0 ** min(failures - 1, 40), cap)
    wait += rng.uniform(0, jitter * interval_s)
    if retry_after is not None:
        wait = max(wait, min(retry_after, cap))
    return now + timedelta(seconds=wait)


class Notifier:
    """sd_notify under systemd (`Type=notify`; the `sdnotify` package speaks the socket protocol):
    READY=1 once the worker is registered and its schedule synced, WATCHDOG=1 every quarter to half
    of `WatchdogSec` from the claim loop, whose wait is sliced to that whatever `queue_check_s`
    (a hung loop or database call stops the pings and systemd restarts the worker), STOPPING=1 on SIGTERM. Without NOTIFY_SOCKET it does nothing."""

    def __init__(self, settings: Settings) -> None:
        self._notifier: Any = None
        if settings.notify_socket:
            import sdnotify

            self._notifier = sdnotify.SystemdNotifier()
        usec = settings.watchdog_usec
        self.every_s = usec / 2e6 if usec else None
        self._last = 0.0

    def send(self, state: str) -> None:
        if self._notifier is not None:
            self._notifier.notify(state)

    def watchdog(self) -> None:
        """WATCHDOG=1, at most every quarter of the watchdog interval (the claim loop calls it
        at least every quarter, so pings are never more than half the interval apart)."""
        if self._notifier is None or self.every_s is None:
            return
        now = time.monotonic()
        if now - self._last >= self.every_s / 2:
            self._last = now
            self._notifier.notify("WATCHDOG=1")


class Daemon:
    """One polling worker (see the module docstring). `only`: poll just these repos (`tracker
    poll ORG/NAME`); `follow_watchlist`: re-read the watchlist file while running."""

    def __init__(
        self, app: App, *, only: list[RepoId] | None = None, follow_watchlist: bool = True
    ) -> None:
        self.app = app
        self.settings = app.settings
        self.work = WorkStore(app.store.engine)
        self.only = only
        self.follow_watchlist = follow_watchlist
        self.id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.lease = timedelta(seconds=self.settings.worker_lease_s)
        self.rng = random.Random()
        self.watched: dict[RepoId, WatchedRepo] = {}
        self.stopping = threading.Event()
        self._ended = threading.Event()  # the scheduler's loop returned (`on_signals`)
        self.wake_claims = threading.Event()
        self.wake_deliveries = threading.Event()
        self.reload = threading.Event()
        self._lock = threading.Lock()
        self._idle = threading.Condition()
        self._running = 0
        self.claimed: dict[str, Claim] = {}  # job id → claim, until finished or handed back
        # repos claimed that this worker's watchlist does not list even after a re-read: not
        # claimed again until the next sync (another worker's watchlist holds them)
        self.unknown: set[RepoId] = set()
        self._synced = False  # the first sync prunes every row its watchlist does not list
        # the rate budget: no claim before `budget_until`, one claim at a time before
        # `budget_short_until` (monotonic seconds), see `_poll`
        self.budget_until = 0.0
        self.budget_short_until = 0.0
        self.pool = ThreadPoolExecutor(self.settings.poll_concurrency, "poll")
        # every loop's store calls go through it: a store outage is tried again after a
        # growing step and logged once per step (`tracker.store.outage`)
        self.outage = StoreOutage(app.store.engine)
        self.notifier = Notifier(self.settings)

    # -- bookkeeping ------------------------------------------------------------------------

    @contextmanager
    def counted(self) -> Iterator[bool]:
        """Counts the work under way (the stop waits for it); False once stopping."""
        with self._idle:
            if self.stopping.is_set():
                yield False  # queued before the stop: never started
                return
            self._running += 1
        try:
            yield True
        finally:
            with self._idle:
                self._running -= 1
                self._idle.notify_all()

    def now(self) -> datetime:
        return self.app.clock()

    # -- the watchlist ----------------------------------------------------------------------

    def sync(self) -> None:
        """Follow the watchlist file: new repos are due now (a repo the schedule lost is due
        at its last poll plus its interval), changed ones (new settings) are due now, and the
        repos removed from it since this worker's last read leave the schedule (the first
        read: every repo it does not list), unless leased; a repo only another worker's file
        lists is left to that worker. An invalid file keeps the current repos."""
        try:
            repos = self.app.load_watchlist().repos
        except ConfigError as exc:
            log.error("watchlist.invalid", error=str(exc))
            return
        current = {r.repo_id: r for r in repos if self.only is None or r.repo_id in self.only}
        before = self.watched
        changed = [rid for rid, w in current.items() if rid in before and before[rid] != w]
        for rid in current.keys() - before.keys():
            if before:
                log.info(
                    "watchlist.repo_scheduled", repo=rid, interval_s=current[rid].poll_interval_s
                )
        for rid in before.keys() - current.keys():
            log.info("watchlist.repo_removed", repo=rid)
        for rid in changed:
            log.info("watchlist.repo_changed", repo=rid, interval_s=current[rid].poll_interval_s)
        with self._lock:
            self.watched = current
            self.unknown = set()
        prune: bool | list[RepoId] = False
        if self.only is None:
            prune = sorted(before.keys() - current.keys()) if self._synced else True
        added, removed = self.work.sync(
            {rid: w.poll_interval_s for rid, w in current.items()},
            self.now(),
            changed=changed,
            prune=prune,
        )
        self._synced = True
        if added or removed or changed:
            self.wake_claims.set()

    # -- polls ------------------------------------------------------------------------------

    def claim(self) -> None:
        """Claim due repos for the free places of the pool, no more: a claim is a repo being
        polled, so a worker that dies (SIGKILL) strands at most `poll_concurrency` repos for a
        lease. Nothing is queued behind the pool: a poll ending wakes this loop at once
        (`poll`), and the most overdue due repo, a dead worker's expired one first, takes the
        place it freed; while every place is busy the repo waits for any worker's next free
        place, as it waited in a queue behind this pool before (tests/workers/test_workers_pg.py
        measures both)."""
        with self._lock:
            free = self.settings.poll_concurrency - len(self.claimed)
            clock = time.monotonic()
            if clock < self.budget_until:
                return  # the rate budget allows nothing yet: every repo keeps its place
            if clock < self.budget_short_until:  # the budget is short: the most overdue one
                free = 1 - len(self.claimed)
            only = sorted(self.watched) if self.only is not None else None
            skip = sorted(self.unknown)
        if free <= 0 or self.stopping.is_set():
            return
        claims = self.work.claim(
            self.id, self.now(), lease=self.lease, limit=free, only=only, skip=skip
        )
        for c in claims:
            if c.taken_from is not None and c.taken_from != self.id:
                log.warning(
                    "lease.taken_over", repo=c.repo_id, worker=self.id, previous=c.taken_from
                )
            with self._lock:
                self.claimed[c.job] = c
            self.pool.submit(self.poll, c)

    def poll(self, claim: Claim) -> None:
        """One claimed repo: poll it, analyse what came, record the outcome, release the lease."""
        with self.counted() as started:
            if not started:
                return  # handed back by `stop`
            try:
                self._poll(claim)
            except Exception as exc:  # recording the outcome failed: the lease runs out
                if unreachable(exc):
                    self.outage.failed(exc, "poll.record")
                else:
                    log.exception("poll.record_failed", repo=claim.repo_id)
            finally:
                with self._lock:
                    self.claimed.pop(claim.job, None)
                log.info("poll.finished", repo=claim.repo_id, worker=self.id)  # its place is free
                self.wake_claims.set()

    def _poll(self, claim: Claim) -> None:
        with self._lock:
            watched = self.watched.get(claim.repo_id)
        if watched is None:  # the watchlist changed (another worker added it) or it was removed
            self._guarded(self.sync, "watchlist.sync_failed")  # read it now
            with self._lock:
                watched = self.watched.get(claim.repo_id)
                if watched is None:  # not ours: not claimed again before the next sync
                    self.unknown.add(claim.repo_id)
        if watched is None:
            log.info("claim.unknown_repo", repo=claim.repo_id, worker=self.id)
            self.work.release([claim])
            return
        job = "requested" if claim.requested else "poll"
        with structlog.contextvars.bound_contextvars(repo=watched.repo_id, job=job, worker=self.id):
            ok, error, retry_after, stopped = False, None, None, False
            try:
                report = self.app.pipeline.run_cycle([watched], stop=self.stopping.is_set)
            except Exception as exc:  # keep the daemon alive
                if unreachable(exc):  # the store went away: no outcome can be recorded
                    self.outage.failed(exc, "poll")
                    raise
                log.exception("poll.crashed")  # with its traceback
                error = f"unexpected {exc.__class__.__name__}: {exc}"
            else:
                [cycle] = report.repos
                if cycle.poll.budget_wait is not None:
                    self._budget_wait(claim, cycle.poll.budget_wait)
                    return
                # A revision recorded as could not analyse is that revision's state, shown in
                # `tracker watch list`; the repo itself polled and analysed what it could.
                ok = cycle.poll.status is RepoStatus.OK and cycle.error is None
                error = cycle.poll.error or cycle.error
                retry_after = cycle.poll.retry_after
                stopped = cycle.stopped
                if cycle.analysed:  # it may have queued deliveries
                    self.wake_deliveries.set()
                if retry_after is not None and retry_after > 0:
                    log.warning("repo.rescheduled", retry_after_s=retry_after)
            now = self.now()
            failures = 0 if ok else self.work.failures(watched.repo_id) + 1
            due = next_due(
                now,
                interval_s=watched.poll_interval_s,
                ok=ok,
                failures=failures,
                backoff_max_s=self.settings.poll_backoff_max_s,
                jitter=self.settings.poll_jitter,
                retry_after=retry_after,
                rng=self.rng,
            )
            if stopped:  # SIGTERM between two revisions: the rest is due now, for any worker
                log.info("poll.interrupted", detail="stopping: the revisions left are due now")
                due = now
            if not self.work.finish(claim, now, next_due=due, ok=ok, error=error):
                log.warning("lease.lost", detail="the lease expired during the poll")

    def _budget_wait(self, claim: Claim, wait_s: float) -> None:
        """The rate budget allows this repo's next request only `wait_s` later: not a failure (no
        failure counted, no backoff, no error recorded). The repo is handed back still due, so it
        keeps its place in the queue (most overdue first); this worker claims nothing until the
        budget allows, then one repo at a time for a window, so the budget goes round the repos
        instead of to whichever was due first after its own poll."""
        clock = time.monotonic()
        with self._lock:
            self.budget_until = max(self.budget_until, clock + wait_s)
            self.budget_short_until = max(
                self.budget_short_until, self.budget_until + self.settings.rate_window_s
            )
        log.info("repo.waiting_for_budget", wait_s=round(wait_s, 3))
        self.work.release([claim])

    def claims_loop(self) -> None:
        """Claim due repos until the stop: every `queue_check_s`, and at once when a poll ends,
        the watchlist changed or a poll was asked for (not before the rate budget allows)."""
        while not self.stopping.is_set():
            if self.reload.is_set():
                self.reload.clear()
                with self.counted() as started:
                    if started:
                        self._guarded(self.sync, "watchlist.sync_failed")
            with self.counted() as started:
                if not started:
                    return
                self._guarded(self.claim, "claims.crashed")
            self.notifier.watchdog()
            self.pause()

    def pause(self) -> None:
        """The claim loop's wait: `queue_check_s` (or until the rate budget allows, when that is
        sooner), ended early when woken (unless the budget allows nothing yet). It waits in
        slices of at most a quarter of systemd's watchdog period and pings between them, so an
        idle worker with a long `queue_check_s` is not taken for a hung one."""
        start = time.monotonic()
        with self._lock:
            budget_until = self.budget_until
        end = start + self.settings.queue_check_s
        if budget_until > start:
            end = min(end, budget_until)
        slice_s = self.notifier.every_s / 2 if self.notifier.every_s else None
        while not self.stopping.is_set():
            left = end - time.monotonic()
            if left <= 0:
                return
            woken = self.wake_claims.wait(left if slice_s is None else min(left, slice_s))
            if woken:
                self.wake_claims.clear()
                with self._lock:
                    budget_until = self.budget_until
                if time.monotonic() >= budget_until:
                    return
                end = min(end, budget_until) if budget_until > start else end
            self.notifier.watchdog()

    def _guarded(self, fn: Any, event: str) -> None:
        """`fn` unless the store is down and not due for a try (`StoreOutage.call`): an outage
        is logged once per backoff step, any other error with its traceback."""
        self.outage.call(fn, event)

    # -- periodic jobs ----------------------------------------------------------------------

    def heartbeat(self) -> None:
        """Renew this worker's row and the leases of its claims (by job id)."""
        with self.counted() as started:
            if started:
                self._guarded(self._heartbeat, "heartbeat.failed")

    def _heartbeat(self) -> None:
        with self._lock:
            jobs = list(self.claimed)
        now = self.now()
        if self.work.heartbeat(self.id, jobs, now, self.lease) < 0:
            log.warning("worker.reregistered", worker=self.id)
            self.work.register(self.id, socket.gethostname(), os.getpid(), now)
            self.work.heartbeat(self.id, jobs, now, self.lease)
        self.work.forget_dead_workers(now - timedelta(seconds=self.settings.forget_workers_after_s))

    def poll_requests(self) -> None:
        """Poll requests (Hub webhooks, manual triggers) make their repos due now."""
        with self.counted() as started:
            if started:
                self._guarded(self._poll_requests, "poll_requests.failed")

    def _poll_requests(self) -> None:
        hooks = self.app.webhooks
        requests = hooks.claim_poll_requests(self.now(), lease=timedelta(seconds=REQUEST_LEASE_S))
        for req in requests:
            try:
                with self._lock:
                    watched = req.repo_id in self.watched
                if watched:
                    log.info("poll_request.due", repo=req.repo_id, reason=req.reason)
                    self.work.make_due(req.repo_id, self.now())
                else:
                    log.info("poll_request.unwatched", repo=req.repo_id, reason=req.reason)
            finally:
                hooks.finish_poll_request(req)
        if requests:
            self.wake_claims.set()

    def deliveries(self) -> None:
        """Send due webhook deliveries until the stop, each subscription's on a slot of its own
        (`Deliverer.start_due`); woken early when a poll published or an attempt ended. The stop
        abandons the attempts in flight (their deliveries are handed back) and waits for them."""
        deliverer = Deliverer(self.app.webhooks, self.settings, self.app.clock, stop=self.stopping)
        check = self.settings.queue_check_s
        try:
            while not self.stopping.is_set():
                self.wake_deliveries.clear()  # an attempt ending from here on wakes the wait
                due: float | None = None
                with self.counted() as started:
                    if not started:
                        return

                    def start() -> None:
                        nonlocal due
                        deliverer.start_due(on_done=self.wake_deliveries.set)
                        due = deliverer.seconds_until_due()

                    self._guarded(start, "webhooks.crashed")
                wait = check * 4 if due is None else due
                self.wake_deliveries.wait(min(max(wait, 0.01), check * 4))
        finally:
            deliverer.close()

    # -- the run ----------------------------------------------------------------------------

    def signal_pipe(self) -> int:
        """The pipe `on_signal` writes to; returns its read end (for `on_signals`)."""
        read, self._signal_w = os.pipe()
        os.set_blocking(self._signal_w, False)
        return read

    def on_signal(self, signum: int, _frame: Any) -> None:
        """The SIGTERM / SIGINT / SIGHUP handler: it only writes the signal's number to a pipe
        (`on_signals` acts on it in its own thread). A handler runs in the main thread between
        two bytecodes, and the main thread may hold a lock that is not reentrant: apscheduler's
        loop submitting a job to its thread pool, a structlog write to stderr, the scheduler's
        wake-up event. A handler that logged or shut the scheduler down waited on such a lock
        forever: the daemon never stopped (a fresh-clone test once waited past 60 s)."""
        with contextlib.suppress(OSError):  # a full pipe: signals already wait to be read
            os.write(self._signal_w, bytes([signum]))

    def on_signals(self, read: int, scheduler: Any) -> None:
        """Acts on the signals `on_signal` wrote, in this thread: SIGHUP re-reads the watchlist;
        SIGTERM / SIGINT stop (nothing new starts, the scheduler is shut down); a zero byte (the
        run ended) or the pipe's end returns."""
        from apscheduler.schedulers import SchedulerNotRunningError

        with os.fdopen(read, "rb", buffering=0) as pipe:
            while data := pipe.read(64):
                for signum in data:
                    if signum == 0:
                        return
                    if signum == signal.SIGHUP:
                        log.info("watchlist.reload", signal="SIGHUP")
                        self.reload.set()
                        self.wake_claims.set()
                        continue
                    if self.stopping.is_set():
                        continue  # a second SIGTERM: the stop is under way
                    self.stopping.set()
                    self.app.abandon_analysis()  # the stop never waits for an analysis budget
                    self.app.abandon_fetches()  # nor for a fetch's deadline
                    self.wake_claims.set()
                    self.wake_deliveries.set()
                    log.info("poll.stopping", signal=signal.Signals(signum).name)
                    self.notifier.send("STOPPING=1")
                    while not scheduler.running and not self._ended.is_set():
                        time.sleep(0.01)  # a signal before the scheduler's loop started
                    with contextlib.suppress(SchedulerNotRunningError):  # it ended meanwhile
                        scheduler.shutdown(wait=False)

    def run(self) -> None:
        """Run until SIGTERM/SIGINT (see the module docstring)."""
        with single_worker(self.settings):
            self._run()

    def _run(self) -> None:
        from apscheduler.executors.pool import ThreadPoolExecutor as JobPool
        from apscheduler.schedulers.blocking import BlockingScheduler

        now = self.now()
        if self.settings.effective_database_url.startswith("sqlite"):
            # the lock is ours: no other worker can hold a lease on this store
            self.work.unregister_all()
        self.work.register(self.id, socket.gethostname(), os.getpid(), now)
        self.sync()
        scheduler = BlockingScheduler(
            executors={"default": JobPool(3)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 300},
            timezone=UTC,
        )
        beat = self.settings.worker_lease_s / 3
        scheduler.add_job(self.heartbeat, "interval", seconds=beat, id="heartbeat")
        check = self.settings.queue_check_s
        scheduler.add_job(
            self.poll_requests, "interval", seconds=check, id="poll-requests", jitter=check / 4
        )
        if self.follow_watchlist:
            every = self.settings.watchlist_sync_s
            scheduler.add_job(
                self.reload.set, "interval", seconds=every, id="watchlist-sync", jitter=every / 10
            )
            self.reload.clear()

        signals = self.signal_pipe()
        handlers = {
            signum: signal.signal(signum, self.on_signal)
            for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
        }
        log.info("poll.started", repos=len(self.watched), worker=self.id)
        threads = [
            threading.Thread(target=self.claims_loop, name="claims", daemon=True),
            threading.Thread(target=self.deliveries, name="webhook-deliveries", daemon=True),
            threading.Thread(
                target=self.on_signals, args=(signals, scheduler), name="signals", daemon=True
            ),
        ]
        self.notifier.send(f"READY=1\nSTATUS=worker {self.id}: {len(self.watched)} repos")
        for t in threads:
            t.start()
        try:
            scheduler.start()
        finally:
            self._ended.set()
            with contextlib.suppress(OSError):
                os.write(self._signal_w, b"\0")  # the signals thread ends
            self.stopping.set()
            self.wake_claims.set()
            self.wake_deliveries.set()
            with self._idle:
                self._idle.wait_for(lambda: self._running == 0)
            for t in threads:
                t.join()
            try:
                self.pool.shutdown(wait=True, cancel_futures=True)
                with self._lock:
                    unstarted = list(self.claimed.values())
                self.work.release(unstarted)
                released = self.work.unregister(self.id)
                log.info(
                    "poll.stopped", worker=self.id, handed_back=len(unstarted), released=released
                )
            finally:  # a second SIGTERM while leases are released is ignored, not fatal
                for signum, handler in handlers.items():  # before the pipe closes
                    signal.signal(signum, handler)
                os.close(self._signal_w)
