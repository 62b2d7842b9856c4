"""CLI command `tracker verify [--json]`: re-hash every stored blob and check every stored file
version, and every recorded "could not read", against its revision's tree (`tracker.store.verify`).

Exit 0 when everything matches; 1 when anything does not (one line per problem on stdout, the
count on stderr); the store's own failures keep their exit codes (6).

`tracker repair` (or `tracker verify --repair`) mends what releases before issue 26 recorded from
a fault of the transport (`tracker.repair`): one line per repo repaired (files read again,
advisories withdrawn, published and rewritten) and per advisory withdrawn, with the reason. Exit 0
when nothing was suspect or every repo was repaired; 1 when a repo could not be (its suspect file
still cannot be read, or its analysis failed: it is left as it was, the reason on stderr); the
store's own failures keep their exit codes (6).
"""

from __future__ import annotations

import json

import typer


def verify_command(
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    repair: bool = typer.Option(
        False, "--repair", help="Then repair what is suspect, as `tracker repair` does."
    ),
) -> None:
    """Check the store: every blob against its address, every file version and every recorded
    "could not read" against its tree."""
    if repair:
        repair_command(as_json=as_json)
        return
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


def repair_command(
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Read again every file an earlier release recorded as "could not read" from a fault of the
    transport, analyse its repo again, and withdraw the advisories only that fault produced
    (with the reason) and publish the real ones."""
    from tracker.app import build
    from tracker.repair import repair
    from tracker.settings import load_settings

    settings = load_settings()
    app = build(settings)
    try:
        report = repair(app)
    finally:
        app.close()
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "ok": report.ok,
                    "repos": [
                        {
                            "repo": r.repo_id,
                            "read_again": list(r.refetched),
                            "withdrawn": [{"id": i, "reason": why} for i, why in r.withdrawn],
                            "published": list(r.published),
                            "updated": list(r.updated),
                            "error": r.error,
                        }
                        for r in report.repos
                    ],
                },
                indent=2,
            )
        )
    else:
        for r in report.repos:
            if r.error is not None:
                continue
            typer.echo(
                f"{r.repo_id}: read {len(r.refetched)} files again; "
                f"{len(r.withdrawn)} advisories withdrawn, {len(r.published)} published, "
                f"{len(r.updated)} rewritten"
            )
            for adv_id, why in r.withdrawn:
                typer.echo(f"  withdrawn {adv_id}: {why}")
            for adv_id in r.published:
                typer.echo(f"  published {adv_id}")
            for adv_id in r.updated:
                typer.echo(f"  rewritten {adv_id}")
        if not report.repos:
            typer.echo("nothing to repair: no recorded 'could not read' is suspect")
    for r in report.repos:
        if r.error is not None:
            typer.echo(f"{r.repo_id}: {r.error}", err=True)
    if not report.ok:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add `tracker verify` and `tracker repair` to `app`."""
    app.command("verify")(verify_command)
    app.command("repair")(repair_command)
