"""CLI commands: `tracker poll [REPO] [--once]`, `tracker history REPO`, `tracker show REPO@REV PATH`.

Without `--once`, `poll` runs an APScheduler 3 BlockingScheduler: one job per repo at its poll
interval (first run at once), structlog context bound per job, clean stop on SIGTERM/SIGINT.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
import typer

from tracker.app import App, build
from tracker.cli.tables import Col, console, print_table, size
from tracker.domain import parse_repo_id
from tracker.errors import ConfigError, StoreNotFoundError, UnreadableArtifactError, WatchlistError
from tracker.ingest import PollReport
from tracker.pipeline import CycleReport
from tracker.settings import load_settings
from tracker.store import FileKind
from tracker.store.values import decode_header
from tracker.watchlist import WatchedRepo
from tracker.webhooks.deliver import Deliverer

log = structlog.get_logger(__name__)

REQUEST_LEASE_S = 900
"""A claimed poll request is claimed again after this long if its daemon died polling it."""


def report_json(r: PollReport) -> dict[str, Any]:
    data = asdict(r)
    data["status"] = r.status.value
    data["new_revisions"] = list(r.new_revisions)
    data["seconds"] = round(r.seconds, 3)
    return data


def print_reports(reports: list[PollReport], as_json: bool) -> None:
    """Per-repo summary: a rich table, or JSON with `--json`."""
    if as_json:
        typer.echo(json.dumps([report_json(r) for r in reports], indent=2))
        return
    print_table(
        console(),
        "poll",
        [
            Col("repo", keep=True),
            Col("status", keep=True),
            Col("new revisions", 1, keep=True, right=True),
            Col("error", 1),
            Col("files fetched", 3, keep=True, right=True),
            Col("bytes fetched", 3, keep=True, right=True),
            Col("requests", 4, keep=True, right=True),
        ],
        [
            [
                r.repo_id,
                r.status.value,
                str(r.revisions_ingested),
                r.error or "",
                str(r.files_fetched),
                size(r.bytes_fetched),
                "" if r.requests is None else str(r.requests),
            ]
            for r in reports
        ],
    )
    if reports and not any(r.revisions_ingested for r in reports):
        typer.echo("nothing new: no revisions ingested, nothing fetched")


def _selected(app: App, repo: str | None) -> list[WatchedRepo]:
    watchlist = app.load_watchlist()
    if repo is None:
        return list(watchlist.repos)
    rid = parse_repo_id(repo)
    return [watchlist.get(rid)]


def serve_poll_requests(app: App, run: Callable[[WatchedRepo], None]) -> int:
    """Poll every repo with a waiting poll request (`tracker.store.webhooks`: the Hub's webhooks
    and manual triggers queue them) through `run`, then mark the request done; a repo the
    watchlist no longer lists is dropped unpolled. Returns how many repos were polled."""
    requests = app.webhooks.claim_poll_requests(
        app.clock(), lease=timedelta(seconds=REQUEST_LEASE_S)
    )
    if not requests:
        return 0
    watched = {r.repo_id: r for r in app.load_watchlist().repos}
    polled = 0
    for req in requests:
        target = watched.get(req.repo_id)
        try:
            if target is None:
                log.info("poll_request.unwatched", repo=req.repo_id, reason=req.reason)
            else:
                log.info("poll_request.polling", repo=req.repo_id, reason=req.reason)
                run(target)
                polled += 1
        finally:
            app.webhooks.finish_poll_request(req)
    return polled


def deliver_due(app: App) -> int:
    """Attempt every webhook delivery due now, once (`poll --once`: a failed one waits for its
    retry time and the next run); returns how many were attempted."""
    deliverer = Deliverer(app.webhooks, app.settings, app.clock)
    total = 0
    try:
        while n := deliverer.run_once():
            total += n
    finally:
        deliverer.close()
    return total


def run_daemon(app: App, repos: list[WatchedRepo], *, follow_watchlist: bool = True) -> None:
    """Poll each repo at its interval until SIGTERM/SIGINT (APScheduler 3 BlockingScheduler).

    With `follow_watchlist`, the watchlist file is re-read every `settings.watchlist_sync_s` seconds, so
    `tracker watch add/remove` and edits take effect without a restart.

    It logs at `settings.log_level` (WARNING by default: failures only; the systemd unit sets
    INFO, one `repo.polled` event per job). On SIGTERM/SIGINT no new job starts; the jobs under
    way finish their repo, and only then is `poll.stopped` logged: nothing after it.
    """
    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.schedulers.blocking import BlockingScheduler

    scheduler = BlockingScheduler(
        executors={"default": ThreadPoolExecutor(4)},
        job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 300},
        timezone=UTC,
    )

    stopping = threading.Event()
    idle = threading.Condition()
    running = 0

    wake_deliveries = threading.Event()
    repo_locks: dict[str, threading.Lock] = {}
    locks_lock = threading.Lock()

    @contextmanager
    def counted() -> Iterator[bool]:
        """Counts the work under way (the stop waits for it); False once stopping."""
        nonlocal running
        with idle:
            if stopping.is_set():
                yield False  # queued before the stop: never started
                return
            running += 1
        try:
            yield True
        finally:
            with idle:
                running -= 1
                idle.notify_all()

    def run_repo(watched: WatchedRepo, job_name: str) -> None:
        """One cycle of one repo; scheduled and requested polls of a repo never overlap."""
        with locks_lock:
            lock = repo_locks.setdefault(watched.repo_id, threading.Lock())
        with lock, structlog.contextvars.bound_contextvars(repo=watched.repo_id, job=job_name):
            try:
                report = app.pipeline.run_cycle([watched])
            except Exception:  # keep the daemon alive; the error is logged with its traceback
                log.exception("poll.crashed")
            else:
                if any(r.analysed for r in report.repos):  # it may have queued deliveries
                    wake_deliveries.set()
                reschedule(watched, report)

    def job(watched: WatchedRepo) -> None:
        with counted() as started:
            if started:
                run_repo(watched, "poll")

    def requested_polls() -> None:
        """Serve the poll-request queue (Hub webhooks, manual triggers) until the stop."""
        while not stopping.wait(app.settings.queue_check_s):
            with counted() as started:
                if not started:
                    return
                try:
                    serve_poll_requests(app, lambda w: run_repo(w, "requested"))
                except Exception:
                    log.exception("poll_requests.crashed")

    def deliveries() -> None:
        """Send due webhook deliveries until the stop; woken early when a poll published."""
        deliverer = Deliverer(app.webhooks, app.settings, app.clock)
        try:
            while not stopping.is_set():
                attempted = 0
                due: float | None = None
                with counted() as started:
                    if not started:
                        return
                    try:
                        attempted = deliverer.run_once()
                        due = None if attempted else deliverer.seconds_until_due()
                    except Exception:
                        log.exception("webhooks.crashed")
                if attempted:
                    continue
                wait = app.settings.queue_check_s * 4 if due is None else due
                wake_deliveries.wait(min(max(wait, 0.01), app.settings.queue_check_s * 4))
                wake_deliveries.clear()
        finally:
            deliverer.close()

    scheduled: dict[str, WatchedRepo] = {}

    def reschedule(watched: WatchedRepo, report: CycleReport) -> None:
        """A source that asked for a wait longer than the cap on honoured `Retry-After`: the
        repo's next poll moves that far ahead (no worker sleeps through it)."""
        wait = max((r.poll.retry_after or 0.0 for r in report.repos), default=0.0)
        if wait <= 0:
            return
        job = scheduler.get_job(watched.repo_id)
        when = datetime.now(UTC) + timedelta(seconds=wait)
        if job is not None and (job.next_run_time is None or job.next_run_time < when):
            job.modify(next_run_time=when)
            log.warning("repo.rescheduled", retry_after_s=wait, next_poll=when.isoformat())

    def schedule(watched: WatchedRepo, first_run: datetime | None) -> None:
        scheduled[watched.repo_id] = watched
        scheduler.add_job(
            job,
            "interval",
            seconds=watched.poll_interval_s,
            args=[watched],
            id=watched.repo_id,
            next_run_time=first_run,
            replace_existing=True,
        )

    def sync() -> None:
        """Follow edits of the watchlist file: new repos start, removed ones stop, changed ones
        are rescheduled with their new settings. An invalid file keeps the current jobs."""
        try:
            current = {r.repo_id: r for r in app.load_watchlist().repos}
        except ConfigError as exc:
            log.error("watchlist.invalid", error=str(exc))
            return
        for rid in [r for r in scheduled if r not in current]:
            scheduler.remove_job(rid)
            del scheduled[rid]
            log.info("watchlist.repo_removed", repo=rid)
        for rid, watched in current.items():
            if scheduled.get(rid) != watched:
                log.info("watchlist.repo_scheduled", repo=rid, interval_s=watched.poll_interval_s)
                schedule(watched, datetime.now(UTC))

    now = datetime.now(UTC)
    for watched in repos:
        schedule(watched, now)
    if follow_watchlist:
        scheduler.add_job(
            sync, "interval", seconds=app.settings.watchlist_sync_s, id="watchlist-sync"
        )

    def stop(signum: int, _frame: Any) -> None:
        stopping.set()
        wake_deliveries.set()
        log.info("poll.stopping", signal=signal.Signals(signum).name)
        scheduler.shutdown(wait=False)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log.info("poll.started", repos=len(repos))
    workers = [
        threading.Thread(target=requested_polls, name="poll-requests", daemon=True),
        threading.Thread(target=deliveries, name="webhook-deliveries", daemon=True),
    ]
    for worker in workers:
        worker.start()
    scheduler.start()
    stopping.set()
    wake_deliveries.set()
    with idle:
        idle.wait_for(lambda: running == 0)
    for worker in workers:
        worker.join()
    log.info("poll.stopped")


def poll(
    repo: str | None = typer.Argument(
        None, help="Only this ORG/NAME (default: every watched repo)."
    ),
    once: bool = typer.Option(
        False, "--once", help="Poll once and exit (default: run as a daemon)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (with --once)."),
) -> None:
    """Ingest every new revision of the watched repos, analyse it and publish its advisories.

    With `--once`, exit 1 when any repo failed, is gone or is gated (one line on stderr says
    which); the report says why.
    """
    if as_json and not once:
        raise ConfigError("--json needs --once (the daemon prints no report; it logs)")
    app = build(load_settings())
    try:
        repos = _selected(app, repo)
        if not repos:
            raise WatchlistError(
                f"{app.settings.watchlist} lists no repos; add one with `tracker watch add`"
            )
        if once:
            report = app.pipeline.run_cycle(repos)
            deliver_due(app)
            if as_json:
                from tracker.pipeline import cycle_json

                typer.echo(cycle_json(report))
            else:
                print_reports([r.poll for r in report.repos], as_json=False)
                for r in report.repos:
                    if r.error:
                        typer.echo(f"{r.poll.repo_id}: {r.error} (its revisions stay pending)")
                typer.echo(
                    f"analysed {sum(len(r.analysed) for r in report.repos)} revisions, "
                    f"published {len(report.advisories)} advisories"
                )
            if report.unclean:  # for cron and scripts: exit 1, one line on stderr
                typer.echo(f"error: {report.unclean_line()}", err=True)
                raise typer.Exit(1)
        else:
            run_daemon(app, repos, follow_watchlist=repo is None)
    finally:
        app.close()


def history(
    repo: str = typer.Argument(..., help="ORG/NAME"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Every ingested revision of a repo, oldest first, and its events (force-pushes, ...)."""
    from tracker.queries import history_json

    rid = parse_repo_id(repo)
    app = build(load_settings(), read_only=True)
    try:
        out = history_json(app.store, rid)
    finally:
        app.close()
    rows: list[dict[str, Any]] = out["revisions"]
    if as_json:
        typer.echo(json.dumps(out, indent=2))
        return
    screen = console()
    print_table(
        screen,
        f"history of {rid}",
        [
            Col("#", keep=True, right=True),
            Col("sha", keep=True),
            Col("title"),
            Col("state", 1),
            Col("date", 2, keep=True),
            Col("authors", 3),
        ],
        [
            [
                str(row["seq"]),
                row["sha"][:12],
                row["title"],
                "rewritten away"
                if row["rewritten_away"]
                else ("analysed" if row["analysed"] else "pending"),
                row["date"][:16].replace("T", " "),
                ", ".join(row["authors"]),
            ]
            for row in rows
        ],
    )
    for e in out["events"]:
        screen.print(f"{e['at']} {e['kind']} {json.dumps(e['details'])}", markup=False)


def show(
    target: str = typer.Argument(
        ..., metavar="REPO@REV", help="ORG/NAME[@REV] (REV default HEAD)."
    ),
    path: str = typer.Argument(..., help="Path in the repo."),
    as_json: bool = typer.Option(False, "--json", help="Print the file's metadata as JSON."),
) -> None:
    """Print a tracked file's stored bytes at a revision (a safetensors header as JSON)."""
    repo, _, rev = target.partition("@")
    rid = parse_repo_id(repo)
    app = build(load_settings(), read_only=True)
    try:
        sha = app.store.resolve(rid, rev or "HEAD")
        versions = app.store.file_versions(rid, sha)
        entry = next((e for e in app.store.tree(rid, sha) if e.path == path), None)
        fv = versions.get(path)
        if fv is None:
            where = "is in the tree but not tracked" if entry else "does not exist"
            raise StoreNotFoundError(f"{rid}@{sha}: {path} {where}; nothing stored")
        data = app.store.read_blob(fv.blob_sha256) if fv.blob_sha256 else None
    finally:
        app.close()
    if as_json:
        meta = {
            "repo": rid,
            "sha": sha,
            "path": path,
            "kind": fv.kind.value,
            "blob_sha256": fv.blob_sha256,
            "size": len(data) if data is not None else None,
            "reason": fv.reason,
            "fetched_at_this_revision": fv.fetched,
            "tree_entry": asdict(entry) if entry else None,
        }
        typer.echo(json.dumps(meta, indent=2, default=dict))
        return
    if fv.kind is FileKind.UNREADABLE or data is None:
        raise UnreadableArtifactError(f"{rid}@{sha}: {path} could not be read: {fv.reason}")
    if fv.kind is FileKind.HEADER:
        header = decode_header(data)
        out = {
            "__metadata__": dict(header.metadata),
            **{
                n: {"dtype": t.dtype, "shape": list(t.shape), "nbytes": t.nbytes}
                for n, t in header.tensors.items()
            },
        }
        typer.echo(json.dumps(out, indent=2))
        return
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def register(app: typer.Typer) -> None:
    """Add this module's commands to `app`."""
    app.command("poll")(poll)
    app.command("history")(history)
    app.command("show")(show)
