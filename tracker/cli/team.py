"""CLI commands: `tracker team list|show|affected` over the watchlist's `teams:` block and the
advisory store."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tracker.cli.tables import Col, console, print_table

if TYPE_CHECKING:
    from tracker.teams.impact import Verdict
    from tracker.teams.profile import Team, TeamRepo


def _watchlist() -> Any:
    from tracker.settings import load_settings
    from tracker.watchlist import load_watchlist

    return load_watchlist(load_settings().watchlist)


def repo_json(r: TeamRepo) -> dict[str, Any]:
    return {
        "repo": r.repo_id,
        "revision": r.revision,
        "follows": r.follows,
        "workloads": None
        if r.workloads is None
        else [
            {
                "kind": w.kind,
                "rank": w.rank,
                "context": w.context,
                "batch": w.batch,
                "sharding": w.sharding,
                "engine": w.engine,
                "tensor_parallel": w.tensor_parallel,
            }
            for w in r.workloads
        ],
        "generation": r.generation if r.generation in (None, "all") else list(r.generation or ()),
        "chat_template": r.chat_template,
        "padding": r.padding,
        "classification_head": r.classification_head,
        "trust_remote_code": r.trust_remote_code,
    }


def team_json(t: Team) -> dict[str, Any]:
    return {
        "name": t.name,
        "description": t.description,
        "cards": None
        if t.cards is None
        else {"name": t.cards.name, "count": t.cards.count, "vram_gb": t.cards.vram_gb},
        "transformers": t.transformers,
        "vllm": t.vllm,
        "repos": [repo_json(r) for r in t.repos],
    }


def verdict_json(v: Verdict, severity: str, summary: str) -> dict[str, Any]:
    return {
        "advisory": v.advisory_id,
        "repo": v.repo_id,
        "team": v.team,
        "severity": severity,
        "summary": summary,
        "impact": v.impact.value,
        "reason": v.reason,
        "missing": list(v.missing),
    }


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


def affected_rows(team: Team, *, every: bool) -> list[dict[str, Any]]:
    """Every advisory of the team's repos (`every`: of all repos) judged for `team`."""
    from tracker.app import build
    from tracker.settings import load_settings
    from tracker.teams.facts import StoreFacts
    from tracker.teams.impact import judge

    app = build(load_settings(), read_only=True)
    try:
        facts = StoreFacts(app.store, app.preflight)
        if every:
            advisories = app.advisories.list_advisories()
        else:
            advisories = [
                a for r in team.repos for a in app.advisories.list_advisories(repo_id=r.repo_id)
            ]
        from tracker.store.advisories.values import id_key

        advisories.sort(key=lambda a: id_key(a.id))
        rows = []
        for a in advisories:
            summary = str(a.record.get("summary", "")).removeprefix(f"{a.repo_id}: ")
            rows.append(verdict_json(judge(a, team, facts), a.severity.value, summary))
        return rows
    finally:
        app.close()


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
        rows = affected_rows(team, every=every)
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
