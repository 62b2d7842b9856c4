"""Shared helpers of the differs: strict JSON loading, key-level JSON diffs, short values, ordering."""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, assert_never

from tracker.shared.bounded import NonFinite, bounds_for, load_json
from tracker.shared.domain import Artifact, Change, ChangeKind, JSONValue, Snapshot
from tracker.shared.errors import UnreadableArtifactError

MAX_VALUE_CHARS = 400
"""A before/after value whose JSON is longer than this is replaced by a short description."""

MAX_DETAIL_LINES = 400
"""Unified diffs in `detail` are cut after this many lines (the cut is said)."""


def decode_text(path: str, data: bytes) -> str:
    """Return `data` as UTF-8 text, or raise UnreadableArtifactError for binary/non-UTF-8 content."""
    if b"\x00" in data:
        raise UnreadableArtifactError(
            f"could not read {path}: binary content (NUL bytes), not text"
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UnreadableArtifactError(
            f"could not read {path}: not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from exc


def load_json_object(path: str, data: bytes) -> dict[str, JSONValue]:
    """Parse `data` as a JSON object within the bounds of its kind (`tracker.shared.bounded.bounds_for`).

    The constants NaN, Infinity and -Infinity, which Python's json and transformers read (Nemotron-H
    configs carry `time_step_limit: [0.0, Infinity]`), are kept as their names ("Infinity"), so a
    publisher's valid file is never "could not read" and NaN compares equal to itself.

    Raises UnreadableArtifactError ("could not read PATH: <why>") for binary content, invalid JSON
    (with json's line/column message), overflowing numbers, lone surrogates, nesting or size over
    the bounds, or a top level that is not an object.
    """
    if b"\x00" in data:
        raise UnreadableArtifactError(
            f"could not read {path}: binary content (NUL bytes), not text"
        )
    doc = load_json(data, path, bounds_for(path), nonfinite="text")
    if not isinstance(doc, dict):
        raise UnreadableArtifactError(
            f"could not read {path}: expected a JSON object at the top level, got {json_type(doc)}"
        )
    return doc


def json_type(value: JSONValue) -> str:
    """The JSON type name of a parsed value (`object`, `array`, `string`, `number`, `boolean`, `null`)."""
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, NonFinite):
        return "number"  # NaN / Infinity, kept as its name
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "null" if value is None else type(value).__name__


def normalise_numbers(value: JSONValue) -> JSONValue:
    """Return `value` with integral floats turned into ints (so `1.0` and `1` compare equal)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: normalise_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise_numbers(v) for v in value]
    return value


def canonical_json(value: JSONValue) -> str:
    """Stable JSON text of `value` (sorted keys, compact, numbers normalised)."""
    return json.dumps(
        normalise_numbers(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )


def digest(text: str | bytes) -> str:
    """First 16 hex digits of the sha256 of `text` (UTF-8 for str)."""
    raw = text.encode("utf-8") if isinstance(text, str) else text
    return hashlib.sha256(raw).hexdigest()[:16]


def short_value(value: JSONValue) -> JSONValue:
    """`value` itself when its JSON is short, else a one-line description with a digest."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    if len(text) <= MAX_VALUE_CHARS:
        return value
    if isinstance(value, list):
        return f"<array of {len(value)} items, sha256 {digest(canonical_json(value))}>"
    if isinstance(value, dict):
        return f"<object of {len(value)} keys, sha256 {digest(canonical_json(value))}>"
    if isinstance(value, str):
        return f"<string of {len(value)} characters, sha256 {digest(value)}>"
    return f"<{json_type(value)}, sha256 {digest(text)}>"


def show(value: JSONValue, limit: int = 80) -> str:
    """A one-line rendering of `value` for summaries, cut at `limit` characters."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def unified(before: str, after: str, name: str) -> str:
    """A unified diff of two texts (cut after MAX_DETAIL_LINES lines, saying so)."""
    lines = list(
        difflib.unified_diff(
            before.splitlines(keepends=False),
            after.splitlines(keepends=False),
            fromfile=f"a/{name}",
            tofile=f"b/{name}",
            lineterm="",
        )
    )
    if len(lines) > MAX_DETAIL_LINES:
        cut = len(lines) - MAX_DETAIL_LINES
        lines = [*lines[:MAX_DETAIL_LINES], f"... ({cut} more diff lines)"]
    return "\n".join(lines)


def key_of(parts: Iterable[Any]) -> str:
    """A canonical dotted key from path parts (`text_config.hidden_size`); odd names are bracketed."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part and all(c.isalnum() or c in "_-" for c in str(part)):
            out += ("." if out else "") + str(part)
        else:
            out += f"[{json.dumps(str(part), ensure_ascii=False)}]"
    return out


def _lookup(doc: JSONValue, parts: list[Any]) -> JSONValue:
    for part in parts:
        doc = doc[part]
    return doc


_MISSING = object()


def json_key_changes(
    artifact: Artifact,
    file: str,
    before: Mapping[str, JSONValue],
    after: Mapping[str, JSONValue],
    *,
    skip: frozenset[str] = frozenset(),
) -> list[Change]:
    """Key-level changes between two parsed JSON objects, found with deepdiff.

    Invariants: parsed-equal documents (key order, whitespace, `1.0` vs `1`) give no change;
    arrays are compared as whole values (one change keyed by the array's path); top-level keys
    in `skip` are ignored (another differ reports them). Output is sorted by key.
    """
    # deepdiff (with numpy) is imported here, not at module level: every CLI command imports
    # tracker.diff through the store, and most never diff (about 0.3 s of each start).
    from deepdiff import DeepDiff

    b = normalise_numbers({k: v for k, v in before.items() if k not in skip})
    a = normalise_numbers({k: v for k, v in after.items() if k not in skip})
    # ignore_private_variables=False: deepdiff otherwise skips keys starting with "__" (e.g. "__type")
    tree = DeepDiff(
        _arrays_as_text(b),
        _arrays_as_text(a),
        view="tree",
        verbose_level=2,
        ignore_private_variables=False,
    )
    seen: dict[str, Change] = {}
    for levels in tree.values():
        for level in levels:
            parts = list(level.path(output_format="list"))
            # Collapse anything inside an array onto the array itself.
            for i, part in enumerate(parts):
                if isinstance(part, int):
                    parts = parts[:i]
                    break
            key = key_of(parts)
            if key in seen:
                continue
            old = _get(b, parts)
            new = _get(a, parts)
            seen[key] = _value_change(artifact, file, key, old, new)
    return [seen[k] for k in sorted(seen)]


def _arrays_as_text(value: JSONValue) -> Any:
    """`value` with every array replaced by its canonical JSON text (a marker prefix keeps it apart
    from strings).

    Arrays are compared as whole values anyway, and deepdiff compares array items by hash, where
    `false == 0` and `true == 1`: `[false]` → `[0]` would be no change. Text keeps JSON types apart.
    """
    if isinstance(value, dict):
        return {k: _arrays_as_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return ("array", canonical_json(value))
    return value


def _get(doc: JSONValue, parts: list[Any]) -> Any:
    try:
        return _lookup(doc, parts)
    except (KeyError, IndexError, TypeError):
        return _MISSING


def _value_change(artifact: Artifact, file: str, key: str, old: Any, new: Any) -> Change:
    if old is _MISSING:
        return Change(
            artifact,
            ChangeKind.ADDED,
            file,
            key,
            None,
            short_value(new),
            f"{key} added: {show(new)}",
            _big_detail(None, new),
        )
    if new is _MISSING:
        return Change(
            artifact,
            ChangeKind.REMOVED,
            file,
            key,
            short_value(old),
            None,
            f"{key} removed (was {show(old)})",
            _big_detail(old, None),
        )
    same_type = json_type(old) == json_type(new) or old is None or new is None
    kind = ChangeKind.CHANGED if same_type else ChangeKind.TYPE_CHANGED
    verb = "changed" if same_type else f"changed type {json_type(old)} → {json_type(new)}"
    return Change(
        artifact,
        kind,
        file,
        key,
        short_value(old),
        short_value(new),
        f"{key} {verb}: {show(old, 60)} → {show(new, 60)}",
        _big_detail(old, new),
    )


def _big_detail(old: JSONValue, new: JSONValue) -> str:
    if short_value(old) is old and short_value(new) is new:
        return ""
    return unified(
        json.dumps(old, indent=2, sort_keys=True, ensure_ascii=False) if old is not None else "",
        json.dumps(new, indent=2, sort_keys=True, ensure_ascii=False) if new is not None else "",
        "value",
    )


def unreadable_change(artifact: Artifact, file: str, reason: str, key: str = "") -> Change:
    """The UNREADABLE change for `file` ("could not read ..." in the summary)."""
    summary = reason if reason.startswith("could not") else f"could not read {file}: {reason}"
    return Change(artifact, ChangeKind.UNREADABLE, file, key, None, reason, summary)


class SideState(StrEnum):
    """What one revision says about one tracked file."""

    ABSENT = "absent"  # not in the tree
    UNTRACKED = "untracked"  # in the tree but not fetched: nothing is known
    UNREADABLE = "unreadable"  # the snapshot says so, or parsing failed
    OK = "ok"  # parsed: `Side.value`


@dataclass(frozen=True)
class Side:
    """One revision's side of a tracked file: its state, the parsed value (OK) or why not (UNREADABLE)."""

    state: SideState
    value: Any = None
    reason: str = ""


def read_side(snap: Snapshot | None, path: str, parse: Any) -> Side:
    """Load `path` from `snap` through `parse(path, bytes)`: ABSENT, UNTRACKED, UNREADABLE (the
    snapshot says so, or `parse` raised UnreadableArtifactError) or OK with the parsed value."""
    if snap is None:
        return Side(SideState.ABSENT)
    if path in snap.unreadable:
        reason = snap.unreadable[path]
        if not reason.startswith("could not"):
            reason = f"could not read {path}: {reason}"
        return Side(SideState.UNREADABLE, reason=reason)
    data = snap.files.get(path)
    if data is None:
        return Side(SideState.UNTRACKED if path in snap.paths else SideState.ABSENT)
    try:
        return Side(SideState.OK, parse(path, data))
    except UnreadableArtifactError as exc:
        return Side(SideState.UNREADABLE, reason=str(exc))


def path_change(
    artifact: Artifact,
    kind: ChangeKind,
    path: str,
    before: JSONValue,
    after: JSONValue,
    summary: str,
    detail: str = "",
) -> Change:
    """A change to one whole file, keyed by its path (remote code and pickle files)."""
    return Change(artifact, kind, path, path, before, after, summary, detail)


class Transition(StrEnum):
    """What happened to a file between two sides, from their states alone."""

    NONE = "none"  # nothing to report (also: nothing can be known)
    UNREADABLE = "unreadable"  # unreadable now (and not for the same reason before)
    READABLE_AGAIN = "readable_again"
    ADDED = "added"
    REMOVED = "removed"
    COMPARE = "compare"  # readable at both sides: compare the values


def transition(first: bool, old: Side, new: Side) -> Transition:
    """What the two sides' states say happened; on the first revision only UNREADABLE counts."""
    if new.state is SideState.UNREADABLE:
        same = old.state is SideState.UNREADABLE and old.reason == new.reason
        return Transition.NONE if same and not first else Transition.UNREADABLE
    if first or SideState.UNTRACKED in (old.state, new.state):
        return Transition.NONE
    match (old.state, new.state):
        case (SideState.UNREADABLE, SideState.OK):
            return Transition.READABLE_AGAIN
        case (SideState.ABSENT, SideState.OK):
            return Transition.ADDED
        case (SideState.OK | SideState.UNREADABLE, SideState.ABSENT):
            return Transition.REMOVED
        case (SideState.OK, SideState.OK):
            return Transition.COMPARE
    return Transition.NONE  # absent at both sides


def lifecycle(
    artifact: Artifact, path: str, first: bool, old: Side, new: Side
) -> tuple[bool, list[Change]]:
    """Changes that follow from the two sides' states alone; `(compare_values, changes)`.

    `compare_values` is True only when both sides are ok and the caller should diff the values.
    On the first revision (`first`), only an unreadable file is reported.
    """
    step = transition(first, old, new)
    match step:
        case Transition.NONE:
            return False, []
        case Transition.COMPARE:
            return True, []
        case Transition.UNREADABLE:
            return False, [unreadable_change(artifact, path, new.reason)]
        case Transition.READABLE_AGAIN:
            summary = f"{path} is readable again (was: {old.reason})"
            return False, [
                Change(artifact, ChangeKind.CHANGED, path, "", old.reason, None, summary)
            ]
        case Transition.ADDED:
            return False, [
                Change(artifact, ChangeKind.ADDED, path, "", None, path, f"{path} added")
            ]
        case Transition.REMOVED:
            return False, [
                Change(artifact, ChangeKind.REMOVED, path, "", path, None, f"{path} removed")
            ]
        case _:
            assert_never(step)
