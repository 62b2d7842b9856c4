"""CLI command `tracker lineage ORG/NAME [--json]`: the lineage tracker knows around a repo.

Its base models (from its card's `base_model` and its GGUF files' `general.base_model.*`), and
the watched repos that name it as theirs, each with its state: `stale` (an open stale-derivative
advisory: it still has a value its base left), `up to date` (compared with the base's newest
revision, nothing stale), `not compared yet`, or `base unreadable` (with why).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from tracker.shared.domain import parse_repo_id
from tracker.shared.errors import StoreNotFoundError


def _line(node: dict[str, Any], role: str, depth: int) -> list[str]:
    pad = "  " * depth
    how = node["relation"] or "relation not said"
    where = "watched" if node["watched"] else "not watched"
    head = f", head {node['head'][:12]}" if node["head"] else ""
    state = node["state"]
    if state == "up to date":
        state += f" (base compared at {node['base_compared_at'][:12]})"
    elif state == "base unreadable":
        state += f": {node['base_error']}"
    out = [f"{pad}{role} {node['repo']} ({how}, via {node['via']}; {where}{head}): {state}"]
    if node["differs_from_base"]:
        what = ", ".join(
            f"{d['key']} ({d['file'] or 'own files'})" for d in node["differs_from_base"]
        )
        who = "differs from its base" if role == "derivative" else "the derivative differs"
        out.append(f"{pad}    {who} at the base revision compared: {what}")
    for a in node["advisories"]:
        out.append(f"{pad}    {a['id']} [{a['severity']}, {a['state']}] {a['summary']}")
    for child in node.get("bases", []):
        out += _line(child, "base", depth + 1)
    for child in node.get("derivatives", []):
        out += _line(child, "derivative", depth + 1)
    return out


def render_text(tree: dict[str, Any]) -> str:
    where = "watched" if tree["watched"] else "not watched"
    head = f", head {tree['head'][:12]}" if tree["head"] else ""
    lines = [f"{tree['repo']} ({where}{head})"]
    for node in tree["bases"]:
        lines += _line(node, "base", 1)
    for node in tree["derivatives"]:
        lines += _line(node, "derivative", 1)
    if not tree["bases"] and not tree["derivatives"]:
        lines.append("  no base model and no watched derivative known")
    return "\n".join(lines) + "\n"


def lineage_command(
    repo: Annotated[
        str, typer.Argument(help="Repo id ORG/NAME (watched, or a watched repo's base).")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print the tree as JSON.")] = False,
) -> None:
    """Show REPO's base models and watched derivatives, each with its state (stale or not)."""
    from tracker.app import build
    from tracker.lineage.check import lineage_tree
    from tracker.settings import load_settings
    from tracker.store.lineage import LineageStore

    repo_id = parse_repo_id(repo)
    settings = load_settings()
    app = build(settings, read_only=True)
    try:
        watched = {w.repo_id for w in app.load_watchlist().repos}
        tree = lineage_tree(
            app.store, app.advisories, LineageStore(app.store.engine), repo_id, watched
        )
    finally:
        app.close()
    if tree["head"] is None and not tree["bases"] and not tree["derivatives"]:
        raise StoreNotFoundError(
            f"{repo_id} is not in the store, and no watched repo names it as its base"
        )
    if as_json:
        typer.echo(json.dumps(tree, indent=2))
        return
    typer.echo(render_text(tree), nl=False)


def register(app: typer.Typer) -> None:
    """Add `tracker lineage` to `app`."""
    app.command("lineage")(lineage_command)
