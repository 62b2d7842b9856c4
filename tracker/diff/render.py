"""Text and JSON renderings of a Diff (stable bytes: golden-file tested)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from itertools import groupby

from tracker.shared.domain import ChangeKind, Diff

CHANGE_MARKS: Mapping[ChangeKind, str] = {
    ChangeKind.ADDED: "+",
    ChangeKind.REMOVED: "-",
    ChangeKind.CHANGED: "~",
    ChangeKind.TYPE_CHANGED: "~",
    ChangeKind.RENAMED: ">",
    ChangeKind.RESHAPED: "~",
    ChangeKind.RETYPED: "~",
    ChangeKind.RENDERED: "~",
    ChangeKind.BROKEN: "!",
    ChangeKind.UNREADABLE: "!",
    ChangeKind.FIT_LOST: "!",
    ChangeKind.FIT_GAINED: "+",
}
"""The one-character mark of each change kind in the text rendering."""
DETAIL_LINES = 60
"""Text output shows at most this many detail lines per change (JSON output keeps all of it)."""


def render_json(diff: Diff) -> str:
    """The diff as JSON: `{repo_id, before, after, count, changes: [...]}`, sorted keys, 2-space indent, final newline."""
    doc = {
        "repo_id": diff.repo_id,
        "before": diff.before,
        "after": diff.after,
        "count": len(diff.changes),
        "changes": [c.to_json() for c in diff.changes],
    }
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def render_text(diff: Diff, *, detail_lines: int = DETAIL_LINES) -> str:
    """A readable report: a header, then changes grouped by artifact, one line each, details indented.

    Each line is `  <mark> <kind> <file>[ <key>]: <summary>`; marks: + added, - removed, ~ changed,
    > renamed, ! broken/unreadable. Details are cut at `detail_lines` lines (saying how many more).
    """
    before = diff.before[:12] if diff.before else "(first revision)"
    lines = [f"{diff.repo_id} {before} → {diff.after[:12]}: {_count(len(diff.changes))}"]
    for artifact, group in groupby(diff.changes, key=lambda c: c.artifact):
        changes = list(group)
        lines.append("")
        lines.append(f"{artifact.value} ({_count(len(changes))})")
        for c in changes:
            where = c.file + (f" {c.key}" if c.key and c.key != c.file else "")
            lines.append(f"  {CHANGE_MARKS[c.kind]} {c.kind.value} {where}: {c.summary}")
            if c.detail:
                detail = c.detail.splitlines()
                shown = detail[:detail_lines]
                lines.extend(f"      {d}" for d in shown)
                if len(detail) > len(shown):
                    lines.append(f"      … {len(detail) - len(shown)} more lines (see --json)")
    return "\n".join(lines) + "\n"


def _count(n: int) -> str:
    return f"{n} change" + ("" if n == 1 else "s")
