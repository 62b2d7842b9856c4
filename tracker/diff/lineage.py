"""What a revision says of its lineage, and the values a derivative inherits from its base (pure).

Links: the model card's front matter `base_model` (a repo id or a list of them) with
`base_model_relation` (`quantized`, `finetune`, `adapter`, `merge`), and each GGUF model's
`general.base_model.count` entries (`general.base_model.N.repo_url`, else `.organization` and
`.name` when together they make a repo id). A GGUF file names no relation: it is a conversion
(`quantized`) unless the card says otherwise.

Effective values, per unit: the repo's own files (one unit, file "") and each GGUF model (its
first shard). A unit holds the default chat template, the special-token ids (`bos_token_id`,
`eos_token_id`, `pad_token_id`), the generation defaults of generation_config.json and the
tokenizer (a digest of tokenizer.json), each only where the unit says it: a GGUF model carries
its template and ids, never generation defaults or a tokenizer.json. Values that cannot be read
are left out (never compared as "absent").
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass

from tracker.diff._common import SideState, load_json_object, read_side
from tracker.diff.card import CARD_FILE, parse_card
from tracker.diff.chat_template import DEFAULT, _Unknown, resolve_templates
from tracker.diff.config import CONFIG_FILE, GENERATION_CONFIG_FILE
from tracker.shared.domain import GGUFModel, JSONValue, RepoId, Snapshot

RELATIONS = ("quantized", "finetune", "adapter", "merge")
TEMPLATE = "chat_template"
ID_KEYS = ("bos_token_id", "eos_token_id", "pad_token_id")
GENERATION_KEYS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repetition_penalty",
    "do_sample",
    "max_new_tokens",
)
TOKENIZER = "tokenizer"
_GGUF_IDS = {
    "tokenizer.ggml.bos_token_id": "bos_token_id",
    "tokenizer.ggml.eos_token_id": "eos_token_id",
    "tokenizer.ggml.padding_token_id": "pad_token_id",
}
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")
MAX_LINKS = 16


@dataclass(frozen=True)
class LineageLink:
    """A base model a revision names: its repo id, the relation (None: not said) and where it was
    read (`card`, `gguf`, or `card+gguf`)."""

    base: RepoId
    relation: str | None
    via: str


@dataclass(frozen=True)
class Unit:
    """The effective values of one thing a user runs: the repo's own files (`file` "") or one GGUF
    model (`file`: its first shard)."""

    file: str
    gguf: bool
    values: Mapping[str, JSONValue]


def _repo_id(text: object) -> RepoId | None:
    if not isinstance(text, str):
        return None
    text = text.strip()
    for prefix in ("https://huggingface.co/", "http://huggingface.co/", "hf.co/"):
        text = text.removeprefix(prefix)
    text = text.strip("/")
    return RepoId(text) if _REPO_ID.match(text) and ".." not in text else None


def _gguf_bases(model: GGUFModel) -> list[RepoId]:
    meta = model.metadata
    count = meta.get("general.base_model.count")
    if type(count) is not int or count < 0:
        return []
    out: list[RepoId] = []
    for i in range(min(count, MAX_LINKS)):
        found = _repo_id(meta.get(f"general.base_model.{i}.repo_url"))
        if found is None:
            org, name = (meta.get(f"general.base_model.{i}.{k}") for k in ("organization", "name"))
            found = _repo_id(f"{org}/{name}") if isinstance(org, str) else None
        if found is not None:
            out.append(found)
    return out


def read_links(snap: Snapshot) -> list[LineageLink]:
    """The base models `snap` names, card first, each once (at most MAX_LINKS); a card that
    cannot be read names none (its GGUF files still do)."""
    card = read_side(snap, CARD_FILE, parse_card)
    relation: str | None = None
    bases: dict[RepoId, set[str]] = {}
    if card.state is SideState.OK:
        front = card.value.front
        raw = front.get("base_model")
        for item in raw if isinstance(raw, list) else [raw]:
            found = _repo_id(item)
            if found is not None:
                bases.setdefault(found, set()).add("card")
        rel = front.get("base_model_relation")
        relation = rel if isinstance(rel, str) and rel in RELATIONS else None
    ggufs = [m for m in snap.gguf_models.values() if m.headers]
    for model in ggufs:
        for found in _gguf_bases(model):
            bases.setdefault(found, set()).add("gguf")
    out = []
    for base, where in list(bases.items())[:MAX_LINKS]:
        via = "+".join(sorted(where))
        rel = relation if "card" in where else None
        if rel is None and ("gguf" in where or ggufs):
            rel = "quantized"
        out.append(LineageLink(base, rel, via))
    return out


def _json(snap: Snapshot, path: str) -> dict[str, JSONValue] | None:
    side = read_side(snap, path, load_json_object)
    return side.value if side.state is SideState.OK else None


def _files_unit(snap: Snapshot) -> Unit:
    values: dict[str, JSONValue] = {}
    try:
        template = resolve_templates(snap).sources.get(DEFAULT)
        if template is not None:
            values[TEMPLATE] = template
    except _Unknown:
        pass  # a deciding file not read: the template is not known, not absent
    generation = _json(snap, GENERATION_CONFIG_FILE)
    config = _json(snap, CONFIG_FILE)
    for key in ID_KEYS:  # generation uses generation_config.json over config.json
        for doc in (generation, config):
            if doc is not None and doc.get(key) is not None:
                values[key] = doc[key]
                break
    if generation is not None:
        for key in GENERATION_KEYS:
            if key in generation:
                values[f"generation.{key}"] = generation[key]
    data = snap.files.get("tokenizer.json")
    if data is not None and "tokenizer.json" not in snap.unreadable:
        values[TOKENIZER] = hashlib.sha256(data).hexdigest()
    return Unit("", False, values)


def _gguf_unit(model: GGUFModel) -> Unit:
    meta = model.metadata
    values: dict[str, JSONValue] = {}
    template = meta.get("tokenizer.chat_template")
    if isinstance(template, str):
        values[TEMPLATE] = template
    for key, name in _GGUF_IDS.items():
        value = meta.get(key)
        if type(value) is int:
            values[name] = value
    return Unit(model.shards[0], True, values)


def effective_units(snap: Snapshot) -> list[Unit]:
    """The units of `snap`: its own files' (when they say anything) then each readable GGUF
    model's, by path."""
    own = _files_unit(snap)
    out = [own] if own.values else []
    for _, model in sorted(snap.gguf_models.items()):
        if model.headers.get(model.shards[0]) is not None:
            out.append(_gguf_unit(model))
    return out


def base_values(snap: Snapshot) -> dict[str, JSONValue]:
    """The values a base model hands down: its own files' unit, else its first GGUF model's."""
    units = effective_units(snap)
    return dict(units[0].values) if units else {}


__all__ = [
    "GENERATION_KEYS",
    "ID_KEYS",
    "RELATIONS",
    "TEMPLATE",
    "TOKENIZER",
    "LineageLink",
    "Unit",
    "base_values",
    "effective_units",
    "read_links",
]
