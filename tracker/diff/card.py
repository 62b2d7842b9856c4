"""Model card diffs: YAML front matter key by key, and one `text` change for any body edit."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tracker.diff._common import (
    decode_text,
    digest,
    lifecycle,
    read_side,
    short_value,
    show,
    unified,
)
from tracker.shared.bounded import FRONT_MATTER, load_yaml
from tracker.shared.domain import Artifact, Change, ChangeKind, JSONValue, Snapshot
from tracker.shared.errors import UnreadableArtifactError

CARD_FILE = "README.md"
_ART = Artifact.MODEL_CARD


@dataclass(frozen=True)
class Card:
    """A parsed model card: front matter (JSON-able) and the body text (line endings normalised)."""

    front: dict[str, JSONValue]
    body: str


def _jsonable(value: Any) -> JSONValue:
    # YAML may give dates and other non-JSON scalars; keep them as their string form
    return json.loads(json.dumps(value, default=str, ensure_ascii=False))


def parse_card(path: str, data: bytes) -> Card:
    """Split a README into front matter (YAML, bounded: `tracker.shared.bounded.FRONT_MATTER`) and body.

    Raises UnreadableArtifactError for binary content, malformed YAML, front matter over its
    bounds (an alias bomb is refused, never expanded), or front matter that is not a mapping. A README without a leading `---` block has empty front matter.
    """
    text = decode_text(path, data).replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        return Card({}, text)
    for i in range(1, len(lines)):
        if lines[i].strip() in ("---", "..."):
            raw = "\n".join(lines[1:i])
            body = "\n".join(lines[i + 1 :])
            break
    else:
        raise UnreadableArtifactError(
            f"could not read {path}: front matter starts with '---' but never ends"
        )
    front = load_yaml(raw, path, FRONT_MATTER, kind="YAML front matter", first_line=2)
    if front is None:
        front = {}
    if not isinstance(front, dict):
        raise UnreadableArtifactError(
            f"could not read {path}: front matter is a {type(front).__name__}, not a mapping"
        )
    return Card({str(k): _jsonable(v) for k, v in front.items()}, body)


def diff_card(before: Snapshot | None, after: Snapshot) -> list[Change]:
    """Front-matter field changes (key = field name, sorted), then one `text` change if the body changed.

    Body comparison ignores line-ending style and trailing whitespace at line ends.
    """
    old = read_side(before, CARD_FILE, parse_card)
    new = read_side(after, CARD_FILE, parse_card)
    compare, changes = lifecycle(_ART, CARD_FILE, before is None, old, new)
    if not compare:
        return changes
    a: Card = old.value
    b: Card = new.value
    out: list[Change] = []
    for key in sorted(set(a.front) | set(b.front)):
        x, y = a.front.get(key, _MISSING), b.front.get(key, _MISSING)
        if x == y:
            continue
        if x is _MISSING:
            out.append(
                Change(
                    _ART,
                    ChangeKind.ADDED,
                    CARD_FILE,
                    key,
                    None,
                    short_value(y),
                    f"card {key} added: {show(y)}",
                )
            )
        elif y is _MISSING:
            out.append(
                Change(
                    _ART,
                    ChangeKind.REMOVED,
                    CARD_FILE,
                    key,
                    short_value(x),
                    None,
                    f"card {key} removed (was {show(x)})",
                )
            )
        else:
            out.append(
                Change(
                    _ART,
                    ChangeKind.CHANGED,
                    CARD_FILE,
                    key,
                    short_value(x),
                    short_value(y),
                    f"card {key} changed: {show(x, 60)} → {show(y, 60)}",
                )
            )
    if _norm(a.body) != _norm(b.body):
        out.append(
            Change(
                _ART,
                ChangeKind.CHANGED,
                CARD_FILE,
                "text",
                {"sha256": digest(a.body), "lines": a.body.count("\n") + 1},
                {"sha256": digest(b.body), "lines": b.body.count("\n") + 1},
                "card text changed",
                unified(a.body, b.body, CARD_FILE),
            )
        )
    return out


_MISSING: Any = object()


def _norm(body: str) -> str:
    return "\n".join(line.rstrip() for line in body.strip().split("\n"))
