"""CLI commands: `tracker watch add|list|remove` (edit watchlist.yaml; list shows ingestion state)."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import typer

from tracker.app import build
from tracker.cli.tables import Col, console, print_table
from tracker.settings import load_settings
from tracker.shared.domain import parse_repo_id
from tracker.shared.errors import ConfigError, NoStoreError
from tracker.store import RepoState
from tracker.watchlist import MAX_BACKFILL, add_repo, load_watchlist, parse_interval, remove_repo

watch_app = typer.Typer(help="Edit and inspect the watchlist.", no_args_is_help=True)


def _iso(dt: datetime | None) -> str | None:
    return dt.isoformat() if dt is not None else None


def state_row(repo_id: str, ref: str, source: str, state: RepoState | None) -> dict[str, Any]:
    """One repo's watch-list row as JSON-ready data."""
    return {
        "repo": repo_id,
        "ref": ref,
        "source": source,
        "status": state.status.value if state else "new",
        "revisions": state.revisions if state else 0,
        "cursor": state.cursor if state else None,
        "last_poll": _iso(state.last_poll_at) if state else None,
        "last_success": _iso(state.last_success_at) if state else None,
        "consecutive_failures": state.consecutive_failures if state else 0,
        "last_error": state.last_error if state else None,
        "could_not_analyse": [
            {"sha": sha, **overrun.as_json()} for sha, overrun in state.could_not_analyse
        ]
        if state
        else [],
    }


MIN_ADD_POLL_S = 60
"""`watch add` refuses to poll a repo more often than this (each poll is at least one Hub request;
a shorter interval can still be written in the watchlist file by hand, e.g. for a local mirror)."""


def check_git(value: str) -> None:
    """A `--git` value is a URL (scheme:// or user@host:path) or a local git repository."""
    if "://" in value or re.match(r"^[\w.-]+@[\w.-]+:", value):
        return
    path = Path(value).expanduser()
    if not path.exists():
        raise ConfigError(
            f"--git {value}: no such directory (give a git URL or a local repository)"
        )
    if not ((path / "HEAD").is_file() or (path / ".git").exists()):
        raise ConfigError(f"--git {value}: not a git repository (no HEAD or .git in it)")


def check_interval(value: str) -> None:
    """A `--poll-interval` in the watchlist's syntax, at least MIN_ADD_POLL_S."""
    try:
        seconds = parse_interval(value)
    except ValueError as exc:
        raise ConfigError(f"--poll-interval: {exc}") from exc
    if seconds < MIN_ADD_POLL_S:
        raise ConfigError(
            f"--poll-interval {value} is below the floor of {MIN_ADD_POLL_S // 60}m "
            "(every poll costs Hub requests)"
        )


@watch_app.command("add")
def add(
    repo: str = typer.Argument(..., help="ORG/NAME"),
    git: str | None = typer.Option(
        None, "--git", help="Read from this git URL or path instead of the Hub."
    ),
    ref: str | None = typer.Option(None, "--ref", help="Branch or tag to follow (default main)."),
    backfill: int | None = typer.Option(
        None, "--backfill", min=1, max=MAX_BACKFILL, help="First poll: only the last N commits."
    ),
    poll_interval: str | None = typer.Option(None, "--poll-interval", help="e.g. 30s, 10m, 1h."),
) -> None:
    """Add a repo to the watchlist file (the rest of the file is kept as is)."""
    settings = load_settings()
    rid = parse_repo_id(repo)
    if git is not None:
        check_git(git)
    if poll_interval is not None:
        check_interval(poll_interval)
    add_repo(
        settings.watchlist, rid, ref=ref, git=git, backfill=backfill, poll_interval=poll_interval
    )
    typer.echo(f"watching {rid} (in {settings.watchlist})")


@watch_app.command("remove")
def remove(repo: str = typer.Argument(..., help="ORG/NAME")) -> None:
    """Remove a repo from the watchlist file (its stored history is kept)."""
    settings = load_settings()
    rid = parse_repo_id(repo)
    remove_repo(settings.watchlist, rid)
    typer.echo(f"no longer watching {rid}")


@watch_app.command("list")
def list_(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Every watched repo with its ingestion state (last poll, revisions, failures, last error, the
    revisions whose analysis overran its budget)."""
    settings = load_settings()
    if not settings.watchlist.exists():
        typer.echo(
            f"note: {settings.watchlist} does not exist: no repo is watched "
            "(`tracker watch add ORG/NAME` creates it)",
            err=True,
        )
    watchlist = load_watchlist(settings.watchlist)
    try:
        app = build(settings, read_only=True)
    except NoStoreError as exc:  # list what is watched; create nothing
        typer.echo(f"note: {exc}", err=True)
        states = {}
    else:
        try:
            states = {s.repo_id: s for s in app.store.repo_states()}
        finally:
            app.close()
    rows = [
        state_row(r.repo_id, r.ref, "git" if r.git else "hub", states.get(r.repo_id))
        for r in watchlist.repos
    ]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    cols = [
        Col("repo", keep=True),
        Col("status"),
        Col("revisions", 1, keep=True, right=True),
        Col("failures", 2, keep=True, right=True),
        Col("last poll", 3, keep=True),
        Col("last error", 2),
        Col("could not analyse", 2),
        Col("ref", 4, keep=True),
        Col("source", 5, keep=True),
    ]
    print_table(
        console(),
        f"watchlist {settings.watchlist}",
        cols,
        [
            [
                row["repo"],
                row["status"],
                str(row["revisions"]),
                str(row["consecutive_failures"]),
                row["last_poll"] or "never",
                row["last_error"] or "",
                "; ".join(f"{c['sha'][:12]}: {c['reason']}" for c in row["could_not_analyse"]),
                row["ref"],
                row["source"],
            ]
            for row in rows
        ],
    )


def register(app: typer.Typer) -> None:
    """Add this module's commands to `app`."""
    app.add_typer(watch_app, name="watch")
