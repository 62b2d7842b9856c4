"""Special tokens (bos/eos/pad/unk and their ids) resolved across files; each effective change once."""

from __future__ import annotations

from typing import Any

from tracker.diff._common import (
    Side,
    SideState,
    json_type,
    lifecycle,
    load_json_object,
    read_side,
    show,
)
from tracker.diff.config import CONFIG_FILE, GENERATION_CONFIG_FILE, TOKEN_ID_KEYS
from tracker.diff.tokenizer import SPECIAL_TOKEN_NAMES, TOKENIZER_CONFIG_FILE
from tracker.shared.domain import Artifact, Change, ChangeKind, JSONValue, Snapshot

SPECIAL_TOKENS_MAP_FILE = "special_tokens_map.json"

TOKEN_SOURCES = (SPECIAL_TOKENS_MAP_FILE, TOKENIZER_CONFIG_FILE)
"""Where a token string is looked up, first wins: transformers 5.24.0's `from_pretrained` merges
special_tokens_map.json over tokenizer_config.json's values (`PreTrainedTokenizerBase.
_from_pretrained`, "Legacy: read special_tokens_map.json and merge into init_kwargs"), except that
it does not read special_tokens_map.json at all when tokenizer_config.json has
`added_tokens_decoder` (`_token_sources`)."""

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


def _token_sources(sides: dict[str, Side]) -> tuple[str, ...] | None:
    """The files `AutoTokenizer` takes special tokens from at this revision, first wins (None:
    not knowable, tokenizer_config.json could not be read)."""
    conf = sides[TOKENIZER_CONFIG_FILE]
    if conf.state in (SideState.UNREADABLE, SideState.UNTRACKED):
        return None
    if conf.state is SideState.OK and "added_tokens_decoder" in conf.value:
        return (TOKENIZER_CONFIG_FILE,)
    return TOKEN_SOURCES


def _sources(sides: dict[str, Side], sources: tuple[str, ...]) -> tuple[str, ...] | None:
    return _token_sources(sides) if sources == TOKEN_SOURCES else sources


def _resolve(sides: dict[str, Side], key: str, sources: tuple[str, ...]) -> tuple[Any, str]:
    """(value, file) of `key` from the first source that sets it; value _UNSET if none does.

    Returns (_UNKNOWN, "") when a source consulted before the answer is unreadable or not fetched,
    since the effective value cannot then be known. `TOKEN_SOURCES` stands for the token files
    this revision's tokenizer_config.json lets transformers read (`_token_sources`).
    """
    read = _sources(sides, sources)
    if read is None:
        return _UNKNOWN, ""
    for path in read:
        side = sides[path]
        if side.state in (SideState.UNREADABLE, SideState.UNTRACKED):
            return _UNKNOWN, ""
        if side.state is SideState.OK and key in side.value:
            return _token_value(side.value[key]), path
    return _UNSET, ""


def _sides(snap: Snapshot | None) -> dict[str, Side]:
    return {p: read_side(snap, p, load_json_object) for p in (*TOKEN_SOURCES, *ID_SOURCES)}


def effective_special_tokens(snap: Snapshot) -> dict[str, JSONValue]:
    """The resolved special tokens of `snap` (name → value) for keys set and knowable; for rendering."""
    sides = _sides(snap)
    out: dict[str, JSONValue] = {}
    for name in SPECIAL_TOKEN_NAMES:
        value, _ = _resolve(sides, name, TOKEN_SOURCES)
        if value is not _UNKNOWN and value is not _UNSET:
            out[name] = value
    return out


def _source_value(side: Side, key: str) -> Any:
    if side.state is not SideState.OK:
        return _UNKNOWN
    return _token_value(side.value[key]) if key in side.value else _UNSET


def _kind(old: Any, new: Any) -> ChangeKind:
    if old is _UNSET:
        return ChangeKind.ADDED
    if new is _UNSET:
        return ChangeKind.REMOVED
    same = json_type(old) == json_type(new) or old is None or new is None
    return ChangeKind.CHANGED if same else ChangeKind.TYPE_CHANGED


def _plain(value: Any) -> JSONValue:
    return None if value is _UNSET else value


def _differs(old: Any, new: Any) -> bool:
    return not (old == new and json_type(old) == json_type(new))


def _map_unreadable(before: Snapshot | None, after: Snapshot) -> list[Change]:
    """UNREADABLE (or readable-again) changes of special_tokens_map.json: never silence."""
    old = read_side(before, SPECIAL_TOKENS_MAP_FILE, load_json_object)
    new = read_side(after, SPECIAL_TOKENS_MAP_FILE, load_json_object)
    _, changes = lifecycle(
        Artifact.SPECIAL_TOKENS, SPECIAL_TOKENS_MAP_FILE, before is None, old, new
    )
    return [
        c
        for c in changes
        if c.kind is ChangeKind.UNREADABLE
        or (c.kind is ChangeKind.CHANGED and old.state is not SideState.OK)
    ]


MODEL_READS: dict[str, str] = {
    "pad_token_id": "the embedding's padding_idx and the sequence-classification head",
}
"""What model code (not generation) reads of a config.json token id, where it is known: the
fallback, labelled "(inferred)", for where transformers is not run on the change
(`tracker.advisories.classify` replaces the clause with the executed effect where it is)."""
MODEL_READS_CLAUSE = "model code reads config.json's: "
"""Where the "what reads it" claim of an "unchanged for generate()" summary starts."""
INFERRED = " (inferred)"


def _unchanged_because(
    sides: dict[str, Side], key: str, path: str, effective: JSONValue, source: str
) -> str:
    """Why a change of `key` in `path` leaves the effective value as it was, in the words of
    what reads it. For config.json's ids the claim is about generation only: model code still
    reads config.json's value."""
    value = f"{show(effective)} from {source or 'no file'}"
    if path == CONFIG_FILE:
        reads = MODEL_READS.get(key, f"code that reads `config.{key}`")
        return f"unchanged for generate(): {value}; {MODEL_READS_CLAUSE}{reads}{INFERRED}"
    if path == SPECIAL_TOKENS_MAP_FILE and _token_sources(sides) == (TOKENIZER_CONFIG_FILE,):
        return (
            "not read: tokenizer_config.json has `added_tokens_decoder`, so transformers does "
            f"not read special_tokens_map.json; the tokenizer's value stays {value}"
        )
    if path == TOKENIZER_CONFIG_FILE:
        return (
            "overridden: transformers merges special_tokens_map.json over tokenizer_config.json; "
            f"the tokenizer's value stays {value}"
        )
    return f"effective value {value} unchanged"


def diff_special_tokens(before: Snapshot | None, after: Snapshot) -> list[Change]:
    """Special-token changes, keys `bos_token`, ..., `eos_token_id`, ... (at most one change per key).

    When the effective (resolved) value changed, the change says so; `file` is the file the
    after-value comes from, unless only the before-value's file was edited (a key removed from
    special_tokens_map.json uncovers tokenizer_config.json's): then that one; the before-value's
    file when no file sets it any more. When the
    effective value did not change but a file transformers does not take it from changed its value
    (config.json's `pad_token_id` under generation_config.json's; tokenizer_config.json's token
    under special_tokens_map.json's), that is reported once too, with the summary saying for what
    the value is unchanged: for config.json's ids only for generation, since model code (the
    padding index, the classification head) reads config.json's value. Nothing is reported on the first
    revision or when either side cannot be known. special_tokens_map.json, read by no other
    differ, is reported here when it cannot be read (and when it is readable again).
    """
    unreadable = _map_unreadable(before, after)
    if before is None:
        return unreadable
    old_sides, new_sides = _sides(before), _sides(after)
    out: list[Change] = unreadable
    plan = [(n, TOKEN_SOURCES) for n in SPECIAL_TOKEN_NAMES] + [
        (k, ID_SOURCES) for k in sorted(TOKEN_ID_KEYS)
    ]
    for key, sources in plan:
        old, old_file = _resolve(old_sides, key, sources)
        new, new_file = _resolve(new_sides, key, sources)
        if old is _UNKNOWN or new is _UNKNOWN:
            continue
        if _differs(old, new):
            edited = [
                f
                for f in dict.fromkeys((new_file, old_file))
                if f
                and _differs(_source_value(old_sides[f], key), _source_value(new_sides[f], key))
            ]
            file = edited[0] if edited else new_file or old_file
            kind = _kind(old, new)
            if kind is ChangeKind.ADDED:
                summary = f"{key} set to {show(new)} in {file}"
            elif kind is ChangeKind.REMOVED:
                summary = f"{key} no longer set (was {show(old)} from {old_file})"
            else:
                moved = (
                    f" (now from {new_file}, was {old_file})"
                    if old_file and new_file and old_file != new_file
                    else ""
                )
                summary = f"{key} changed: {show(old)} → {show(new)}{moved}"
            out.append(
                Change(Artifact.SPECIAL_TOKENS, kind, file, key, _plain(old), _plain(new), summary)
            )
            continue
        for path in sources:
            a, b = _source_value(old_sides[path], key), _source_value(new_sides[path], key)
            if a is _UNKNOWN or b is _UNKNOWN or not _differs(a, b):
                continue
            kind = _kind(a, b)
            why = _unchanged_because(new_sides, key, path, _plain(new), new_file)
            out.append(
                Change(
                    Artifact.SPECIAL_TOKENS,
                    kind,
                    path,
                    key,
                    _plain(a),
                    _plain(b),
                    f"{key} {kind.value} in {path}: {show(_plain(a))} → {show(_plain(b))} ({why})",
                )
            )
            break
    return out
