"""What classification knows of a revision beyond the change itself, and the effect checks of the rules (pure).

A `Context` holds the two snapshots of a revision step (parsed lazily: config.json,
generation_config.json, the tokenizer's id → token map) and the transformers knowledge table.
Each effect check takes a change and the context and returns evidence (a phrase, possibly "")
when its rule applies, or None when it does not (or cannot be known): a rule with a check is
skipped unless the check says yes, so an unknown effect falls through to the louder default.

Checks:
- `class_default`: a key added or removed with exactly its config class's default (transformers'
  table), so the value the model reads did not change;
- `estimate_moves`: the estimate of the previous config re-read with only this key changed differs
  in structure or counts (`tracker.estimate`'s public `estimate`, a pure function);
- `generation_governs` / `generation_shadowed`: transformers' precedence for generation defaults
  (generation_config.json, when it can be read, replaces config.json's generation keys entirely);
- `token_names`: which tokens the ids of a token-id change name before and after;
- `executed`: the effect measured by running the pinned transformers (the context's `executor`,
  `tracker.advisories.execute`, in the analysis worker) on both sides of a config.json or
  generation_config.json change; None where it cannot run (no transformers, remote code, a
  model type transformers lacks), and then the inferred checks above decide.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

from tracker.advisories.knowledge import MISSING, ConfigClass, Knowledge, load
from tracker.diff import Side as FileSide
from tracker.diff import SideState, load_json_object, read_side
from tracker.estimate import estimate
from tracker.shared.domain import Artifact, Change, ChangeKind, JSONValue, Snapshot
from tracker.shared.errors import EstimateError

CONFIG_FILE = "config.json"
GENERATION_FILE = "generation_config.json"
TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
VOCAB_FILE = "vocab.json"
SPECIAL_TOKENS_MAP_FILE = "special_tokens_map.json"
TOKENIZER_CHANGE_FILES = (TOKENIZER_CONFIG_FILE, SPECIAL_TOKENS_MAP_FILE, TOKENIZER_FILE)
"""The tokenizer files whose changes are executed with AutoTokenizer."""
TOKENIZER_INPUTS = (
    TOKENIZER_CONFIG_FILE,
    SPECIAL_TOKENS_MAP_FILE,
    TOKENIZER_FILE,
    VOCAB_FILE,
    "merges.txt",
    "added_tokens.json",
    "chat_template.jinja",
    "chat_template.json",
    CONFIG_FILE,
)
"""What AutoTokenizer reads of a repo (config.json: the model type, when tokenizer_config.json
names no tokenizer class); tokenizer.model is never fetched, so a sentencepiece vocabulary is not
among them."""
DECODER_CONFIG_KEYS = ("decoder", "generator", "text_config")
"""Sub-configs transformers reads generation keys from when the top level leaves them unset
(`GenerationConfig.from_model_config`), first present wins."""

MAX_NAMED_IDS = 8


def _read_json(snap: Snapshot, path: str) -> FileSide:
    """`path` at `snap` as a JSON object, within the bounds of its kind (the diff's own reader)."""
    return read_side(snap, path, load_json_object)


class Side:
    """What classification reads of one revision (each file parsed at most once, on demand)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    @cached_property
    def config(self) -> FileSide:
        return _read_json(self.snapshot, CONFIG_FILE)

    @cached_property
    def generation(self) -> FileSide:
        return _read_json(self.snapshot, GENERATION_FILE)

    @cached_property
    def tokens(self) -> Mapping[int, str] | None:
        """Token id → token text from tokenizer.json (vocab and added tokens), tokenizer_config.json's
        added_tokens_decoder and vocab.json, whichever are present; None when none is."""
        out: dict[int, str] = {}
        found = False
        vocab = _read_json(self.snapshot, VOCAB_FILE)
        if vocab.state is SideState.OK and vocab.value is not None:
            found = True
            out.update({i: t for t, i in vocab.value.items() if isinstance(i, int)})
        tok = _read_json(self.snapshot, TOKENIZER_FILE)
        if tok.state is SideState.OK and tok.value is not None:
            found = True
            model = tok.value.get("model")
            table = model.get("vocab") if isinstance(model, Mapping) else None
            if isinstance(table, Mapping):
                out.update({i: t for t, i in table.items() if isinstance(i, int)})
            elif isinstance(table, list):  # Unigram: [[piece, score], ...] in id order
                out.update(
                    {
                        i: p[0]
                        for i, p in enumerate(table)
                        if isinstance(p, list) and p and isinstance(p[0], str)
                    }
                )
            for added in tok.value.get("added_tokens") or []:
                if isinstance(added, Mapping) and isinstance(added.get("id"), int):
                    out[added["id"]] = str(added.get("content"))
        conf = _read_json(self.snapshot, TOKENIZER_CONFIG_FILE)
        decoder = conf.value.get("added_tokens_decoder") if conf.value is not None else None
        if isinstance(decoder, Mapping):
            found = True
            for k, v in decoder.items():
                if str(k).isdigit() and isinstance(v, Mapping) and "content" in v:
                    out[int(k)] = str(v["content"])
        return out if found else None

    @cached_property
    def special_tokens(self) -> frozenset[str]:
        """The tokenizer's special tokens: tokenizer.json's added tokens marked special,
        tokenizer_config.json's `added_tokens_decoder` entries marked special, its named tokens
        (`bos_token`, `eos_token`, ...) and `additional_special_tokens`."""
        out: set[str] = set()
        tok = _read_json(self.snapshot, TOKENIZER_FILE)
        if tok.state is SideState.OK and tok.value is not None:
            for added in tok.value.get("added_tokens") or []:
                if isinstance(added, Mapping) and added.get("special") is True:
                    out.add(str(added.get("content")))
        conf = _read_json(self.snapshot, TOKENIZER_CONFIG_FILE)
        value = conf.value if conf.state is SideState.OK and conf.value is not None else {}
        decoder = value.get("added_tokens_decoder")
        if isinstance(decoder, Mapping):
            for v in decoder.values():
                if isinstance(v, Mapping) and v.get("special") is True and "content" in v:
                    out.add(str(v["content"]))
        for key in ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token",
                    "mask_token"):  # fmt: skip
            named = value.get(key)
            if isinstance(named, Mapping):
                named = named.get("content")
            if isinstance(named, str) and named:
                out.add(named)
        extra = value.get("additional_special_tokens")
        for t in extra if isinstance(extra, list) else []:
            t = t.get("content") if isinstance(t, Mapping) else t
            if isinstance(t, str) and t:
                out.add(t)
        return frozenset(out)


@dataclass(frozen=True)
class Executed:
    """The effect of one change as transformers' own code measured it.

    `kind`: `same` (the same effective attributes and model), `unread` (attributes differ, but
    the model neither is built differently nor reads them), `limit` (only a position limit the
    model reads as a limit differs), `model` (the module tree differs, or
    the model's code reads a differing attribute when it runs), `generation` / `generation-ids`
    (the effective GenerationConfig differs; -ids: in a token id), `generation-same` (it does
    not); for a tokenizer file, `tokenizer-same` (AutoTokenizer makes the same tokenizer),
    `tokenizer-settings` (only padding/truncation side, `model_max_length` or decoding differ),
    `tokenizer-special` (special tokens, their ids, added tokens or the ids of text around
    special tokens differ), `tokenizer-text` (ordinary text encodes to other ids),
    `tokenizer-broken` / `tokenizer-loads` (it no longer / now loads), and `unexecuted` (not
    run, e.g. the tokenizer class is the repo's own: `evidence` says why). `evidence` says what
    was measured; `attributes` names the effective attributes that differ; `readers` what of
    the model built differs (`model.embed_tokens.padding_idx: 0 → null`) or which of its
    classes read a differing attribute when it runs (a `model` effect; else empty)."""

    kind: str
    evidence: str
    version: str
    attributes: Sequence[str] = field(default_factory=tuple)
    readers: Sequence[str] = field(default_factory=tuple)


class Executing(Protocol):
    """What runs transformers for the effect checks (`tracker.advisories.execute.Executor`)."""

    version: str

    def config_effect(
        self,
        before: Mapping[str, Any],
        changed: Mapping[str, Any],
        key: str,
        dtypes: tuple[str | None, str | None],
    ) -> Executed | None: ...

    def generation_effect(
        self,
        before: tuple[Mapping[str, Any], Mapping[str, Any] | None],
        after: tuple[Mapping[str, Any], Mapping[str, Any] | None],
        key: str,
    ) -> Executed | None: ...

    def tokenizer_effect(
        self, before: Mapping[str, bytes], changed: Mapping[str, bytes], key: str
    ) -> Executed | None: ...


class Context:
    """The revision step a change belongs to: both snapshots (before is None on a first revision).

    `knowledge` is the checked-in table of the pinned transformers (the inferred effects);
    `executor`, where given, runs that transformers on the two sides (the executed effects,
    consulted first). Together they are the one provider of effect knowledge the rules read."""

    def __init__(
        self,
        before: Snapshot | None,
        after: Snapshot | None,
        knowledge: Knowledge | None = None,
        executor: Executing | None = None,
    ) -> None:
        self.before = Side(before) if before is not None else None
        self.after = Side(after) if after is not None else None
        self.knowledge = knowledge or load()
        self.executor = executor
        self._estimates: dict[str, Any] = {}
        self._executed: dict[tuple[str, str, str, str], Executed | None] = {}

    def executed(self, change: Change) -> Executed | None:
        """The executed effect of `change` (computed once per change), or None."""
        ident = (change.artifact.value, change.kind.value, change.file, change.key)
        if ident not in self._executed:
            self._executed[ident] = _execute(change, self) if self.executor is not None else None
        return self._executed[ident]

    def estimate_facts(self, config: Mapping[str, JSONValue]) -> Mapping[str, Any] | str:
        """The structure and counts of `config`'s estimate, or the estimate's one-line error."""
        text = json.dumps(config, sort_keys=True)
        if text not in self._estimates:
            self._estimates[text] = _estimate_facts(config, self.knowledge)
        result: Mapping[str, Any] | str = self._estimates[text]
        return result


Effect = Callable[[Change, "Context | None"], "str | None"]
"""An effect check: evidence when the rule applies ("" for none), None when it does not."""


def path_of(key: str) -> tuple[str, ...]:
    return tuple(key.split(".")) if key else ()


def get_path(doc: Mapping[str, JSONValue] | None, path: Sequence[str]) -> object:
    cur: object = doc
    for part in path:
        if not isinstance(cur, Mapping) or part not in cur:
            return MISSING
        cur = cur[part]
    return cur


def same_json(a: object, b: object) -> bool:
    """Equal as JSON values: 1 == 1.0, but false != 0 and "1" != 1."""

    def norm(v: object) -> object:
        if isinstance(v, bool) or v is None or isinstance(v, str):
            return v
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, Mapping):
            return {str(k): norm(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [norm(x) for x in v]
        return v

    return json.dumps(norm(a), sort_keys=True) == json.dumps(norm(b), sort_keys=True)


def show(value: object, limit: int = 60) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _config_sides(
    ctx: Context | None,
) -> tuple[Mapping[str, JSONValue], Mapping[str, JSONValue]] | None:
    if ctx is None or ctx.before is None or ctx.after is None:
        return None
    b, a = ctx.before.config, ctx.after.config
    if (
        b.state is not SideState.OK
        or a.state is not SideState.OK
        or b.value is None
        or a.value is None
    ):
        return None
    return b.value, a.value


def _from_config(change: Change) -> bool:
    return change.file == CONFIG_FILE and change.artifact in (
        Artifact.CONFIG,
        Artifact.SPECIAL_TOKENS,
    )


# --- class defaults ---------------------------------------------------------------------------


def class_default(change: Change, ctx: Context | None) -> str | None:
    """A key of config.json added or removed with exactly its config class's default value."""
    if not _from_config(change) or change.kind not in (ChangeKind.ADDED, ChangeKind.REMOVED):
        return None
    sides = _config_sides(ctx)
    if sides is None or ctx is None:
        return None
    path = path_of(change.key)
    if not path:
        return None
    doc = sides[1] if change.kind is ChangeKind.ADDED else sides[0]
    cls = ctx.knowledge.class_at(doc, path[:-1])
    value = get_path(doc, path)
    if cls is None or value is MISSING:
        return None
    default = cls.default(path[-1])
    if default is MISSING or not same_json(value, default):
        return None
    what = "adding" if change.kind is ChangeKind.ADDED else "removing"
    return (
        f"`{change.key}` = {show(value)} is {_owner(cls, path[-1])} default in transformers "
        f"{ctx.knowledge.version}, so {what} it leaves the value the model reads unchanged"
    )


def _owner(cls: ConfigClass, key: str) -> str:
    attr = cls.attribute(key)
    alias = f" (its `{attr}`)" if attr != key else ""
    return f"{cls.name}'s{alias}"


def _reading_class(change: Change, ctx: Context | None) -> tuple[ConfigClass | None, bool]:
    """(the built-in config class that reads the object holding the key, whether it is known).

    Unknown (False) without both configs, for remote code and for model types transformers does
    not have; then nothing can be said about what the class reads.
    """
    sides = _config_sides(ctx)
    path = path_of(change.key)
    if sides is None or ctx is None or not path or not _from_config(change):
        return None, False
    doc = sides[0] if change.kind is ChangeKind.REMOVED else sides[1]
    cls = ctx.knowledge.class_at(doc, path[:-1])
    return cls, cls is not None


def read_by_class(change: Change, ctx: Context | None) -> str | None:
    """Empty evidence unless a built-in config class is known not to read the key (then None:
    the rule that needs it to be read does not apply)."""
    cls, known = _reading_class(change, ctx)
    if not known or cls is None:
        return ""
    return "" if path_of(change.key)[-1] in cls.reads else None


def not_read_by_class(change: Change, ctx: Context | None) -> str | None:
    """A key the built-in config class neither declares nor takes from its kwargs."""
    cls, known = _reading_class(change, ctx)
    if not known or cls is None or path_of(change.key)[-1] in cls.reads:
        return None
    version = ctx.knowledge.version if ctx is not None else ""
    return (
        f"{cls.name} in transformers {version} neither declares `{path_of(change.key)[-1]}` "
        "nor converts it; it is kept as an extra attribute that only code asking for it by name "
        "reads"
    )


# --- the estimate re-read ----------------------------------------------------------------------


def _normalised(config: Mapping[str, JSONValue], knowledge: Knowledge) -> dict[str, JSONValue]:
    """`config` with standard names renamed to the class's own attributes, as transformers sets them."""
    out = dict(config)
    cls = knowledge.class_at(config, ())
    if cls is not None:
        for std, attr in cls.attribute_map.items():
            if std in out and attr not in out and std != attr:
                out[attr] = out.pop(std)
    return out


def _estimate_facts(
    config: Mapping[str, JSONValue], knowledge: Knowledge
) -> Mapping[str, Any] | str:
    try:
        est = estimate(_normalised(config, knowledge))
    except EstimateError as exc:
        return str(exc)
    p = est.params
    return {
        "params": {"total": p.total, "active": p.active, "embedding": p.embedding},
        "components": dict(p.by_component),
        "layers": est.layers,
        "graph": _shapeless(list(est.structure.graph)),
        "pattern": est.structure.pattern.summary,
    }


def _shapeless(value: object) -> object:
    """The structure graph without tensor shapes: sequence lengths are limits, not structure, and
    width changes show in the counts."""
    if isinstance(value, Mapping):
        return {k: _shapeless(v) for k, v in value.items() if k != "shape"}
    if isinstance(value, list):
        return [_shapeless(v) for v in value]
    return value


def _with(config: Mapping[str, JSONValue], path: Sequence[str], value: object) -> dict[str, Any]:
    out: dict[str, Any] = copy.deepcopy(dict(config))
    node = out
    for part in path[:-1]:
        nxt = node.get(part)
        if not isinstance(nxt, dict):
            nxt = {}
            node[part] = nxt
        node = nxt
    if value is MISSING:
        node.pop(path[-1], None)
    else:
        node[path[-1]] = copy.deepcopy(value)
    return out


def _billions(n: object) -> str:
    if isinstance(n, int) and not isinstance(n, bool):
        return f"{n / 1e9:.3f}B" if n >= 1e8 else f"{n:,}"
    return show(n)


def _graph_types(graph: object) -> list[str]:
    out: list[str] = []
    if isinstance(graph, list):
        for node in graph:
            if not isinstance(node, Mapping):
                continue
            if "type" in node:
                out.append(f"{node.get('node')}: {node['type']}")
            out += _graph_types(node.get("block"))
    return out


def estimate_moves(change: Change, ctx: Context | None) -> str | None:
    """Re-read the previous config with only this key changed: does the estimate's structure or
    counts move? Evidence names what moved; None when nothing did or it cannot be told."""
    if change.artifact is not Artifact.CONFIG or change.file != CONFIG_FILE or not change.key:
        return None
    sides = _config_sides(ctx)
    if sides is None or ctx is None:
        return None
    path = path_of(change.key)
    base = sides[0]
    changed = _with(base, path, get_path(sides[1], path))
    old, new = ctx.estimate_facts(base), ctx.estimate_facts(changed)
    if isinstance(old, str):
        return None  # the previous config cannot be estimated: nothing to compare with
    if isinstance(new, str):
        return (
            f"with only `{change.key}` changed, the estimate can no longer read the config ({new})"
        )
    moved: list[str] = []
    if old["params"] != new["params"] or old["components"] != new["components"]:
        moved.append(
            f"parameters {_billions(old['params']['total'])} → {_billions(new['params']['total'])}"
            if old["params"]["total"] != new["params"]["total"]
            else "the parameter split between components"
        )
    if old["layers"] != new["layers"]:
        moved.append(f"layers {old['layers']} → {new['layers']}")
    if old["graph"] != new["graph"] or old["pattern"] != new["pattern"]:
        a, b = _graph_types(old["graph"]), _graph_types(new["graph"])
        kinds = [f"{x} → {y.split(': ', 1)[1]}" for x, y in zip(a, b, strict=False) if x != y]
        if kinds:
            moved.append("structure " + "; ".join(dict.fromkeys(kinds)))
        elif old["pattern"] != new["pattern"]:
            moved.append(f"attention pattern {show(old['pattern'])} → {show(new['pattern'])}")
        elif not moved:
            moved.append("the model's structure")
    if not moved:
        return None
    return (
        f"re-reading the previous config with only `{change.key}` changed moves the estimate: "
        + ", ".join(moved)
    )


# --- generation defaults --------------------------------------------------------------------------


def _governs(side: Side | None, path: tuple[str, ...], knowledge: Knowledge) -> bool | None:
    """Whether config.json's key at `path` sets a generation default at this revision.

    transformers 5 reads generation_config.json when it can (and then ignores config.json's
    generation keys entirely); only when the file is missing or unreadable does it build the
    generation config from config.json: top-level keys, then keys of the first of `decoder`,
    `generator`, `text_config` for what the top level leaves unset.
    """
    if side is None:
        return False
    gen = side.generation
    if gen.state is SideState.UNTRACKED:
        return None
    if gen.state is SideState.OK:
        return False
    if len(path) == 1:
        return True
    conf = side.config.value if side.config.state is SideState.OK else None
    if conf is None:
        return None
    first = next((k for k in DECODER_CONFIG_KEYS if isinstance(conf.get(k), Mapping)), None)
    if len(path) != 2 or path[0] != first:
        return False
    top = conf.get(path[1], MISSING)
    default = knowledge.generation_defaults.get(path[1], None)
    return top is MISSING or top is None or same_json(top, default)


def is_generation_key(change: Change, ctx: Context | None) -> bool:
    knowledge = ctx.knowledge if ctx is not None else load()
    path = path_of(change.key)
    return (
        bool(path)
        and path[-1] in knowledge.generation_fields
        and (len(path) == 1 or (len(path) == 2 and path[0] in DECODER_CONFIG_KEYS))
    )


def _generation_state(change: Change, ctx: Context | None) -> tuple[bool | None, bool | None]:
    if ctx is None:
        return None, None
    path = path_of(change.key)
    return (
        _governs(ctx.before, path, ctx.knowledge),
        _governs(ctx.after, path, ctx.knowledge),
    )


def generation_shadowed(change: Change, ctx: Context | None) -> str | None:
    """A generation key of config.json that sets no generation default at either revision."""
    if change.artifact is not Artifact.CONFIG or not is_generation_key(change, ctx) or ctx is None:
        return None
    before, after = _generation_state(change, ctx)
    if before is False and after is False:
        return (
            f"generation_config.json can be read at both revisions, and transformers "
            f"{ctx.knowledge.version} then takes every generation default from it and ignores "
            f"config.json's `{change.key}`"
        )
    return None


def generation_governs(change: Change, ctx: Context | None) -> str | None:
    """A generation key (config.json's, or generation_config.json's) that sets a generation default."""
    if not is_generation_key(change, ctx):
        return None
    version = (ctx.knowledge if ctx is not None else load()).version
    if change.artifact is Artifact.GENERATION_CONFIG:
        return (
            f"generation_config.json governs: transformers {version} reads `{change.key}` from it "
            "in preference to config.json"
        )
    if change.artifact is not Artifact.CONFIG:
        return None
    before, after = _generation_state(change, ctx)
    if before is None or after is None:
        return (
            f"config.json governs `{change.key}` whenever generation_config.json is missing or "
            "unreadable, and whether it is could not be known here"
        )
    if after:
        return (
            "config.json governs: this revision has no readable generation_config.json, so "
            f"transformers {version} builds the model's generation defaults from config.json, "
            f"`{change.key}` included"
        )
    if before:
        return (
            f"config.json governed `{change.key}` at the previous revision (no readable "
            "generation_config.json); generation_config.json governs now"
        )
    return None


# --- token ids -------------------------------------------------------------------------------------


def _ids(value: object) -> list[int]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, list):
        return [i for v in value for i in _ids(v)]
    if isinstance(value, Mapping):  # sequence_bias and the like: {"[1, 2]": -1.0}
        return []
    return []


def _named(ids: list[int], tokens: Mapping[int, str] | None) -> str:
    if tokens is None:
        return ""
    shown = ids[:MAX_NAMED_IDS]
    parts = [
        f"{i} = {json.dumps(tokens[i], ensure_ascii=False) if i in tokens else '(no such id)'}"
        for i in shown
    ]
    more = f", … ({len(ids) - len(shown)} more)" if len(ids) > len(shown) else ""
    return ", ".join(parts) + more


def token_names(change: Change, ctx: Context | None) -> str:
    """Which tokens the ids name before and after (by each revision's tokenizer), as evidence."""
    before_ids, after_ids = _ids(change.before), _ids(change.after)
    if not before_ids and not after_ids:
        return ""
    b_tokens = ctx.before.tokens if ctx is not None and ctx.before is not None else None
    a_tokens = ctx.after.tokens if ctx is not None and ctx.after is not None else None
    if b_tokens is None and a_tokens is None:
        return "the tokenizer is not known at either revision, so the ids cannot be named"
    parts = []
    if before_ids:
        parts.append(f"before: {_named(before_ids, b_tokens) or 'tokenizer unknown'}")
    if after_ids:
        parts.append(f"after: {_named(after_ids, a_tokens) or 'tokenizer unknown'}")
    return "; ".join(parts)


# --- classification heads -----------------------------------------------------------------------

_HEAD_SUFFIXES = (
    "ForSequenceClassification",
    "ForTokenClassification",
    "ForAudioClassification",
    "ForImageClassification",
    "ForVideoClassification",
    "ForMultipleChoice",
)


def _architectures(ctx: Context | None) -> list[str] | None:
    sides = _config_sides(ctx)
    if sides is None:
        return None
    out: list[str] = []
    for doc in sides:
        arch = doc.get("architectures")
        if isinstance(arch, list):
            out += [str(a) for a in arch]
    return out


def classifier_head(change: Change, ctx: Context | None) -> str | None:
    arch = _architectures(ctx)
    heads = [a for a in arch or [] if a.endswith(_HEAD_SUFFIXES)]
    return f"the checkpoint is a classifier ({', '.join(heads)})" if heads else None


def no_classifier_head(change: Change, ctx: Context | None) -> str | None:
    arch = _architectures(ctx)
    if not arch or any(a.endswith(_HEAD_SUFFIXES) for a in arch):
        return None
    return f"the architectures ({', '.join(dict.fromkeys(arch))}) have no classification head"


# --- chat templates ---------------------------------------------------------------------------------


def _outcome(change: Change) -> Mapping[str, Any] | None:
    rendered = change.facts.get("rendered") if change.facts else None
    return rendered if isinstance(rendered, Mapping) else None


def other_gguf_models(change: Change, ctx: Context | None) -> str | None:
    """A GGUF model removed while the revision keeps other GGUF models (the repo's other quants):
    the evidence names them."""
    if ctx is None or ctx.after is None:
        return None
    left = sorted(ctx.after.snapshot.gguf_models)
    if not left:
        return None
    shown = ", ".join(left[:4]) + (", …" if len(left) > 4 else "")
    one = len(left) == 1
    return f"{len(left)} other GGUF model{'' if one else 's'} remain{'s' if one else ''}: {shown}"


def renders_the_same(change: Change, ctx: Context | None) -> str | None:
    """A template source change after which every canonical conversation renders as before."""
    out = _outcome(change)
    if out is None or out.get("differs") or out.get("fails_both") or not out.get("same"):
        return None
    n = len(out["same"])
    return (
        f"rendered output unchanged for {n} conversation{'s' * (n != 1)} ({', '.join(out['same'])})"
    )


def renders_partly_unknown(change: Change, ctx: Context | None) -> str | None:
    """A template source change with no rendered difference, but conversations it cannot render."""
    out = _outcome(change)
    if out is None or out.get("differs") or not out.get("fails_both"):
        return None
    fails = out["fails_both"]
    n = len(out.get("same") or [])
    listed = "; ".join(f"{k}: {v}" for k, v in sorted(fails.items()))
    return (
        f"rendered output unchanged for {n} conversation{'s' * (n != 1)}, but {len(fails)} could "
        f"not be rendered in either revision, so the change's effect on them is unknown ({listed})"
    )


def renders_differently(change: Change, ctx: Context | None) -> str | None:
    """A template source change whose rendered differences are reported as their own changes."""
    out = _outcome(change)
    if out is None or not out.get("differs"):
        return None
    fails = out.get("fails_both") or {}
    tail = (
        f"; {len(fails)} could not be rendered in either revision ("
        + "; ".join(f"{k}: {v}" for k, v in sorted(fails.items()))
        + ")"
        if fails
        else ""
    )
    return f"renders differently for {', '.join(out['differs'])}{tail}"


# --- executed effects ---------------------------------------------------------------------------

_KEYED_KINDS = (ChangeKind.ADDED, ChangeKind.REMOVED, ChangeKind.CHANGED, ChangeKind.TYPE_CHANGED)


def checkpoint_dtype(snapshot: Snapshot | None) -> str | None:
    """The dtype `from_pretrained(dtype="auto")` falls back to when the config names none: the
    first floating tensor's (first shard by path, tensors by name), as a torch dtype name."""
    if snapshot is None:
        return None
    names = {"BF16": "bfloat16", "F16": "float16", "F32": "float32", "F64": "float64"}
    for path in sorted(snapshot.headers):
        tensors = snapshot.headers[path].tensors
        for tname in sorted(tensors):
            dtype = names.get(tensors[tname].dtype)
            if dtype is not None:
                return dtype
    return None


def _ok(side: FileSide) -> Mapping[str, JSONValue] | None:
    return side.value if side.state is SideState.OK else None


def _execute(change: Change, ctx: Context) -> Executed | None:
    runner = ctx.executor
    if runner is None or ctx.before is None or ctx.after is None or not change.key:
        return None
    if change.kind not in _KEYED_KINDS:
        return None
    if change.file in TOKENIZER_CHANGE_FILES and change.artifact in (
        Artifact.TOKENIZER,
        Artifact.SPECIAL_TOKENS,
    ):
        return _execute_tokenizer(change, ctx, runner)
    path = path_of(change.key)
    b_conf, a_conf = _ok(ctx.before.config), _ok(ctx.after.config)
    if SideState.UNTRACKED in (ctx.before.generation.state, ctx.after.generation.state):
        return None  # whether generation_config.json governs cannot be known
    # transformers reads generation_config.json when it can and else builds the generation
    # defaults from config.json (`_governs`)
    b_gen, a_gen = _ok(ctx.before.generation), _ok(ctx.after.generation)
    if _from_config(change):
        if b_conf is None or a_conf is None:
            return None
        changed = _with(b_conf, path, get_path(a_conf, path))
        # the checkpoint is the previous revision's on both sides: a re-upload is its own change
        dtype = checkpoint_dtype(ctx.before.snapshot)
        if path[0] == "task_specific_params":
            return None  # read by pipelines, not by the model or generate(): not executed here
        found = runner.config_effect(b_conf, changed, change.key, (dtype, dtype))
        if found is None or found.kind not in ("same", "unread"):
            return found
        # the config's effect on generation: in the previous revision's setting (its
        # generation_config.json) and in this one's (the key taken back out of this config)
        undone = _with(a_conf, path, get_path(b_conf, path))
        gens = [
            runner.generation_effect((undone, a_gen), (a_conf, a_gen), change.key),
            runner.generation_effect((b_conf, b_gen), (changed, b_gen), change.key),
        ]
        moved = next((g for g in gens if g is not None and g.kind != "generation-same"), None)
        if moved is not None:
            return moved
        if any(g is None for g in gens) or gens[0] is None:
            return None
        generation = gens[0].evidence.split(": ", 1)[-1]  # without "checked with ...: "
        return Executed("same", f"{found.evidence}; {generation}", found.version, found.attributes)
    if change.file == GENERATION_FILE and change.artifact is Artifact.GENERATION_CONFIG:
        if b_gen is None or a_gen is None:
            return None
        b_config = b_conf if b_conf is not None else {}
        a_config = a_conf if a_conf is not None else {}
        changed_gen = _with(b_gen, path, get_path(a_gen, path))
        undone_gen = _with(a_gen, path, get_path(b_gen, path))
        # in this revision's setting first (the other keys as they are now), then the previous
        gens = [
            runner.generation_effect((a_config, undone_gen), (a_config, a_gen), change.key),
            runner.generation_effect((b_config, b_gen), (b_config, changed_gen), change.key),
        ]
        moved = next((g for g in gens if g is not None and g.kind != "generation-same"), None)
        return moved if moved is not None else gens[0]
    return None


def _tokenizer_files(snapshot: Snapshot) -> dict[str, bytes] | None:
    """The files AutoTokenizer reads at `snapshot` (None: one of them is in the tree but its
    bytes are not known, so what it builds cannot be)."""
    out: dict[str, bytes] = {}
    for name in TOKENIZER_INPUTS:
        if name in snapshot.files:
            out[name] = snapshot.files[name]
        elif name in snapshot.paths or name in snapshot.unreadable:
            return None
    return out


def _execute_tokenizer(change: Change, ctx: Context, runner: Executing) -> Executed | None:
    """AutoTokenizer on the previous revision's tokenizer files, and on them with only this
    change applied: a key of tokenizer_config.json or special_tokens_map.json set (or removed)
    as the revision has it, or the revision's whole tokenizer.json."""
    assert ctx.before is not None and ctx.after is not None
    before = _tokenizer_files(ctx.before.snapshot)
    after = _tokenizer_files(ctx.after.snapshot)
    if before is None or after is None:
        return None
    changed = dict(before)
    name = change.file
    if name == TOKENIZER_FILE or name not in before or name not in after:
        if name in after:
            changed[name] = after[name]
        else:
            changed.pop(name, None)
    else:
        old_doc, new_doc = (
            _ok(_read_json(ctx.before.snapshot, name)),
            _ok(_read_json(ctx.after.snapshot, name)),
        )
        if old_doc is None or new_doc is None:
            return None
        path = path_of(change.key)
        value = get_path(new_doc, path)
        parent = get_path(new_doc, path[:-1])
        if value is MISSING and not isinstance(parent, Mapping):
            changed[name] = after[name]  # the key's place is gone: the file as it is now
        else:
            changed[name] = json.dumps(_with(old_doc, path, value)).encode()
    return runner.tokenizer_effect(before, changed, change.key or change.file)


def _executed_kinds(*kinds: str) -> Effect:
    def check(change: Change, ctx: Context | None) -> str | None:
        found = ctx.executed(change) if ctx is not None else None
        return found.evidence if found is not None and found.kind in kinds else None

    check.__name__ = f"executed_{'_'.join(k.replace('-', '_') for k in kinds)}"
    return check


executed_no_effect = _executed_kinds("same", "unread", "generation-same", "tokenizer-same")
"""Executed: no attribute the model reads, and no effective generation default, changed."""
executed_model = _executed_kinds("model")
"""Executed: the model built from the config, or what its code reads when it runs, changed."""
executed_generation_ids = _executed_kinds("generation-ids")
"""Executed: the effective GenerationConfig's token ids (eos, bos, pad, decoder start) changed."""
executed_generation = _executed_kinds("generation")
executed_limit = _executed_kinds("limit")
executed_tokenizer_text = _executed_kinds("tokenizer-text")
"""Executed: ordinary text encodes to other ids with the tokenizer AutoTokenizer builds."""
executed_tokenizer_special = _executed_kinds("tokenizer-special", "tokenizer-broken")
"""Executed: the tokenizer's special tokens, their ids or added tokens differ, or it no longer
loads."""
executed_tokenizer_settings = _executed_kinds("tokenizer-settings", "tokenizer-loads")
"""Executed: only padding or truncation side, model_max_length or decoding differ (or a
tokenizer that failed to load now loads)."""
"""Executed: only a position limit changed; the model and its computation within it are the same."""
"""Executed: the effective GenerationConfig's other defaults changed."""


def remote_config_names_type(change: Change, ctx: Context | None) -> str | None:
    """`model_type` of a config whose `auto_map` names the repo's own AutoConfig class at both
    revisions, where neither value is a model type transformers has: the remote class is loaded
    (under trust_remote_code) whatever `model_type` says, and without it neither value loads."""
    if change.key != "model_type" or not _from_config(change):
        return None
    sides = _config_sides(ctx)
    if sides is None or ctx is None:
        return None
    remote = []
    for doc in sides:
        auto_map = doc.get("auto_map")
        if not isinstance(auto_map, Mapping) or not isinstance(auto_map.get("AutoConfig"), str):
            return None
        remote.append(str(auto_map["AutoConfig"]))
    types = [change.before, change.after]
    if any(isinstance(t, str) and t in ctx.knowledge.classes for t in types):
        return None
    shown = ", ".join(f"`{t}`" for t in types if isinstance(t, str))
    return (
        f"auto_map names the repo's own config class (`{remote[1]}`), which AutoConfig loads "
        f"under trust_remote_code whatever `model_type` says; transformers "
        f"{ctx.knowledge.version} has no built-in config class for {shown or 'it'}, so without "
        "trust_remote_code the config does not load at either revision"
    )
