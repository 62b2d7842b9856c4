"""CLI commands: `tracker advisories list|show|export` over the advisory store."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from tracker.cli.tables import Col, console, print_table
from tracker.settings import load_settings
from tracker.shared.errors import ConfigError, NoStoreError, StoreNotFoundError


def _store() -> tuple[Any, Any]:
    from tracker.app import build

    app = build(load_settings(), read_only=True)
    return app, app.advisories


def register(app: typer.Typer) -> None:
    """Add the `advisories` command group to `app`."""
    group = typer.Typer(help="OSV advisories: list, show, export.", no_args_is_help=True)
    app.add_typer(group, name="advisories")

    @group.command("list")
    def list_(
        repo: Annotated[
            list[str] | None, typer.Option(help="Only this repo (ORG/NAME); repeatable.")
        ] = None,
        severity: Annotated[
            list[str] | None,
            typer.Option(help="Only this severity (critical, high, moderate, low); repeatable."),
        ] = None,
        min_severity: Annotated[
            list[str] | None,
            typer.Option(
                help="This severity or worse: `--min-severity high` = high and critical; "
                "repeatable (the lowest counts)."
            ),
        ] = None,
        kind: Annotated[
            list[str] | None,
            typer.Option(help="Only this change kind (advisory group: config, …); repeatable."),
        ] = None,
        since: Annotated[
            list[str] | None,
            typer.Option(
                help="Only advisories modified (as shown, to the second) at or after: RFC 3339, or an ISO date or date-time read as UTC; repeatable (the earliest counts)."
            ),
        ] = None,
        state: Annotated[
            list[str] | None,
            typer.Option(help="Only this state (open, fixed, withdrawn); repeatable."),
        ] = None,
        suppressed: Annotated[
            bool, typer.Option("--suppressed", help="List suppressed changes instead.")
        ] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    ) -> None:
        """List advisories (id, severity, state, summary), ordered by id.

        Filters combine: every one given must hold; a filter given several times matches any of
        its values. Severities, kinds and states are case-insensitive. `/v1/advisories` applies
        the same filters (`tracker.store.queries.advisory_filter`).
        """
        from tracker.advisories.lifecycle import state_of
        from tracker.shared.domain import Artifact, parse_rfc3339, rfc3339
        from tracker.store.queries import FilterError, advisory_filter

        try:
            where = advisory_filter(
                repos=repo or (),
                severities=severity or (),
                min_severities=min_severity or (),
                kinds=kind or (),
                states=state or (),
                since=since or (),
                name=lambda f: "--" + f.replace("_", "-"),
            )
        except FilterError as exc:
            raise ConfigError(str(exc)) from exc
        bound = where.since
        stateless = dataclasses.replace(where, states=None)
        try:
            built, store = _store()
        except NoStoreError as exc:  # nothing published yet: an empty list, and why
            typer.echo(f"note: {exc}", err=True)
            if as_json:
                typer.echo("[]")
            return
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
                    for s in store.suppressed()
                    # a suppressed change has no state: --state does not apply to it
                    if stateless.admits(
                        s.repo_id, s.severity, Artifact(s.group), None, s.recorded_at
                    )
                ]
                if as_json:
                    typer.echo(json.dumps(rows, indent=2, sort_keys=True))
                else:
                    print_table(
                        console(),
                        None,
                        [
                            Col("repo", keep=True),
                            Col("sha", keep=True),
                            Col("severity", keep=True),
                            Col("key", 1),
                            Col("reason", 2),
                        ],
                        [
                            [r["repo"], r["sha"][:12], r["severity"], str(r["key"]), r["reason"]]
                            for r in rows
                        ],
                    )
                return
            advs = [
                a
                for a in store.list_advisories(since=bound)
                if where.admits(
                    a.repo_id,
                    a.severity,
                    Artifact(a.group),
                    state_of(a.record),
                    parse_rfc3339(a.record["modified"]),
                )
            ]
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
                print_table(
                    console(),
                    None,
                    [
                        Col("id", keep=True),
                        Col("severity", keep=True),
                        Col("state", 1, keep=True),
                        # the repo on its own line, whole; the summary wraps under it
                        Col(
                            "repo: summary",
                            min_width=max((len(r["repo"]) for r in rows), default=0),
                        ),
                    ],
                    [
                        [
                            r["id"],
                            r["severity"],
                            r["state"],
                            f"{r['repo']}:\n{r['summary'].removeprefix(r['repo'] + ': ')}",
                        ]
                        for r in rows
                    ],
                )
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
        head = (
            f"{adv.id}  [{adv.severity.value}, {state_of(rec).value}]  modified {rec['modified']}"
        )
        out = console()
        if out.is_terminal:  # rendered for a terminal; raw Markdown for pipes and files
            from rich.markdown import Markdown

            out.print(head, markup=False, highlight=False)
            out.print(str(rec.get("summary", "")), markup=False, highlight=False)
            out.print()
            out.print(Markdown(str(rec.get("details", ""))))
            return
        typer.echo(head)
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
