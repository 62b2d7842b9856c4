"""Diffs of what is inside GGUF files (issue 28, item 2, first part): per GGUF model (a single
`.gguf`, or a split's shards read as one: `Snapshot.gguf_models`), its header's keys as changes of
the artifacts they are (the same artifacts, and so the same advisory rules, as the safetensors
side's files):

- general and architecture keys (`general.*`, `<arch>.*`: context length, rope, head and expert
  counts) → config, keyed by the GGUF key;
- special ids (`tokenizer.ggml.eos_token_id` …) → special_tokens, keyed by transformers' name
  (`eos_token_id`), the value an `{"id", "token"}` pair: the id and the token it names; a token
  whose id is unchanged but whose text changed → `eos_token` …;
- the token, score, token-type and merge lists (as digests) and the tokenizer's other keys
  (`tokenizer.ggml.model`, `pre`, `add_bos_token` …) → tokenizer, keyed `vocab`, `merges`,
  `scores`, `token_type`, or the key's last part;
- the embedded chat template (`tokenizer.chat_template`, named ones `tokenizer.chat_template.X`)
  → chat_template: its source and how it renders the canonical conversations, in the same
  sandbox as `chat_template.jinja` (the special tokens it renders with are the file's own);
- the quant census (per ggml type, the model's tensor count and bytes): a re-quantization under
  the same file name → weights, key `quant_census`, the values `{type: {"tensors", "bytes"}}`;
- a model added or removed (the repo's set of quant files), or that cannot be read (a shard
  unreadable or missing) → weights, key "";
- a model whose files' bytes changed (their LFS oids) while nothing above did (the same header
  keys, embedded template and quant census) → weights, key `reuploaded`: the quant file
  re-uploaded, new weights under an unchanged header (a re-quantization with another importance
  matrix, a corrected conversion); the values are the shards' oids.

The file of a change is the model's first shard. The first revision reports only what cannot be
read. Pure: headers in, changes out.
"""

from __future__ import annotations

from collections.abc import Mapping

from tracker.diff._common import short_value
from tracker.diff.chat_template import DEFAULT, Templates, _diff_one
from tracker.diff.sandbox import DEFAULT_LIMITS, Renderer, RenderLimits, render_in_process
from tracker.shared.domain import (
    Artifact,
    Change,
    ChangeKind,
    GGUFArray,
    GGUFModel,
    JSONValue,
    Snapshot,
)

_TOKENIZER = "tokenizer.ggml."
_TEMPLATE = "tokenizer.chat_template"
_LISTS = {
    "tokenizer.ggml.tokens": "vocab",
    "tokenizer.ggml.merges": "merges",
    "tokenizer.ggml.scores": "scores",
    "tokenizer.ggml.token_type": "token_type",
}
_SPECIAL_NAMES = {
    "bos": "bos",
    "eos": "eos",
    "eot": "eot",
    "eom": "eom",
    "unknown": "unk",
    "padding": "pad",
    "seperator": "sep",  # llama.cpp's spelling of the key
    "cls": "cls",
    "mask": "mask",
}


def _special_name(key: str) -> str:
    """`tokenizer.ggml.padding_token_id` → `pad_token_id` (transformers' names where they exist)."""
    kind = key.removeprefix(_TOKENIZER).removesuffix("_token_id")
    return f"{_SPECIAL_NAMES.get(kind, kind)}_token_id"


def _token(model: GGUFModel, token_id: int) -> JSONValue:
    tokens = model.metadata.get("tokenizer.ggml.tokens")
    if isinstance(tokens, GGUFArray):
        return tokens.special.get(token_id)
    if isinstance(tokens, list) and 0 <= token_id < len(tokens):
        return tokens[token_id]
    return None


def special_tokens(model: GGUFModel) -> dict[str, JSONValue]:
    """The special tokens a GGUF model's template renders with (`eos_token`: `</s>` …)."""
    out: dict[str, JSONValue] = {}
    for key, value in model.metadata.items():
        if key.startswith(_TOKENIZER) and key.endswith("_token_id") and type(value) is int:
            text = _token(model, value)
            if isinstance(text, str):
                out[_special_name(key).removesuffix("_id")] = text
    return out


def _plain(value: JSONValue) -> JSONValue:
    if isinstance(value, GGUFArray):
        return {"count": value.count, "sha256": value.sha256}
    return value


def _kind(old: JSONValue, new: JSONValue, missing: object) -> ChangeKind:
    if old is missing:
        return ChangeKind.ADDED
    if new is missing:
        return ChangeKind.REMOVED
    return ChangeKind.CHANGED if type(old) is type(new) else ChangeKind.TYPE_CHANGED


def _unreadable(model: GGUFModel) -> str | None:
    if model.unreadable:
        return "; ".join(f"{p}: {why}" for p, why in sorted(model.unreadable.items()))
    if model.missing:
        return f"shards missing from the tree: {', '.join(model.missing)}"
    return None


def diff_gguf(
    before: Snapshot | None,
    after: Snapshot,
    limits: RenderLimits = DEFAULT_LIMITS,
    render: Renderer = render_in_process,
) -> list[Change]:
    """Every change inside the GGUF models from `before` to `after` (see the module docstring)."""
    new_models = after.gguf_models
    old_models = before.gguf_models if before is not None else {}
    out: list[Change] = []
    for path in sorted(set(new_models) | set(old_models)):
        old, new = old_models.get(path), new_models.get(path)
        if new is None:
            assert old is not None
            out.append(Change(Artifact.WEIGHTS, ChangeKind.REMOVED, old.shards[0], "", path, None,
                              f"GGUF model {path} removed"))  # fmt: skip
            continue
        file = new.shards[0]
        why = _unreadable(new)
        if why is not None:
            if old is None or _unreadable(old) != why:
                out.append(Change(Artifact.WEIGHTS, ChangeKind.UNREADABLE, file, "", None, why,
                                  f"could not read GGUF model {path}: {why}"))  # fmt: skip
            continue
        if before is None:
            continue
        if old is None:
            out.append(Change(Artifact.WEIGHTS, ChangeKind.ADDED, file, "", None, path,
                              f"GGUF model {path} added ({len(new.tensors):,} tensors)"))  # fmt: skip
            continue
        if _unreadable(old) is not None:
            out.append(Change(Artifact.WEIGHTS, ChangeKind.CHANGED, file, "", _unreadable(old),
                              None, f"GGUF model {path} is readable again"))  # fmt: skip
            continue
        inside = _metadata(path, file, old, new, limits, render)
        out.extend(inside or _reuploaded(path, file, old, new, before, after))
    return out


def _oids(model: GGUFModel, snapshot: Snapshot) -> dict[str, str]:
    """Each shard's content identity (its LFS oid, else its git blob id) in `snapshot`'s tree."""
    by_path = {e.path: e.identity for e in snapshot.tree}
    return {shard: by_path.get(shard, "") for shard in model.shards}


def _reuploaded(
    path: str, file: str, old: GGUFModel, new: GGUFModel, before: Snapshot, after: Snapshot
) -> list[Change]:
    """A model whose header says nothing changed but whose files' bytes did (`_metadata` found
    nothing): one change naming the shards whose content moved."""
    a, b = _oids(old, before), _oids(new, after)
    if a == b:
        return []
    moved = [s for s in new.shards if a.get(s) != b.get(s)]
    same = "header" if old.headers == new.headers else "header keys and quant census"
    return [
        Change(Artifact.WEIGHTS, ChangeKind.CHANGED, file, "reuploaded", dict(a), dict(b),
               f"GGUF model {path} re-uploaded: {', '.join(moved)} changed content with the "
               f"same {same}",
               "\n".join(f"{s}: {a.get(s) or 'absent'} → {b.get(s)}" for s in moved))
    ]  # fmt: skip


def _metadata(
    path: str,
    file: str,
    old: GGUFModel,
    new: GGUFModel,
    limits: RenderLimits,
    render: Renderer,
) -> list[Change]:
    missing = object()
    a, b = old.metadata, new.metadata
    out: list[Change] = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key, missing), b.get(key, missing)
        if va == vb or key.startswith("split.") or key.startswith(_TEMPLATE):
            continue
        kind = _kind(va, vb, missing)
        before = None if va is missing else _plain(va)
        after = None if vb is missing else _plain(vb)
        if key.startswith(_TOKENIZER) and key.endswith("_token_id"):
            name = _special_name(key)
            before = None if va is missing else {"id": va, "token": _token(old, va)}  # type: ignore[arg-type]
            after = None if vb is missing else {"id": vb, "token": _token(new, vb)}  # type: ignore[arg-type]
            out.append(Change(Artifact.SPECIAL_TOKENS, kind, file, name, before, after,
                              f"{name} {_named(before)} → {_named(after)} in {path}"))  # fmt: skip
        elif key in _LISTS:
            name = _LISTS[key]
            if isinstance(va, GGUFArray) and isinstance(vb, GGUFArray) and va.sha256 == vb.sha256:
                continue  # the same list; only its special entries moved (reported by id)
            out.append(Change(Artifact.TOKENIZER, kind, file, name, before, after,
                              f"tokenizer {name} changed in {path} ({_count(va)} → {_count(vb)} entries)"))  # fmt: skip
        elif key.startswith(_TOKENIZER):
            name = key.removeprefix(_TOKENIZER)
            out.append(Change(Artifact.TOKENIZER, kind, file, name, short_value(before),
                              short_value(after), f"tokenizer {name} {_shown(before)} → {_shown(after)} in {path}"))  # fmt: skip
        else:
            out.append(Change(Artifact.CONFIG, kind, file, key, short_value(before),
                              short_value(after), f"{key} {_shown(before)} → {_shown(after)} in {path}"))  # fmt: skip
    out.extend(_renamed_specials(path, file, old, new))
    out.extend(_census(path, file, old, new))
    out.extend(_templates(file, old, new, limits, render))
    return out


def census(model: GGUFModel) -> dict[str, JSONValue]:
    """A model's quant census as JSON: `{"Q4_K": {"tensors": 196, "bytes": 17_179_869_184}, …}`."""
    return {t: {"tensors": n, "bytes": size} for t, (n, size) in model.quant_census.items()}


def _census(path: str, file: str, old: GGUFModel, new: GGUFModel) -> list[Change]:
    """A re-quantization under the same name: the census of ggml types moved."""
    a, b = old.quant_census, new.quant_census
    if a == b:
        return []
    lines = [
        f"- {t}: {n:,} tensors, {size:,} bytes"
        for t, (n, size) in a.items()
        if b.get(t) != (n, size)
    ]
    lines += [
        f"+ {t}: {n:,} tensors, {size:,} bytes"
        for t, (n, size) in b.items()
        if a.get(t) != (n, size)
    ]
    return [
        Change(Artifact.WEIGHTS, ChangeKind.CHANGED, file, "quant_census", census(old), census(new),
               f"GGUF model {path} re-quantized: {_census_text(a)} → {_census_text(b)}",
               "\n".join(lines))
    ]  # fmt: skip


def _census_text(counts: Mapping[str, tuple[int, int]]) -> str:
    return ", ".join(f"{n:,} {t}" for t, (n, _) in counts.items()) or "no tensors"


def _renamed_specials(path: str, file: str, old: GGUFModel, new: GGUFModel) -> list[Change]:
    """A special id that stayed but now names another token."""
    out: list[Change] = []
    for key, value in new.metadata.items():
        if not (key.startswith(_TOKENIZER) and key.endswith("_token_id")) or type(value) is not int:
            continue
        if old.metadata.get(key) != value:
            continue
        was, now = _token(old, value), _token(new, value)
        if was != now:
            name = _special_name(key).removesuffix("_id")
            out.append(Change(Artifact.SPECIAL_TOKENS, ChangeKind.CHANGED, file, name, was, now,
                              f"{name} (id {value}) {_shown(was)} → {_shown(now)} in {path}"))  # fmt: skip
    return out


def _templates(
    file: str, old: GGUFModel, new: GGUFModel, limits: RenderLimits, render: Renderer
) -> list[Change]:
    def templates(model: GGUFModel) -> Templates:
        sources: dict[str, str] = {}
        for key, value in model.metadata.items():
            if key == _TEMPLATE and isinstance(value, str):
                sources[DEFAULT] = value
            elif key.startswith(_TEMPLATE + ".") and isinstance(value, str):
                sources[key.removeprefix(_TEMPLATE + ".")] = value
        return Templates(sources, dict.fromkeys(sources, file))

    a, b = templates(old), templates(new)
    old_tokens, new_tokens = special_tokens(old), special_tokens(new)
    out: list[Change] = []
    for name in sorted(set(a.sources) | set(b.sources), key=lambda n: (n != DEFAULT, n)):
        out.extend(_diff_one(name, a, b, old_tokens, new_tokens, limits, render))
    return out


def _named(value: JSONValue) -> str:
    if not isinstance(value, Mapping):
        return "unset"
    token = value.get("token")
    return f"{value['id']} ({token!r})" if token is not None else str(value["id"])


def _count(value: JSONValue) -> str:
    if isinstance(value, GGUFArray):
        return f"{value.count:,}"
    return f"{len(value):,}" if isinstance(value, list) else "no"


def _shown(value: JSONValue) -> str:
    return "unset" if value is None else repr(short_value(value))


__all__ = ["census", "diff_gguf", "special_tokens"]
