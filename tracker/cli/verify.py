"""CLI command `tracker verify [--json]`: re-hash every stored blob and check every stored file
version, and every recorded "could not read", against its revision's tree (`tracker.store.verify`).

Exit 0 when everything matches; 1 when anything does not (one line per problem on stdout, the
count on stderr); the store's own failures keep their exit codes (6).
"""

from __future__ import annotations

import json

import typer


def verify_command(
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Check the store: every blob against its address, every file version and every recorded
    "could not read" against its tree."""
    from tracker.app import build
    from tracker.settings import load_settings
    from tracker.store.verify import verify_store

    settings = load_settings()
    app = build(settings)
    try:
        report = verify_store(app.store.engine, max_file_bytes=settings.max_file_bytes)
    finally:
        app.close()
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "ok": report.ok,
                    "blobs": report.blobs,
                    "file_versions": report.file_versions,
                    "revisions": report.revisions,
                    "problems": [{"where": p.where, "why": p.why} for p in report.problems],
                },
                indent=2,
            )
        )
    else:
        for problem in report.problems:
            typer.echo(problem.line())
    if report.ok:
        if not as_json:
            typer.echo(report.summary())
        return
    typer.echo(report.summary(), err=True)
    raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add `tracker verify` to `app`."""
    app.command("verify")(verify_command)
