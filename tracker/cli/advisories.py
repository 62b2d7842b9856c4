"""CLI commands: `tracker advisories list|show|export` over the advisory store."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from tracker.errors import ConfigError, StoreNotFoundError
from tracker.settings import load_settings


def _store() -> tuple[Any, Any]:
    from tracker.app import build

    app = build(load_settings())
    return app, app.advisories


def _since(text: str | None) -> datetime | None:
    """A lower bound from a date or datetime (UTC assumed when naive), to whole seconds as the
    records' timestamps are."""
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
        return (
            (when if when.tzinfo else when.replace(tzinfo=UTC))
            .astimezone(UTC)
            .replace(microsecond=0)
        )
    except ValueError as exc:
        raise ConfigError(f"--since {text!r} is not an ISO date or datetime") from exc


def register(app: typer.Typer) -> None:
    """Add the `advisories` command group to `app`."""
    group = typer.Typer(help="OSV advisories: list, show, export.", no_args_is_help=True)
    app.add_typer(group, name="advisories")

    @group.command("list")
    def list_(
        repo: Annotated[str | None, typer.Option(help="Only this repo (ORG/NAME).")] = None,
        severity: Annotated[
            str | None, typer.Option(help="critical, high, moderate or low.")
        ] = None,
        since: Annotated[
            str | None, typer.Option(help="Only advisories modified since (ISO date).")
        ] = None,
        suppressed: Annotated[
            bool, typer.Option("--suppressed", help="List suppressed changes instead.")
        ] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    ) -> None:
        """List advisories (id, severity, state, summary), ordered by id."""
        from tracker.advisories.lifecycle import state_of
        from tracker.domain import Severity, parse_repo_id, rfc3339

        sev = None
        if severity is not None:
            try:
                sev = Severity(severity)
            except ValueError as exc:
                raise ConfigError(
                    f"--severity must be one of {', '.join(s.value for s in Severity)}"
                ) from exc
        repo_id = parse_repo_id(repo) if repo else None
        bound = _since(since)
        built, store = _store()
        try:
            if suppressed:
                rows = [
                    {
                        "repo": s.repo_id,
                        "sha": s.sha,
                        "group": s.group,
                        "severity": s.severity.value,
                        "reason": s.reason,
                        "key": s.change.get("key"),
                        "summary": s.change.get("summary"),
                        "recorded_at": rfc3339(s.recorded_at),
                    }
                    for s in store.suppressed(repo_id=repo_id)
                    if (sev is None or s.severity is sev)
                    and (bound is None or s.recorded_at >= bound)
                ]
                if as_json:
                    typer.echo(json.dumps(rows, indent=2, sort_keys=True))
                else:
                    for r in rows:
                        typer.echo(
                            f"{r['repo']}@{r['sha'][:12]}  {r['severity']:<8}  {r['key']}  ({r['reason']})"
                        )
                return
            advs = store.list_advisories(repo_id=repo_id, severity=sev, since=bound)
            rows = [
                {
                    "id": a.id,
                    "repo": a.repo_id,
                    "introduced": a.introduced,
                    "group": a.group,
                    "severity": a.severity.value,
                    "modified": a.record["modified"],
                    "state": state_of(a.record).value,
                    "summary": a.record.get("summary", ""),
                }
                for a in advs
            ]
            if as_json:
                typer.echo(json.dumps(rows, indent=2, sort_keys=True))
            else:
                for r in rows:
                    typer.echo(f"{r['id']:<22} {r['severity']:<8} {r['state']:<9} {r['summary']}")
        finally:
            built.close()

    @group.command("show")
    def show(
        advisory_id: Annotated[str, typer.Argument(metavar="ID")],
        as_json: Annotated[bool, typer.Option("--json", help="Print the OSV record.")] = False,
    ) -> None:
        """Show one advisory: its OSV record (--json) or summary and details."""
        built, store = _store()
        try:
            adv = store.get(advisory_id)
        finally:
            built.close()
        if adv is None:
            raise StoreNotFoundError(f"no advisory {advisory_id!r}")
        if as_json:
            typer.echo(json.dumps(adv.record, indent=2, sort_keys=True, ensure_ascii=False))
            return
        from tracker.advisories.lifecycle import state_of

        rec = adv.record
        typer.echo(
            f"{adv.id}  [{adv.severity.value}, {state_of(rec).value}]  modified {rec['modified']}"
        )
        typer.echo(rec.get("summary", ""))
        typer.echo("")
        typer.echo(rec.get("details", ""))

    @group.command("export")
    def export_(directory: Annotated[Path, typer.Argument(metavar="DIR")]) -> None:
        """Write every advisory as `<id>.json` plus `modified_id.csv` (OSV data-source layout)."""
        from tracker.advisories.export import export

        built, store = _store()
        try:
            paths = export(store.list_advisories(), directory)
        finally:
            built.close()
        typer.echo(f"wrote {len(paths) - 1} advisories to {directory}")
