"""CLI commands: `tracker team list|show|affected` over the watchlist's `teams:` block and the
advisory store."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tracker.cli.tables import Col, console, print_table

if TYPE_CHECKING:
    from tracker.teams.profile import Team


def _built() -> Any:
    from tracker.app import build
    from tracker.settings import load_settings

    return build(load_settings(), read_only=True)


def _watchlist() -> Any:
    from tracker.settings import load_settings
    from tracker.watchlist import load_watchlist

    return load_watchlist(load_settings().watchlist)


def _said(value: object) -> str:
    if value is None:
        return "unknown"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, tuple):
        return ", ".join(value) or "none"
    return str(value)


def show_lines(t: Team) -> list[str]:
    lines = [f"team {t.name}" + (f": {t.description}" if t.description else "")]
    lines.append(f"  cards: {t.cards if t.cards else 'unknown'}")
    lines.append(f"  transformers: {_said(t.transformers)}; vLLM: {_said(t.vllm)}")
    for r in t.repos:
        lines.append(f"  {r.repo_id}: {r.position}")
        if r.workloads is None:
            lines.append("    workloads: unknown")
        for w in r.workloads or ():
            lines.append(f"    workload: {w}")
        lines.append(f"    generation settings it passes: {_said(r.generation)}")
        lines.append(
            f"    chat template: {_said(r.chat_template)}; tokenizer padding: {_said(r.padding)}; "
            f"classification head: {_said(r.classification_head)}; remote code: "
            f"{_said(r.trust_remote_code)}"
        )
    return lines


def register(app: typer.Typer) -> None:
    """Add the `team` command group to `app`."""
    group = typer.Typer(
        help="Team profiles (the watchlist's teams:) and the advisories that affect each.",
        no_args_is_help=True,
    )
    app.add_typer(group, name="team")

    @group.command("list")
    def list_(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
        """The teams of the watchlist: repos, cards, versions."""
        teams = _watchlist().teams
        if as_json:
            from tracker.teams.service import team_json

            typer.echo(json.dumps([team_json(t) for t in teams], indent=2, sort_keys=True))
            return
        if not teams:
            typer.echo("no teams: the watchlist has no teams: block")
            return
        print_table(
            console(),
            None,
            [
                Col("team", keep=True),
                Col("cards", 1),
                Col("transformers", 2, keep=True),
                Col("vllm", 3, keep=True),
                Col("repos"),
            ],
            [
                [
                    t.name,
                    str(t.cards) if t.cards else "unknown",
                    _said(t.transformers),
                    _said(t.vllm),
                    ", ".join(f"{r.repo_id} ({r.position})" for r in t.repos),
                ]
                for t in teams
            ],
        )

    @group.command("show")
    def show(
        name: Annotated[str, typer.Argument(metavar="NAME")],
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    ) -> None:
        """One team's profile; what it leaves out is shown as unknown."""
        team = _watchlist().team(name)
        if as_json:
            from tracker.teams.service import team_json

            typer.echo(json.dumps(team_json(team), indent=2, sort_keys=True))
            return
        for line in show_lines(team):
            typer.echo(line)

    @group.command("affected")
    def affected(
        name: Annotated[str, typer.Argument(metavar="NAME")],
        every: Annotated[
            bool, typer.Option("--all", help="Every advisory, not only the team's repos'.")
        ] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    ) -> None:
        """Every advisory of the team's repos: affected, affects the next upgrade, not affected
        or unknown, each with the reason."""
        team = _watchlist().team(name)
        from tracker.teams.service import affected_rows

        built = _built()
        try:
            rows = affected_rows(built, team, every=every)
        finally:
            built.close()
        if as_json:
            typer.echo(json.dumps(rows, indent=2, sort_keys=True))
            return
        for r in rows:
            missing = f" [profile lacks: {', '.join(r['missing'])}]" if r["missing"] else ""
            typer.echo(f"{r['advisory']} {r['severity']} {r['repo']}: {r['summary']}")
            typer.echo(f"  {r['impact']}: {r['reason']}{missing}")
        counts: dict[str, int] = {}
        for r in rows:
            counts[r["impact"]] = counts.get(r["impact"], 0) + 1
        order = ("affected", "affects your next upgrade", "unknown", "not affected")
        typer.echo(
            f"team {team.name}: {len(rows)} advisories: "
            + ", ".join(f"{counts.get(k, 0)} {k}" for k in order)
        )

    @group.command("report")
    def report(
        name: Annotated[str, typer.Argument(metavar="NAME")],
        repo: Annotated[str, typer.Argument(metavar="ORG/NAME")],
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    ) -> None:
        """The upgrade report of a team on one repo: from its pinned revision to HEAD, the
        advisories that apply to its profile, its workloads' fit on its cards and the remote
        code's import on its transformers version at both ends, and a verdict."""
        from tracker.shared.errors import StoreNotFoundError
        from tracker.teams.service import report_json, report_of

        team = _watchlist().team(name)
        built = _built()
        try:
            got = report_of(built, team, repo)
        finally:
            built.close()
        if isinstance(got, str):
            raise StoreNotFoundError(f"{repo}: team {name}'s place in the history: {got}")
        if as_json:
            typer.echo(json.dumps(report_json(got), indent=2, sort_keys=True))
            return
        for line in report_lines(got):
            typer.echo(line)


def report_lines(r: Any) -> list[str]:
    """The upgrade report as text."""
    lines = [
        f"team {r.team} on {r.repo_id}: {r.pinned[:12]} → HEAD {r.head[:12]} "
        f"({r.behind} revision{'s' if r.behind != 1 else ''})",
        f"verdict: {r.decision.value}",
    ]
    lines += [f"  - {w}" for w in r.why]
    sections = (
        ("applies to this profile after the upgrade", r.applies),
        ("unknown for this profile", r.unknown),
        ("fixed by the upgrade", r.fixed),
        ("affects the pin and HEAD alike", r.stays),
    )
    for title, items in sections:
        if items:
            lines.append(f"{title}:")
            lines += [f"  {i.id} {i.severity.value}: {i.summary}" for i in items]

    def at(b: int | None) -> str:
        return "no estimate" if b is None else f"largest batch {b}"

    for f in r.fits:
        lines.append(f"fit: {f.workload}: {at(f.at_pin)} at the pin, {at(f.at_head)} at HEAD")
    if r.imports is not None:
        said = {True: "imports", False: "does not import", None: "not checked"}
        lines.append(
            f"remote code on transformers {r.imports.version}: {said[r.imports.at_pin]} at the "
            f"pin, {said[r.imports.at_head]} at HEAD"
        )
    return lines
