"""CLI command `tracker migrate [--json]`: bring the store's schema to this tracker's newest
migration (read-only commands never migrate; they point here when the store is behind)."""

from __future__ import annotations

import json

import typer


def migrate_command(
    as_json: bool = typer.Option(False, "--json", help="Print {store, from, to} as JSON."),
) -> None:
    """Bring the store's schema to this tracker's newest migration (creating the store if none)."""
    from tracker.app import build
    from tracker.settings import load_settings
    from tracker.store.engine import current_revision, display_url, probe_revision

    settings = load_settings()
    url = settings.effective_database_url
    before = probe_revision(url)
    app = build(settings)
    try:
        after = current_revision(app.store.engine)
    finally:
        app.close()
    where = display_url(url)
    if as_json:
        typer.echo(json.dumps({"store": where, "from": before, "to": after}))
    elif before == after:
        typer.echo(f"the store at {where} is at migration {after}: nothing to do")
    else:
        typer.echo(f"the store at {where}: migration {before or 'none'} -> {after}")


def register(app: typer.Typer) -> None:
    """Add `tracker migrate` to `app`."""
    app.command("migrate")(migrate_command)
