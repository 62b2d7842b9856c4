"""CLI commands: `tracker poll [REPO] [--once]`, `tracker history REPO`, `tracker show REPO@REV PATH`.

Without `--once`, `poll` runs the polling daemon (`tracker.daemon.scheduler`): one worker among any
number sharing one PostgreSQL database (SQLite: one), clean stop on SIGTERM/SIGINT.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from typing import Any

import structlog
import typer

from tracker.app import App, build
from tracker.cli.tables import Col, console, print_table, size
from tracker.ingest.snapshots import PollReport
from tracker.settings import load_settings
from tracker.shared.domain import parse_repo_id
from tracker.shared.errors import (
    ConfigError,
    StoreNotFoundError,
    UnreadableArtifactError,
    WatchlistError,
)
from tracker.store import FileKind
from tracker.store.values import decode_header
from tracker.watchlist import WatchedRepo
from tracker.webhooks.deliver import Deliverer

log = structlog.get_logger(__name__)


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


def deliver_due(app: App) -> int:
    """Attempt every webhook delivery due now, once (`poll --once`: a failed one waits for its
    retry time and the next run), subscriptions concurrently; after a subscription's attempt
    fails, its other deliveries wait for the next run too, so a hostile receiver costs this run
    at most one attempt's deadline. Returns how many were attempted."""
    deliverer = Deliverer(app.webhooks, app.settings, app.clock)
    total = 0
    try:
        while n := deliverer.run_once(skip_failing=True):
            total += n
    finally:
        deliverer.close()
    return total


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
                    for sha, why in r.could_not_analyse:
                        typer.echo(
                            f"{r.poll.repo_id}: could not analyse {sha[:12]}: {why} (recorded; "
                            "tried again once the limit is raised)"
                        )
                typer.echo(
                    f"analysed {sum(len(r.analysed) for r in report.repos)} revisions, "
                    f"published {len(report.advisories)} advisories"
                )
            if report.unclean:  # for cron and scripts: exit 1, one line on stderr
                typer.echo(f"error: {report.unclean_line()}", err=True)
                raise typer.Exit(1)
        else:
            from tracker.daemon.scheduler import Daemon

            only = None if repo is None else [r.repo_id for r in repos]
            Daemon(app, only=only, follow_watchlist=repo is None).run()
    finally:
        app.close()


def history(
    repo: str = typer.Argument(..., help="ORG/NAME"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Every ingested revision of a repo, oldest first, and its events (force-pushes, ...)."""
    from tracker.store.queries import history_json

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
    if fv.kind is FileKind.GGUF_HEADER:  # stored as its canonical JSON (`encode_gguf`)
        typer.echo(json.dumps(json.loads(data), indent=2, ensure_ascii=False))
        return
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def register(app: typer.Typer) -> None:
    """Add this module's commands to `app`."""
    app.command("poll")(poll)
    app.command("history")(history)
    app.command("show")(show)
