"""Special tokens (bos/eos/pad/unk and their ids) resolved across files; each effective change once."""

from __future__ import annotations

from typing import Any

from tracker.diff._common import Side, json_type, load_json_object, read_side, show
from tracker.diff.config import CONFIG_FILE, GENERATION_CONFIG_FILE, TOKEN_ID_KEYS
from tracker.diff.tokenizer import SPECIAL_TOKEN_NAMES, TOKENIZER_CONFIG_FILE
from tracker.domain import Artifact, Change, ChangeKind, JSONValue, Snapshot

SPECIAL_TOKENS_MAP_FILE = "special_tokens_map.json"

TOKEN_SOURCES = (TOKENIZER_CONFIG_FILE, SPECIAL_TOKENS_MAP_FILE)
"""Where a token string is looked up, first wins (tokenizer_config.json over special_tokens_map.json)."""

ID_SOURCES = (GENERATION_CONFIG_FILE, CONFIG_FILE)
"""Where a token id is looked up, first wins (generation uses generation_config.json over config.json)."""

_UNKNOWN = object()
_UNSET = object()


def _token_value(raw: JSONValue) -> JSONValue:
    """The token string of a tokenizer_config / special_tokens_map entry (AddedToken dicts → content)."""
    if isinstance(raw, dict) and "content" in raw:
        return raw["content"]
    if isinstance(raw, list):
        return [_token_value(x) for x in raw]
    return raw


def _resolve(sides: dict[str, Side], key: str, sources: tuple[str, ...]) -> tuple[Any, str]:
    """(value, file) of `key` from the first source that sets it; value _UNSET if none does.

    Returns (_UNKNOWN, "") when a source consulted before the answer is unreadable or not fetched,
    since the effective value cannot then be known.
    """
    for path in sources:
        side = sides[path]
        if side.state in ("unreadable", "untracked"):
            return _UNKNOWN, ""
        if side.state == "ok" and key in side.value:
            return _token_value(side.value[key]), path
    return _UNSET, ""


def _sides(snap: Snapshot | None) -> dict[str, Side]:
    paths = frozenset(e.path for e in snap.tree) if snap is not None else frozenset()
    return {p: read_side(snap, paths, p, load_json_object) for p in (*TOKEN_SOURCES, *ID_SOURCES)}


def effective_special_tokens(snap: Snapshot) -> dict[str, JSONValue]:
    """The resolved special tokens of `snap` (name → value) for keys set and knowable; for rendering."""
    sides = _sides(snap)
    out: dict[str, JSONValue] = {}
    for name in SPECIAL_TOKEN_NAMES:
        value, _ = _resolve(sides, name, TOKEN_SOURCES)
        if value is not _UNKNOWN and value is not _UNSET:
            out[name] = value
    return out


def diff_special_tokens(before: Snapshot | None, after: Snapshot) -> list[Change]:
    """Effective special-token changes, keys `bos_token`, ..., `eos_token_id`, ... (one change each).

    `file` is the file the after-value comes from (or the before-value's file when removed).
    Nothing is reported on the first revision or when either side cannot be known.
    """
    if before is None:
        return []
    old_sides, new_sides = _sides(before), _sides(after)
    out: list[Change] = []
    plan = [(n, TOKEN_SOURCES) for n in SPECIAL_TOKEN_NAMES] + [
        (k, ID_SOURCES) for k in sorted(TOKEN_ID_KEYS)
    ]
    for key, sources in plan:
        old, old_file = _resolve(old_sides, key, sources)
        new, new_file = _resolve(new_sides, key, sources)
        if old is _UNKNOWN or new is _UNKNOWN or (old == new and json_type(old) == json_type(new)):
            continue
        file = new_file or old_file
        moved = (
            f" (now from {new_file}, was {old_file})"
            if old_file and new_file and old_file != new_file
            else ""
        )
        if old is _UNSET:
            out.append(
                Change(
                    Artifact.SPECIAL_TOKENS,
                    ChangeKind.ADDED,
                    file,
                    key,
                    None,
                    new,
                    f"{key} set to {show(new)} in {file}",
                )
            )
        elif new is _UNSET:
            out.append(
                Change(
                    Artifact.SPECIAL_TOKENS,
                    ChangeKind.REMOVED,
                    file,
                    key,
                    old,
                    None,
                    f"{key} no longer set (was {show(old)} from {old_file})",
                )
            )
        else:
            same = json_type(old) == json_type(new) or old is None or new is None
            kind = ChangeKind.CHANGED if same else ChangeKind.TYPE_CHANGED
            out.append(
                Change(
                    Artifact.SPECIAL_TOKENS,
                    kind,
                    file,
                    key,
                    old,
                    new,
                    f"{key} changed: {show(old)} → {show(new)}{moved}",
                )
            )
    return out
