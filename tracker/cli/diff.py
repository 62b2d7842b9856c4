"""CLI command `tracker diff REPO A B [--kind K] [--json]`: semantic diff of two ingested revisions."""

from __future__ import annotations

from typing import Annotated

import typer

from tracker.shared.domain import Artifact, parse_repo_id
from tracker.shared.errors import ConfigError

_KINDS = ", ".join(a.value for a in Artifact if a is not Artifact.ESTIMATE)


def _parse_kinds(values: list[str] | None) -> frozenset[Artifact] | None:
    """`--kind` values (repeatable, comma-separated allowed) as artifacts; ConfigError for unknown ones."""
    if not values:
        return None
    wanted: set[Artifact] = set()
    bad: list[str] = []
    for value in values:
        for part in (p.strip() for p in value.split(",")):
            if not part:
                continue
            try:
                artifact = Artifact(part)
            except ValueError:
                bad.append(part)
                continue
            if artifact is Artifact.ESTIMATE:
                bad.append(part)
            else:
                wanted.add(artifact)
    if bad:
        raise ConfigError("unknown --kind", tuple(f"{b!r} is not one of: {_KINDS}" for b in bad))
    return frozenset(wanted)


def diff_command(
    repo: Annotated[str, typer.Argument(help="Repo id ORG/NAME (as watched).")],
    a: Annotated[str, typer.Argument(help="Older revision: sha, short sha, ref, HEAD or HEAD~n.")],
    b: Annotated[str, typer.Argument(help="Newer revision: sha, short sha, ref, HEAD or HEAD~n.")],
    kind: Annotated[
        list[str] | None,
        typer.Option(
            "--kind", "-k", help=f"Only these artifacts (repeatable or comma-separated): {_KINDS}."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the diff as JSON.")] = False,
) -> None:
    """Show what changed between revisions A and B of REPO, artifact by artifact."""
    from tracker.app import build
    from tracker.diff.render import render_json, render_text
    from tracker.settings import load_settings
    from tracker.store.queries import diff_revisions

    repo_id = parse_repo_id(repo)
    kinds = _parse_kinds(kind)
    settings = load_settings()
    app = build(settings, read_only=True)
    try:
        diff = diff_revisions(app.store, settings, repo_id, a, b, kinds)
    finally:
        app.close()
    if as_json:
        typer.echo(render_json(diff), nl=False)
        return
    text = render_text(diff)
    from rich.console import Console
    from rich.markup import escape

    console = Console(highlight=False, soft_wrap=True)
    if not console.is_terminal:
        typer.echo(text, nl=False)
        return
    for line in text.splitlines():
        style = _style(line)
        console.print(f"[{style}]{escape(line)}[/]" if style else escape(line))


def _style(line: str) -> str:
    stripped = line.lstrip()
    if not line.startswith(" ") and line:
        return "bold"
    if line.startswith("      "):
        if stripped.startswith("+"):
            return "green"
        if stripped.startswith("-"):
            return "red"
        return "dim"
    return {"+": "green", "-": "red", "~": "yellow", ">": "cyan", "!": "bold red"}.get(
        stripped[:1], ""
    )


def register(app: typer.Typer) -> None:
    """Add `diff` to `app`."""
    app.command("diff")(diff_command)
