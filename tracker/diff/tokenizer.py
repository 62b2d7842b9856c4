"""Tokenizer diffs: tokenizer.json summarised (never diffed as text) and tokenizer_config.json fields."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tracker.diff._common import (
    Side,
    canonical_json,
    digest,
    json_key_changes,
    lifecycle,
    load_json_object,
    read_side,
    show,
    unified,
)
from tracker.shared.domain import Artifact, Change, ChangeKind, JSONValue, Snapshot
from tracker.shared.errors import UnreadableArtifactError

TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"

SPECIAL_TOKEN_NAMES = (
    "bos_token",
    "eos_token",
    "unk_token",
    "pad_token",
    "sep_token",
    "cls_token",
    "mask_token",
    "additional_special_tokens",
    "extra_special_tokens",
)
"""tokenizer_config.json keys reported, resolved, by the special-tokens differ."""

_CONFIG_SKIP = frozenset(
    {*SPECIAL_TOKEN_NAMES, "chat_template", "added_tokens_decoder", "auto_map"}
)
_COMPONENTS = ("normalizer", "pre_tokenizer", "post_processor", "decoder", "truncation", "padding")
_TOKEN_FIELDS = ("content", "special", "lstrip", "rstrip", "normalized", "single_word")
_VOCAB_EXAMPLES = 20


@dataclass(frozen=True)
class TokenizerSummary:
    """What matters of a tokenizer.json: model type, vocab (token → id), merges, added tokens, parts."""

    model_type: str
    vocab: Mapping[str, int]
    merges_count: int
    merges_digest: str
    added_tokens: Mapping[int, Mapping[str, JSONValue]]
    components: Mapping[str, JSONValue]


def _fail(path: str, why: str) -> UnreadableArtifactError:
    return UnreadableArtifactError(f"could not read {path}: {why}")


def summarise_tokenizer(path: str, data: bytes) -> TokenizerSummary:
    """Parse a tokenizer.json into a TokenizerSummary.

    Raises UnreadableArtifactError for invalid JSON, a missing or non-object `model`, or fields of
    the wrong type (vocab neither object nor array, merges not an array, added tokens malformed).
    """
    doc = load_json_object(path, data)
    model = doc.get("model")
    if not isinstance(model, dict):
        raise _fail(path, "no `model` object (not a tokenizers tokenizer.json)")
    model_type = model.get("type")
    if model_type is None:
        model_type = "BPE" if "merges" in model else "unknown"
    if not isinstance(model_type, str):
        raise _fail(path, "`model.type` is not a string")
    vocab = _vocab(path, model.get("vocab", {}))
    merges = model.get("merges", [])
    if not isinstance(merges, list):
        raise _fail(path, "`model.merges` is not an array")
    merges_text = _merges_text(path, merges)
    added: dict[int, Mapping[str, JSONValue]] = {}
    raw_added = doc.get("added_tokens", [])
    if not isinstance(raw_added, list):
        raise _fail(path, "`added_tokens` is not an array")
    for tok in raw_added:
        if (
            not isinstance(tok, dict)
            or not isinstance(tok.get("id"), int)
            or not isinstance(tok.get("content"), str)
        ):
            raise _fail(path, f"malformed added token {show(tok, 60)}")
        added[tok["id"]] = {f: tok[f] for f in _TOKEN_FIELDS if f in tok}
    components = {name: doc.get(name) for name in _COMPONENTS}
    return TokenizerSummary(
        model_type=model_type,
        vocab=vocab,
        merges_count=len(merges),
        merges_digest=digest(merges_text),
        added_tokens=added,
        components=components,
    )


def _merges_text(path: str, merges: list[Any]) -> str:
    """The merges as "a b" lines, the same for both serialisations (strings or [a, b] pairs).

    Joined by C-level str.join (a 150k-merge list costs milliseconds, not a Python loop).
    """
    try:
        return "\n".join(merges)  # old format: every merge is "a b"
    except TypeError:
        pass
    try:
        if str not in set(map(type, merges)):
            return "\n".join(map(" ".join, merges))  # new format: every merge is [a, b]
        return "\n".join(m if isinstance(m, str) else " ".join(m) for m in merges)
    except TypeError as exc:
        raise _fail(path, "`model.merges` items must be strings or [a, b] string pairs") from exc


def _vocab(path: str, raw: Any) -> dict[str, int]:
    if isinstance(raw, dict):
        if not set(map(type, raw.values())) <= {int}:
            raise _fail(path, "`model.vocab` has non-integer ids")
        return dict(raw)
    if isinstance(raw, list):  # Unigram: [[piece, score], ...]; the id is the position
        out: dict[str, int] = {}
        for i, item in enumerate(raw):
            if not isinstance(item, list) or not item or not isinstance(item[0], str):
                raise _fail(path, f"`model.vocab[{i}]` is not a [piece, score] pair")
            out.setdefault(item[0], i)
        return out
    raise _fail(path, "`model.vocab` is neither an object nor an array")


def diff_tokenizer(before: Snapshot | None, after: Snapshot) -> list[Change]:
    """tokenizer.json summary changes, then tokenizer_config.json field and added-token changes."""
    return [*_diff_tokenizer_json(before, after), *_diff_tokenizer_config(before, after)]


def _diff_tokenizer_json(before: Snapshot | None, after: Snapshot) -> list[Change]:
    if (
        before is not None
        and TOKENIZER_FILE in after.files
        and before.files.get(TOKENIZER_FILE) == after.files[TOKENIZER_FILE]
        and TOKENIZER_FILE not in before.unreadable
        and TOKENIZER_FILE not in after.unreadable
    ):
        return []  # same bytes: skip parsing a multi-megabyte file (the usual poll)
    old = read_side(before, TOKENIZER_FILE, summarise_tokenizer)
    new = read_side(after, TOKENIZER_FILE, summarise_tokenizer)
    compare, changes = lifecycle(Artifact.TOKENIZER, TOKENIZER_FILE, before is None, old, new)
    if not compare:
        return changes
    return compare_summaries(old.value, new.value)


def compare_summaries(b: TokenizerSummary, a: TokenizerSummary) -> list[Change]:
    """Changes between two tokenizer.json summaries, in a fixed key order."""
    f, art = TOKENIZER_FILE, Artifact.TOKENIZER
    out: list[Change] = []
    if b.model_type != a.model_type:
        out.append(
            Change(
                art,
                ChangeKind.CHANGED,
                f,
                "model_type",
                b.model_type,
                a.model_type,
                f"tokenizer model type changed: {b.model_type} → {a.model_type}",
            )
        )
    if len(b.vocab) != len(a.vocab):
        out.append(
            Change(
                art,
                ChangeKind.CHANGED,
                f,
                "vocab_size",
                len(b.vocab),
                len(a.vocab),
                f"vocab size changed: {len(b.vocab)} → {len(a.vocab)}",
            )
        )
    if b.vocab != a.vocab:
        out.append(_vocab_change(b.vocab, a.vocab))
    if (b.merges_count, b.merges_digest) != (a.merges_count, a.merges_digest):
        out.append(
            Change(
                art,
                ChangeKind.CHANGED,
                f,
                "merges",
                {"count": b.merges_count, "sha256": b.merges_digest},
                {"count": a.merges_count, "sha256": a.merges_digest},
                f"merges changed: {b.merges_count} → {a.merges_count} rules"
                + ("" if b.merges_count != a.merges_count else " (same count, different rules)"),
            )
        )
    out.extend(added_token_changes(art, f, b.added_tokens, a.added_tokens))
    for name in _COMPONENTS:
        old, new = b.components.get(name), a.components.get(name)
        if canonical_json(old) == canonical_json(new):
            continue
        kind = (
            ChangeKind.ADDED
            if old is None
            else ChangeKind.REMOVED
            if new is None
            else ChangeKind.CHANGED
        )
        out.append(
            Change(
                art,
                kind,
                f,
                name,
                _component_type(old),
                _component_type(new),
                f"{name} {kind.value}: {_component_type(old)} → {_component_type(new)}",
                unified(_pretty(old), _pretty(new), f"{f}#{name}"),
            )
        )
    return out


def _pretty(value: JSONValue) -> str:
    return "" if value is None else json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def _component_type(value: JSONValue) -> JSONValue:
    if isinstance(value, dict):
        kind = value.get("type")
        if isinstance(kind, str):
            return f"{kind} (sha256 {digest(canonical_json(value))})"
        return f"object (sha256 {digest(canonical_json(value))})"
    return value


def _vocab_change(b: Mapping[str, int], a: Mapping[str, int]) -> Change:
    added = sorted(set(a) - set(b), key=lambda t: (a[t], t))
    removed = sorted(set(b) - set(a), key=lambda t: (b[t], t))
    moved = sorted((t for t in set(a) & set(b) if a[t] != b[t]), key=lambda t: (a[t], t))
    lines = [f"+ {a[t]} {t!r}" for t in added[:_VOCAB_EXAMPLES]]
    lines += [f"- {b[t]} {t!r}" for t in removed[:_VOCAB_EXAMPLES]]
    lines += [f"~ {t!r} {b[t]} → {a[t]}" for t in moved[:_VOCAB_EXAMPLES]]
    return Change(
        Artifact.TOKENIZER,
        ChangeKind.CHANGED,
        TOKENIZER_FILE,
        "vocab",
        {"size": len(b), "sha256": digest(canonical_json(dict(b)))},
        {"size": len(a), "sha256": digest(canonical_json(dict(a)))},
        f"vocab changed: {len(added)} tokens added, {len(removed)} removed, {len(moved)} re-numbered",
        "\n".join(lines),
    )


def added_token_changes(
    artifact: Artifact,
    file: str,
    b: Mapping[int, Mapping[str, JSONValue]],
    a: Mapping[int, Mapping[str, JSONValue]],
) -> list[Change]:
    """`added_tokens[<id>]` changes between two id → token-fields maps, by id."""
    out: list[Change] = []
    for tid in sorted(set(b) | set(a)):
        old, new = b.get(tid), a.get(tid)
        if old == new:
            continue
        key = f"added_tokens[{tid}]"
        if old is None:
            out.append(
                Change(
                    artifact,
                    ChangeKind.ADDED,
                    file,
                    key,
                    None,
                    dict(new or {}),
                    f"added token {tid} {show(new and new.get('content'))} added"
                    f" (special={show(new and new.get('special'))})",
                )
            )
        elif new is None:
            out.append(
                Change(
                    artifact,
                    ChangeKind.REMOVED,
                    file,
                    key,
                    dict(old),
                    None,
                    f"added token {tid} {show(old.get('content'))} removed",
                )
            )
        else:
            fields = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
            what = ", ".join(f"{k} {show(old.get(k), 40)} → {show(new.get(k), 40)}" for k in fields)
            out.append(
                Change(
                    artifact,
                    ChangeKind.CHANGED,
                    file,
                    key,
                    dict(old),
                    dict(new),
                    f"added token {tid} changed: {what}",
                )
            )
    return out


def _decoder_map(raw: Any) -> dict[int, Mapping[str, JSONValue]]:
    if not isinstance(raw, dict):
        return {}
    out: dict[int, Mapping[str, JSONValue]] = {}
    for k, v in raw.items():
        if isinstance(v, dict) and str(k).isdigit():
            out[int(k)] = {f: v[f] for f in _TOKEN_FIELDS if f in v}
    return out


def _diff_tokenizer_config(before: Snapshot | None, after: Snapshot) -> list[Change]:
    path = TOKENIZER_CONFIG_FILE
    old: Side = read_side(before, path, load_json_object)
    new: Side = read_side(after, path, load_json_object)
    compare, changes = lifecycle(Artifact.TOKENIZER, path, before is None, old, new)
    if not compare:
        return changes
    out = json_key_changes(Artifact.TOKENIZER, path, old.value, new.value, skip=_CONFIG_SKIP)
    out.extend(
        added_token_changes(
            Artifact.TOKENIZER,
            path,
            _decoder_map(old.value.get("added_tokens_decoder")),
            _decoder_map(new.value.get("added_tokens_decoder")),
        )
    )
    return out
