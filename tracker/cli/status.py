"""CLI command `tracker status [--json]`: what the polling workers are doing, from the database.

Per repo: last poll, last ingested revision, next due time, consecutive failures and last error,
lease owner. Per worker: id, host, pid, started, last heartbeat (and whether its heartbeat is
older than a lease: a dead worker whose repos are being taken over). A worker without a
heartbeat for `TRACKER_WORKER_FORGET_S` (600 s; a lease when that is longer) is not shown: it is
gone, and the live workers delete its row. The rate budget of each Hub
bucket in its current window.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import typer


def _when(at: datetime | None) -> str | None:
    return at.isoformat() if at is not None else None


def _short(at: datetime | None) -> str:
    return at.isoformat()[:19].replace("T", " ") if at is not None else ""


def status_command(
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Repos (last poll, revision, next due, failures, lease), workers and the rate budget.

    A worker shows as "no heartbeat" once a lease (TRACKER_WORKER_LEASE_S) has passed since its
    last heartbeat, and is no longer listed once TRACKER_WORKER_FORGET_S (600 s by default, or a
    lease when that is longer) has."""
    from tracker.app import build
    from tracker.cli.tables import Col, console, print_table
    from tracker.settings import load_settings
    from tracker.store.workers import WorkStore

    settings = load_settings()
    app = build(settings, read_only=True)
    try:
        work = WorkStore(app.store.engine)
        now = app.clock()
        repos = work.schedule()
        forget = timedelta(seconds=settings.forget_workers_after_s)
        workers = [w for w in work.workers() if now - w.heartbeat <= forget]
        budget = work.budget(now)
    finally:
        app.close()
    lease_s = settings.worker_lease_s
    out: dict[str, Any] = {
        "repos": [
            {
                "repo": r.repo_id,
                "last_poll": _when(r.last_poll),
                "last_revision": r.last_revision,
                "next_due": _when(r.next_due),
                "consecutive_failures": r.consecutive_failures,
                "last_error": r.last_error,
                "lease_owner": r.lease_owner,
                "lease_expires": _when(r.lease_expires),
            }
            for r in repos
        ],
        "workers": [
            {
                "id": w.id,
                "host": w.host,
                "pid": w.pid,
                "started": _when(w.started),
                "heartbeat": _when(w.heartbeat),
                "alive": (now - w.heartbeat).total_seconds() <= lease_s,
            }
            for w in workers
        ],
        "rate_budget": [
            {
                "bucket": b.bucket,
                "window_start": _when(b.window_start),
                "window_s": b.window_s,
                "used": b.used,
                "quota": b.quota,
                "blocked_until": _when(b.blocked_until)
                if b.blocked_until is not None and b.blocked_until > now
                else None,
            }
            for b in budget
        ],
    }
    if as_json:
        typer.echo(json.dumps(out, indent=2))
        return
    screen = console()
    print_table(
        screen,
        "repos",
        [
            Col("repo", keep=True),
            Col("last poll", 2, keep=True),
            Col("revision", 1, keep=True),
            Col("next due", keep=True),
            Col("failures", 1, keep=True, right=True),
            Col("lease", 3, keep=True),
            Col("last error", 4),
        ],
        [
            [
                r.repo_id,
                _short(r.last_poll),
                (r.last_revision or "")[:12],
                _short(r.next_due),
                str(r.consecutive_failures),
                r.lease_owner or "",
                r.last_error or "",
            ]
            for r in repos
        ],
    )
    print_table(
        screen,
        "workers",
        [
            Col("id", keep=True),
            Col("host", 2, keep=True),
            Col("started", 1, keep=True),
            Col("heartbeat", keep=True),
            Col("state", keep=True),
        ],
        [
            [w["id"], w["host"], _short(datetime.fromisoformat(w["started"])),
             _short(datetime.fromisoformat(w["heartbeat"])),
             "alive" if w["alive"] else "no heartbeat"]
            for w in out["workers"]
        ],
    )  # fmt: skip
    if budget:
        for b in budget:
            typer.echo(
                f"rate budget {b.bucket}: {b.used} of {b.quota} requests in the window from "
                f"{_short(b.window_start)} ({b.window_s:g} s)"
            )
    else:
        typer.echo("rate budget: no request counted (off, or nothing sent yet)")


def register(app: typer.Typer) -> None:
    """Add `tracker status` to `app`."""
    app.command("status")(status_command)
