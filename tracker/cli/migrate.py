"""CLI command `tracker migrate [--json]`: bring the store's schema to this tracker's newest
migration (read-only commands never migrate; they point here when the store is behind)."""

from __future__ import annotations

import json

import typer


def migrate_command(
    as_json: bool = typer.Option(False, "--json", help="Print {from, to} as JSON."),
) -> None:
    """Bring the store's schema to this tracker's newest migration (creating the store if none)."""
    import sqlalchemy as sa

    from tracker.app import build
    from tracker.settings import load_settings
    from tracker.store.engine import create_engine, current_revision

    settings = load_settings()
    url = settings.effective_database_url
    probe = None
    try:
        probe = create_engine(url) if not url.startswith("sqlite:///") else None
        before = current_revision(probe) if probe is not None else _sqlite_revision(url)
    except sa.exc.SQLAlchemyError:
        before = None  # build() reports why the store cannot be opened
    finally:
        if probe is not None:
            probe.dispose()
    app = build(settings)
    try:
        after = current_revision(app.store.engine)
    finally:
        app.close()
    where = sa.make_url(url).render_as_string(hide_password=True).removeprefix("sqlite:///")
    if as_json:
        typer.echo(json.dumps({"store": where, "from": before, "to": after}))
    elif before == after:
        typer.echo(f"the store at {where} is at migration {after}: nothing to do")
    else:
        typer.echo(f"the store at {where}: migration {before or 'none'} -> {after}")


def _sqlite_revision(url: str) -> str | None:
    """The schema revision of an SQLite store, None when its file is not there (nothing created)."""
    from pathlib import Path

    from tracker.store.engine import create_engine, current_revision

    path = url.removeprefix("sqlite:///").split("?", 1)[0]
    if not path or path == ":memory:" or not Path(path).is_file():
        return None
    engine = create_engine(url)
    try:
        return current_revision(engine)
    finally:
        engine.dispose()


def register(app: typer.Typer) -> None:
    """Add `tracker migrate` to `app`."""
    app.command("migrate")(migrate_command)
