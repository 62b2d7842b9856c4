"""Effects decided by running the pinned transformers' own code on both sides of a config change.

`Executor` implements `tracker.advisories.effects.Executing` (what the rules consult through the
revision's `Context`): for a config.json or generation_config.json change it builds, with the
installed transformers (the `oracle` extra pins the version), never the repo's own code and
never weights:

- the config class `AutoConfig` maps the `model_type` to, from the document (`from_dict`:
  attribute maps, derived attributes, defaults), on the previous revision and on the previous
  revision with only this key changed; their `to_dict()` are the effective attributes;
- the model `architectures[0]` names (else `AutoModelForCausalLM`, else `AutoModel`) on torch's
  meta device with weight initialisation skipped: the module tree (types, parameter and buffer
  shapes, tied parameters, each module's `extra_repr` and plain attributes) of both configs;
- which config attributes the modeling code reads at all (`config.<name>` in the source of every
  transformers module that defines a module of the tree, plus the shared masking and rotary code);
- the effective `GenerationConfig`: generation_config.json when it can be read, else
  `GenerationConfig.from_model_config` of the config (transformers' precedence).

For a tokenizer change (tokenizer_config.json, special_tokens_map.json, tokenizer.json and the
files beside them) it runs `AutoTokenizer.from_pretrained` (never remote code:
`trust_remote_code=False`, `local_files_only=True`) on a temporary directory holding each side's
tokenizer files, and compares what users meet (`TokenizerView`): the named special tokens and their
ids, the added tokens, the padding and truncation sides, `model_max_length`,
`clean_up_tokenization_spaces`, the ids of a fixed set of texts (and of the texts naming each
special token) and their decoded text, and the ids of the chat template's rendered canonical
conversation where the tokenizer has a template. A tokenizer class that is the repo's own
(`auto_map.AutoTokenizer`, or a `tokenizer_class` transformers does not define) is never run:
the effect is "unexecuted", with that reason. Views are cached by the digest of the files.

Nothing is executed for a `model_type` transformers does not have or for a config whose
`auto_map` names a remote `AutoConfig` (None: the caller falls back to the inferred rules).
Structures are cached per (model class, effective config digest); one build runs under
`BUILD_LIMIT_S` (SIGALRM, in the main thread) and one that overruns is "not executed".
Two normalisations say what transformers' code does with a value rather than its spelling: a
sliding window at least as long as `max_position_embeddings` is no window (every token of an
accepted input attends to every earlier one), and the dtype is the one the loader uses
(`from_pretrained`'s default `dtype="auto"`: the config's, else the checkpoint's first floating
dtype).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import hashlib
import importlib
import importlib.metadata
import inspect
import json
import os
import re
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from tracker.advisories.effects import Executed, show
from tracker.diff.conversations import CONVERSATIONS

BUILD_LIMIT_S = 5.0
"""The longest one model build on the meta device may take before execution is given up."""
CACHE_SIZE = 64
IGNORED_ATTRIBUTES = frozenset(
    {"transformers_version", "_name_or_path", "_commit_hash", "architectures", "auto_map"}
)
"""Attributes of `to_dict()` that no loading or modeling code reads as a model setting
(`architectures` chooses the class, which the structure comparison covers)."""
TOKEN_ID_FIELDS = frozenset(
    {"eos_token_id", "bos_token_id", "pad_token_id", "decoder_start_token_id"}
)
SAMPLING_FIELDS = frozenset({"temperature", "top_k", "top_p", "min_p", "typical_p",
                             "epsilon_cutoff", "eta_cutoff"})  # fmt: skip
_READ = re.compile(
    r"\bconfig\.([A-Za-z_][A-Za-z_0-9]*)"
    r"|getattr\(\s*(?:self\.)?[a-z_]*config\s*,\s*[\"']([A-Za-z_][A-Za-z_0-9]*)[\"']"
)
_SHARED_MODULES = ("transformers.masking_utils", "transformers.modeling_rope_utils")
_GENERIC_MODULES = ("transformers.modeling_utils", "transformers.generation.utils")
"""Loading, saving and generation plumbing every model inherits: not what a model type reads."""
_DIGITS = re.compile(r"\.\d+(?=\.|$)")
_UNUSED_ATTRIBUTES = frozenset({"training", "name_or_path"})
"""Module attributes no computation reads (the train/eval flag is set by the caller; the path the
config was loaded from is a label)."""
_WARM_CONFIG = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 8,
    "intermediate_size": 16,
    "num_attention_heads": 2,
    "num_hidden_layers": 1,
    "vocab_size": 16,
}
_ROPE_CACHE_ATTRIBUTES = frozenset({"max_seq_len_cached", "original_max_seq_len"})
_POSITION_LIMITS = frozenset({"max_position_embeddings"})
"""Read by the model only as a limit (rotary caches of dynamic rope, cache sizing): within both
limits the computation is the same."""


TOKENIZER_TEXTS = (
    "Hello world",
    " The quick brown fox jumps over the lazy dog.",
    "def f(x):\n    return x  # 42",
    "Ünïcödé: 日本語のテキスト, émojis 🙂",
)
"""The fixed texts every tokenizer encodes (with and without special tokens); each side's special
tokens are also encoded inside a sentence ("Hi <s> there")."""
CHAT_CONVERSATION = "generation_prompt"
"""The canonical conversation (`tracker.diff.conversations`) whose rendered ids are compared."""
VOCABULARY_FILES = ("tokenizer.json", "vocab.json")
_ROLES = ("bos", "eos", "unk", "sep", "pad", "cls", "mask")
_SETTINGS = (
    "padding_side",
    "truncation_side",
    "model_max_length",
    "clean_up_tokenization_spaces",
    "decoded",
)
"""View fields that change what users meet, but not the ids a text encodes to."""


class _Overrun(Exception):
    pass


_OVERRUNS = [0]
"""How many builds have overrun BUILD_LIMIT_S in this process: a result an overrun shaped
depends on the machine's load, and is never written to the effect cache."""


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Raise _Overrun in the block after `seconds` (main thread only, and only where no other
    real-time timer is set, which it would cancel; elsewhere unbounded)."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getitimer(signal.ITIMER_REAL)[0] > 0
    ):
        yield
        return

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        _OVERRUNS[0] += 1
        raise _Overrun

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@dataclass(frozen=True)
class _Built:
    """One config as transformers builds it: its class, effective attributes, and the model."""

    cls: str
    attrs: Mapping[str, Any]
    model: str
    tree: tuple[tuple[str, ...], ...] | None
    params: int
    reads: Mapping[str, tuple[str, ...]]
    raw: Mapping[str, Any]
    error: str | None


def _plain(value: object) -> bool:
    if value is None or isinstance(value, bool | int | float | str):
        return True
    if isinstance(value, list | tuple):
        return all(_plain(v) for v in value)
    return False


def _digest(value: object) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class EffectMiss(BaseException):
    """Raised in `cache_only` mode when an effect is not in the cache (what can be answered
    without importing transformers: `tracker.sandbox.analysis_serve` imports it where a miss
    needs it, through `Executor.warming`, instead).

    A BaseException, so that no `except Exception` between the rules and the executor turns
    it into an "inferred" verdict."""


_SOURCE = Path(__file__).resolve().parents[1]


@functools.cache
def _salt() -> str:
    """What decides an executed effect besides its inputs: the installed transformers, torch,
    tokenizers and jinja2, and tracker's own source (every module: the rules, the conversations
    and the normalisations this module applies are code)."""
    versions = []
    for dist in ("transformers", "torch", "tokenizers", "jinja2", "huggingface_hub"):
        try:
            versions.append(f"{dist}=={importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{dist} absent")
    code = hashlib.sha256()
    for path in sorted(_SOURCE.rglob("*.py")):
        code.update(str(path.relative_to(_SOURCE)).encode() + b"\0" + path.read_bytes() + b"\0")
    return _digest([EFFECT_CACHE_FORMAT, versions, code.hexdigest()])


EFFECT_CACHE_FORMAT = 1


def _canonical(value: object) -> object:
    """`value` as JSON-able data for a cache key: bytes by their SHA-256, tuples as lists."""
    if isinstance(value, bytes):
        return {"sha256": hashlib.sha256(value).hexdigest()}
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return value


class EffectCache:
    """Executed effects on disk, one JSON file per (inputs, `_salt()`): the same change to the
    same document (a family's fine-tunes share their configs; a repair, a restarted worker and
    a second deployment analyse the same pairs again) is answered without importing
    transformers. A key holds the whole inputs (documents, the key changed, checkpoint dtypes)
    and everything else that decides the answer, so an entry is never stale; a result an
    overrun of `BUILD_LIMIT_S` shaped, or one made without transformers, is not written. Any
    error reading or writing the cache is a miss (the effect is executed)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.hits = 0

    def key(self, method: str, args: object) -> str:
        return _digest([_salt(), method, _canonical(args)])

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> Executed | None:
        """The effect kept under `key`; None on a miss (absent, unreadable or damaged)."""
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
            seqs = {
                name: (list if data["lists"][name] else tuple)(str(v) for v in data[name])
                for name in ("attributes", "readers")
            }
            value = Executed(
                kind=str(data["kind"]),
                evidence=str(data["evidence"]),
                version=str(data["version"]),
                **seqs,
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None
        self.hits += 1
        return value

    def put(self, key: str, value: Executed) -> None:
        data = {
            "kind": value.kind,
            "evidence": value.evidence,
            "version": value.version,
            "attributes": list(value.attributes),
            "readers": list(value.readers),
            # the sequences come back as the type they were made (a list or a tuple)
            "lists": {
                "attributes": isinstance(value.attributes, list),
                "readers": isinstance(value.readers, list),
            },
        }
        path = self._path(key)
        tmp: str | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh)
            os.replace(tmp, path)
        except OSError:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)


def _settled(value: Executed) -> bool:
    """Whether `value` is the same on any machine: not shaped by a memory or recursion limit of
    this process (the executor reports caught exceptions by their type name). None (execution
    given up, which a caught MemoryError can also cause) is never cached either."""
    text = " ".join([value.evidence, *value.attributes, *value.readers])
    return "MemoryError" not in text and "RecursionError" not in text


class Executor:
    """Executes transformers' config, modeling and generation code on config documents.

    transformers and torch are imported on first use (`warm()` does it ahead, outside any
    budget); where they cannot be, every effect is None (the inferred rules decide).
    Thread-safe: one execution at a time. `timings` collects the seconds of each
    `config_effect` and `generation_effect` call (the bench reads them); `builds` counts the
    model builds (the rest were cache hits)."""

    def __init__(self, cache: EffectCache | None = None) -> None:
        # `cache`: effects on disk (`EffectCache`); `cache_only`: a miss raises EffectMiss
        # instead of importing transformers
        self.cache = cache
        self.cache_only = False
        # brackets the import of transformers and torch where it happens (see `warm`)
        self.warming: Callable[[], contextlib.AbstractContextManager[None]] | None = None
        try:
            self.version: str = importlib.metadata.version("transformers")
        except importlib.metadata.PackageNotFoundError:
            self.version = ""
        self._lock = threading.RLock()
        self._modules: tuple[Any, Any] | None = None
        self._failed = False
        self._built: dict[str, _Built] = {}
        self._sources: dict[str, frozenset[str]] = {}
        self._tokenizers: dict[str, Any] = {}
        self.timings: list[float] = []
        self.builds = 0

    def warm(self) -> bool:
        """Import transformers and torch now; whether they are available. `warming`, when set,
        brackets the import (the analysis worker takes it out of the request's budget)."""
        with self._lock:
            if self._modules is None and not self._failed:
                with self.warming() if self.warming is not None else contextlib.nullcontext():
                    return self._import()
            return self._modules is not None

    def _import(self) -> bool:
        try:
            import torch
            import transformers
            from transformers.utils import logging as tf_logging
        except Exception:
            self._failed = True
            return False
        tf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
        tf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        self.version = transformers.__version__
        self._modules = (transformers, torch)
        # the shared modeling machinery and one tiny build, so that what a request imports
        # under the analysis budget is only its model type's own module
        with contextlib.suppress(Exception):
            self._build(_WARM_CONFIG, None)
            self._built.clear()
        self.builds = 0
        return True

    @property
    def warmed(self) -> bool:
        """Whether transformers and torch are imported in this process."""
        return self._modules is not None

    def _cached(self, method: str, args: object, run: Any) -> Executed | None:
        """`run()` through the cache: a hit is answered from disk; a miss raises EffectMiss in
        `cache_only` mode, else runs and is written unless a build overran or transformers
        could not be imported."""
        cache = self.cache
        key = cache.key(method, args) if cache is not None else ""
        if cache is not None:
            hit = cache.get(key)
            if hit is not None:
                return hit
        if self.cache_only:
            raise EffectMiss(method)
        overruns = _OVERRUNS[0]
        value: Executed | None = run()
        settled = self._modules is not None and _OVERRUNS[0] == overruns
        if cache is not None and value is not None and settled and _settled(value):
            cache.put(key, value)
        return value

    @property
    def tf(self) -> Any:
        assert self._modules is not None
        return self._modules[0]

    @property
    def torch(self) -> Any:
        assert self._modules is not None
        return self._modules[1]

    # -- the Executing protocol ---------------------------------------------------------------
    def config_effect(
        self,
        before: Mapping[str, Any],
        changed: Mapping[str, Any],
        key: str,
        dtypes: tuple[str | None, str | None],
    ) -> Executed | None:
        """The effect of config `before` → `changed` (the previous config with only `key`
        changed); `dtypes`: each side's checkpoint dtype (first floating tensor), if known."""
        start = time.perf_counter()

        def run() -> Executed | None:
            if not self.warm():
                return None
            return self._config_effect(before, changed, key, dtypes)

        try:
            with self._lock:
                return self._cached("config", [before, changed, key, dtypes], run)
        finally:
            self.timings.append(time.perf_counter() - start)

    def generation_effect(
        self,
        before: tuple[Mapping[str, Any], Mapping[str, Any] | None],
        after: tuple[Mapping[str, Any], Mapping[str, Any] | None],
        key: str,
    ) -> Executed | None:
        """The effect on the effective GenerationConfig of (config, generation_config or None)
        `before` → `after`."""
        start = time.perf_counter()

        def run() -> Executed | None:
            if not self.warm():
                return None
            old, new = self._generation(*before), self._generation(*after)
            if old is None or new is None:
                return None
            return self._generation_verdict(old, new, key, before[1] is not None)

        try:
            with self._lock:
                return self._cached("generation", [before, after, key], run)
        finally:
            self.timings.append(time.perf_counter() - start)

    def tokenizer_effect(
        self, before: Mapping[str, bytes], changed: Mapping[str, bytes], key: str
    ) -> Executed | None:
        """The effect on the tokenizer `AutoTokenizer` builds of the tokenizer files `before` →
        `changed` (file name → bytes: the previous revision's, with only this change applied)."""
        start = time.perf_counter()

        def run() -> Executed | None:
            if not self.warm():
                return None
            return self._tokenizer_effect(before, changed, key)

        try:
            with self._lock:
                return self._cached("tokenizer", [before, changed, key], run)
        finally:
            self.timings.append(time.perf_counter() - start)

    # -- tokenizers ---------------------------------------------------------------------------
    def _remote_tokenizer(self, files: Mapping[str, bytes]) -> str | None:
        """Why AutoTokenizer would need the repo's own code for these files (None: it does not)."""
        try:
            conf = json.loads(files["tokenizer_config.json"]) if "tokenizer_config.json" in files \
                else {}  # fmt: skip
        except ValueError:
            return None
        if not isinstance(conf, dict):
            return None
        auto_map = conf.get("auto_map")
        remote = auto_map.get("AutoTokenizer") if isinstance(auto_map, dict) else None
        if remote:
            shown = remote if isinstance(remote, str) else next((r for r in remote if r), "")
            return (
                f"the tokenizer class is the repo's own (`auto_map.AutoTokenizer` = "
                f"{show(shown, 80)}), which tracker never runs"
            )
        name = conf.get("tokenizer_class")
        if isinstance(name, str) and name:
            from transformers.models.auto.tokenization_auto import tokenizer_class_from_name

            if tokenizer_class_from_name(name) is None:  # AutoTokenizer's own resolution
                return (
                    f"`tokenizer_class` {show(name)} is not a class transformers {self.version} "
                    "defines (it would be the repo's own code)"
                )
        return None

    def _tokenizer(self, files: Mapping[str, bytes]) -> Any:
        """The tokenizer AutoTokenizer builds from `files`, or why it cannot (a line)."""
        key = _digest({k: hashlib.sha256(v).hexdigest() for k, v in sorted(files.items())})
        if key in self._tokenizers:
            return self._tokenizers[key]
        with tempfile.TemporaryDirectory(prefix="tracker-tokenizer-") as where:
            for name, data in files.items():
                with open(os.path.join(where, name), "wb") as fh:
                    fh.write(data)
            try:
                with _time_limit(BUILD_LIMIT_S):
                    made: Any = self.tf.AutoTokenizer.from_pretrained(
                        where, trust_remote_code=False, local_files_only=True
                    )
            except _Overrun:
                return None
            except Exception as exc:
                said = " ".join(str(exc).replace(where, "<repo>").split())
                said = said if len(said) <= 200 else said[:199] + "…"
                made = f"AutoTokenizer.from_pretrained fails ({type(exc).__name__}: {said})"
        if len(self._tokenizers) >= CACHE_SIZE:
            self._tokenizers.pop(next(iter(self._tokenizers)))
        self._tokenizers[key] = made
        return made

    def _tokenizer_effect(
        self, before: Mapping[str, bytes], changed: Mapping[str, bytes], key: str
    ) -> Executed | None:
        where = f"checked with transformers {self.version}"
        remote = self._remote_tokenizer(before) or self._remote_tokenizer(changed)
        if remote is not None:
            return Executed("unexecuted", remote, self.version)
        old, new = self._tokenizer(before), self._tokenizer(changed)
        if old is None or new is None:
            return None
        if isinstance(old, str) and isinstance(new, str):
            return Executed("unexecuted", f"at both sides {new}", self.version)
        if isinstance(new, str):
            return Executed(
                "tokenizer-broken", f"{where}: with only `{key}` changed, {new}", self.version
            )
        if isinstance(old, str):
            return Executed(
                "tokenizer-loads",
                f"{where}: with only `{key}` changed, AutoTokenizer builds {type(new).__name__} "
                f"(before: {old})",
                self.version,
            )
        vocab = any(f in before or f in changed for f in VOCABULARY_FILES)
        probes = _probes(old, new)
        a, b = _tokenizer_view(old, probes), _tokenizer_view(new, probes)
        return _tokenizer_verdict(a, b, where, self.version, vocab)

    # -- configs ------------------------------------------------------------------------------
    def _config_class(self, doc: Mapping[str, Any]) -> Any:
        auto_map = doc.get("auto_map")
        if isinstance(auto_map, Mapping) and "AutoConfig" in auto_map:
            return None  # the repo's own config class decides: never imported here
        mapping = self.tf.CONFIG_MAPPING
        model_type = doc.get("model_type")
        if not isinstance(model_type, str) or model_type not in mapping:
            return None
        return mapping[model_type]

    def _config(self, doc: Mapping[str, Any]) -> tuple[Any, str | None]:
        cls = self._config_class(doc)
        if cls is None:
            return None, None
        try:
            return cls.from_dict(copy.deepcopy(dict(doc))), None
        except Exception as exc:
            return None, f"{cls.__name__} refuses it ({type(exc).__name__}: {_line(exc)})"

    def _attrs(self, config: Any, dtype: str | None) -> dict[str, Any]:
        raw = config.to_dict()
        out = {k: v for k, v in raw.items() if k not in IGNORED_ATTRIBUTES}
        loaded = out.get("dtype")
        out["dtype"] = str(loaded).removeprefix("torch.") if loaded not in (None, "auto") else dtype
        window = out.get("sliding_window")
        limit = out.get("max_position_embeddings")
        if isinstance(window, int) and isinstance(limit, int) and window >= limit:
            out["sliding_window"] = None
        plain: dict[str, Any] = json.loads(json.dumps(out, default=str))
        return plain

    def _model_class(self, config: Any, doc: Mapping[str, Any]) -> tuple[Any, str]:
        arch = doc.get("architectures")
        name = arch[0] if isinstance(arch, list) and arch and isinstance(arch[0], str) else None
        if name is not None:
            klass = getattr(self.tf, name, None) if name.isidentifier() else None
            config_class = getattr(klass, "config_class", None)
            if klass is None or not isinstance(config_class, type):
                return None, f"`{name}` is not a class transformers {self.version} defines"
            if not isinstance(config, config_class):
                return None, f"`{name}` takes {config_class.__name__}, not {type(config).__name__}"
            return klass, name
        for auto in (self.tf.AutoModelForCausalLM, self.tf.AutoModel):
            if type(config) in auto._model_mapping:
                klass = auto._model_mapping[type(config)]
                return klass, f"{klass.__name__} (via {auto.__name__})"
        return None, f"no transformers {self.version} model class takes {type(config).__name__}"

    def _build(self, doc: Mapping[str, Any], dtype: str | None) -> _Built | str | None:
        config, why = self._config(doc)
        if config is None:
            return why
        attrs = self._attrs(config, dtype)
        klass, name = self._model_class(config, doc)
        key = _digest([type(config).__name__, name, attrs])
        raw = json.loads(json.dumps(config.to_dict(), default=str))
        if key in self._built:  # the same model; the values as written may differ
            return dataclasses.replace(self._built[key], raw=raw)
        tree: tuple[tuple[str, ...], ...] | None = None
        params, error = 0, None
        reads: Mapping[str, tuple[str, ...]] = {}
        if klass is None:
            error = name
        else:
            try:
                tree, params, reads = self._tree(klass, config)
            except _Overrun:
                return None
            except Exception as exc:
                error = f"{name} cannot be built from it ({type(exc).__name__}: {_line(exc)})"
        built = _Built(type(config).__name__, attrs, name, tree, params, reads, raw, error)
        if len(self._built) >= CACHE_SIZE:
            self._built.pop(next(iter(self._built)))
        self._built[key] = built
        return built

    def _tree(
        self, klass: Any, config: Any
    ) -> tuple[tuple[tuple[str, ...], ...], int, Mapping[str, tuple[str, ...]]]:
        from transformers.initialization import no_init_weights

        torch = self.torch
        self.builds += 1
        with _time_limit(BUILD_LIMIT_S), torch.device("meta"), no_init_weights():
            model = klass._from_config(copy.deepcopy(config), dtype=torch.float32)
        limit = getattr(config, "max_position_embeddings", None)
        rows: list[tuple[str, ...]] = []
        classes: set[type] = set()
        owners: dict[int, str] = {}
        params = 0
        for name, module in model.named_modules():
            kind = type(module).__name__
            classes.add(type(module))
            repr_ = "" if isinstance(module, torch.nn.Dropout) else module.extra_repr()
            rows.append((name, kind, repr_))
            for pname, p in module.named_parameters(recurse=False):
                full = f"{name}.{pname}" if name else pname
                if id(p) in owners:
                    rows.append((full, "tied", owners[id(p)]))
                    continue
                owners[id(p)] = full
                params += p.numel()
                rows.append((full, "parameter", str(tuple(p.shape))))
            for bname, b in module.named_buffers(recurse=False):
                if b is not None:
                    rows.append((f"{name}.{bname}", "buffer", str(tuple(b.shape))))
            if isinstance(module, torch.nn.Dropout):
                continue
            static_rope = not any(
                t in str(getattr(module, "rope_type", "")) for t in ("dynamic", "longrope")
            )
            for attr, value in sorted(vars(module).items()):
                if attr.startswith("_") or attr in _UNUSED_ATTRIBUTES or not _plain(value):
                    continue
                if attr in _ROPE_CACHE_ATTRIBUTES and static_rope:
                    continue  # only dynamic and long rope read them (`dynamic_rope_update`)
                if attr == "sliding_window" and isinstance(value, int) and isinstance(limit, int):
                    value = None if value >= limit else value
                rows.append((f"{name}.{attr}" if name else attr, "attribute", show(value, 200)))
        return tuple(rows), params, self._reads(classes)

    def _reads(self, classes: set[type]) -> Mapping[str, tuple[str, ...]]:
        """Config attribute → the transformers code that reads it: the source of every class
        of the tree (and its transformers bases, but not `PreTrainedModel`'s generic loading
        code), and the shared masking and rotary modules."""
        found: dict[str, set[str]] = {}
        sources: list[tuple[str, Any]] = [(m, None) for m in _SHARED_MODULES]
        for cls in classes:
            for klass in cls.__mro__:
                where = getattr(klass, "__module__", "")
                if where.startswith("transformers.") and where not in _GENERIC_MODULES:
                    sources.append((f"{where}.{klass.__qualname__}", klass))
        for name, klass in sorted(sources, key=lambda x: x[0]):
            if name not in self._sources:
                try:
                    obj = klass if klass is not None else importlib.import_module(name)
                    text = inspect.getsource(obj)
                except (OSError, TypeError, ImportError):
                    text = ""
                self._sources[name] = frozenset(a or b for a, b in _READ.findall(text))
            reader = name.rsplit(".", 1)[-1] if klass is not None else name
            for attr in self._sources[name]:
                found.setdefault(attr, set()).add(reader)
        return {k: tuple(sorted(v)) for k, v in found.items()}

    def _config_effect(
        self,
        before: Mapping[str, Any],
        changed: Mapping[str, Any],
        key: str,
        dtypes: tuple[str | None, str | None],
    ) -> Executed | None:
        old = self._build(before, dtypes[0])
        if not isinstance(old, _Built):
            return None  # not executable, or the previous config itself cannot be read
        new = self._build(changed, dtypes[1])
        if new is None:
            return None
        where = f"checked with transformers {self.version}"
        if isinstance(new, str):
            return Executed("model", f"{where}: with only `{key}` changed, {new}", self.version)
        if old.error is not None or new.error is not None:
            if old.error == new.error and old.attrs == new.attrs:
                return Executed(
                    "same",
                    f"{where}: {new.cls} gives the same effective attributes with and without "
                    f"this change (the model is not built at either side: {new.error})",
                    self.version,
                )
            if old.error is not None and new.error is not None:
                return None  # neither side builds: nothing to compare the effect on
            why = new.error or f"{new.model} can now be built (before: {old.error})"
            return Executed("model", f"{where}: with only `{key}` changed, {why}", self.version)
        differ = _differ(old.attrs, new.attrs)
        if old.tree != new.tree or old.model != new.model:
            return Executed(
                "model",
                f"{where}: {_tree_delta(old, new)}",
                self.version,
                differ,
                _tree_rows(old, new),
            )
        if not differ and key.rsplit(".", 1)[-1] in ("dtype", "torch_dtype") and new.attrs["dtype"]:
            return Executed(
                "same",
                f'{where}: from_pretrained (dtype="auto") loads the weights as '
                f"{new.attrs['dtype']} with and without this change (the config's dtype, else the "
                "checkpoint's)",
                self.version,
            )
        if not differ:
            return Executed(
                "same",
                f"{where}: {new.cls} gives the same effective attributes with and without this "
                "change, and the model built from them is the same",
                self.version,
            )
        shown = ", ".join(f"`{k}` {_shown(old, k)} → {_shown(new, k)}" for k in differ[:4])
        if "dtype" in differ:
            if old.attrs.get("dtype") is None or new.attrs.get("dtype") is None:
                return None  # the checkpoint's dtype, which the loader falls back to, is unknown
            return Executed(
                "model",
                f'{where}: from_pretrained (dtype="auto") loads the weights as '
                f"{old.attrs['dtype']} → {new.attrs['dtype']} "
                "(the config's dtype, else the checkpoint's)",
                self.version,
                differ,
            )
        read = [k for k in differ if k.rsplit(".", 1)[-1] in new.reads]
        if read and set(read) <= _POSITION_LIMITS:
            return Executed(
                "limit",
                f"{where}: {shown}; the model built is the same and its code reads it only as a "
                f"limit ({', '.join(new.reads[read[0]])}): outputs within both limits are the same",
                self.version,
                differ,
            )
        if read:
            readers = "; ".join(
                f"`{k}` by {', '.join(new.reads[k.rsplit('.', 1)[-1]][:3])}" for k in read[:4]
            )
            return Executed(
                "model",
                f"{where}: the model's structure is the same, but its code reads {readers} when "
                f"it runs ({shown}): a different computation",
                self.version,
                differ,
                tuple(f"`{k}` by {', '.join(new.reads[k.rsplit('.', 1)[-1]][:3])}" for k in read),
            )
        return Executed(
            "unread",
            f"{where}: {shown} in {new.cls}, but no attribute the model reads changed "
            f"(the structure of {new.model} is the same and its code reads none of them)",
            self.version,
            differ,
        )

    # -- generation ---------------------------------------------------------------------------
    def _generation(
        self, config: Mapping[str, Any], generation: Mapping[str, Any] | None
    ) -> dict[str, Any] | None:
        gen_cls = self.tf.GenerationConfig
        try:
            if generation is not None:
                made = gen_cls.from_dict(copy.deepcopy(dict(generation)))
            else:  # what `from_pretrained` does without the file: config.json's own keys (the
                # config class drops them), then those of its decoder/generator/text_config
                made = gen_cls.from_model_config(copy.deepcopy(dict(config)))
            raw = made.to_dict()
        except Exception:
            return None
        # an unset field is the global default generate() applies to it
        for name, default in gen_cls._get_default_generation_params().items():
            if raw.get(name) is None:
                raw[name] = default
        drop = {"transformers_version", "_from_model_config", "_original_object_hash"}
        plain: dict[str, Any] = json.loads(
            json.dumps({k: v for k, v in raw.items() if k not in drop}, default=str)
        )
        return plain

    def _generation_verdict(
        self, old: Mapping[str, Any], new: Mapping[str, Any], key: str, from_file: bool
    ) -> Executed:
        where = f"checked with transformers {self.version}"
        source = (
            "generation_config.json" if from_file else "config.json (no generation_config.json)"
        )
        differ = sorted(
            k for k in set(old) | set(new) if old.get(k, _ABSENT) != new.get(k, _ABSENT)
        )
        m_old, m_new = _mode(old), _mode(new)
        effective = [
            k for k in differ
            if not (k in SAMPLING_FIELDS and not old.get("do_sample") and not new.get("do_sample"))
        ]  # fmt: skip
        if not effective:
            unused = f" ({', '.join(f'`{k}`' for k in differ)} unused by {m_new} decoding)"
            return Executed(
                "generation-same",
                f"{where}: the effective GenerationConfig (from {source}) is the same"
                + (unused if differ else ""),
                self.version,
            )
        shown = ", ".join(f"`{k}` {_val(old, k)} → {_val(new, k)}" for k in effective[:5])
        mode = f"{m_old} → {m_new}" if m_old != m_new else f"{m_new} as before"
        kind = "generation-ids" if TOKEN_ID_FIELDS & set(effective) else "generation"
        return Executed(
            kind,
            f"{where}: generate() defaults change ({mode}; {shown}), from {source}",
            self.version,
            effective,
        )


_ABSENT = object()


def _probes(*tokenizers: Any) -> tuple[str, ...]:
    """The fixed texts, then a sentence around each special token either tokenizer has."""
    special: set[str] = set()
    for tok in tokenizers:
        special.update(str(t) for t in tok.all_special_tokens)
    return (*TOKENIZER_TEXTS, *(f"Hi {t} there" for t in sorted(special)))


def _tokenizer_view(tok: Any, probes: Sequence[str]) -> dict[str, Any]:
    """What users meet of a tokenizer (plain values): its named special tokens and their ids,
    the other special tokens, the added tokens, its settings, the ids `probes` encode to (and
    the fixed texts' decoded ids) and the chat template's rendered canonical conversation."""
    view: dict[str, Any] = {"class": type(tok).__name__}
    for role in _ROLES:
        token = getattr(tok, f"{role}_token", None)
        view[f"{role}_token"] = None if token is None else str(token)
        view[f"{role}_token_id"] = getattr(tok, f"{role}_token_id", None) if token else None
    named = {view[f"{r}_token"] for r in _ROLES}
    view["other_special_tokens"] = sorted(str(t) for t in tok.all_special_tokens if t not in named)
    view["added_tokens"] = {
        str(i): [str(t.content), bool(t.special)]
        for i, t in sorted(tok.added_tokens_decoder.items())
    }
    view["size"] = len(tok)
    for setting in _SETTINGS[:-1]:
        value = getattr(tok, setting, None)
        view[setting] = value if _plain(value) else str(value)
    texts: dict[str, list[int]] = {}
    for text in probes:
        try:
            texts[text] = [int(i) for i in tok(text)["input_ids"]]
        except Exception as exc:
            texts[text] = [f"{type(exc).__name__}: {_line(exc)}"]  # type: ignore[list-item]
    view["texts"] = texts
    view["decoded"] = {
        t: tok.decode(texts[t]) if all(isinstance(i, int) for i in texts[t]) else None
        for t in TOKENIZER_TEXTS
    }
    view["chat"] = _chat(tok)
    plain: dict[str, Any] = json.loads(json.dumps(view, default=str))
    return plain


def _chat(tok: Any) -> Any:
    """The canonical conversation as the tokenizer's chat template renders and encodes it."""
    if not getattr(tok, "chat_template", None):
        return None
    conv = next(c for c in CONVERSATIONS if c.id == CHAT_CONVERSATION)
    messages = [dict(m) for m in conv.messages]
    try:
        text = tok.apply_chat_template(
            messages, add_generation_prompt=conv.add_generation_prompt, tokenize=False
        )
        ids = tok.apply_chat_template(
            messages, add_generation_prompt=conv.add_generation_prompt, tokenize=True
        )
    except Exception as exc:
        return f"does not render ({type(exc).__name__}: {_line(exc)})"
    if isinstance(ids, Mapping):
        ids = ids["input_ids"]
    return {"text": str(text), "ids": [int(i) for i in ids]}


def _ordinary(view: Mapping[str, Any], ids: Sequence[Any]) -> list[Any]:
    special = {view[f"{r}_token_id"] for r in _ROLES} | {
        int(i) for i, (_, is_special) in view["added_tokens"].items() if is_special
    }
    return [i for i in ids if i not in special]


def _limit(value: object) -> str:
    """A setting's value; transformers' "no limit" length (int(1e30)) in words."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 10**29:
        return "unlimited (1e30)"
    return show(value, 40)


def _token(view: Mapping[str, Any], role: str, vocab: bool) -> str:
    token = view[f"{role}_token"]
    if token is None:
        return "none"
    return show(token, 40) + (f" ({view[f'{role}_token_id']})" if vocab else "")


def _tokenizer_verdict(
    old: Mapping[str, Any], new: Mapping[str, Any], where: str, version: str, vocab: bool
) -> Executed:
    texts = [t for t in TOKENIZER_TEXTS if old["texts"][t] != new["texts"][t]]
    ordinary = [
        t for t in texts if _ordinary(old, old["texts"][t]) != _ordinary(new, new["texts"][t])
    ]
    parts: list[str] = []
    for role in _ROLES:
        if (old[f"{role}_token"], old[f"{role}_token_id"]) != (
            new[f"{role}_token"],
            new[f"{role}_token_id"],
        ):
            parts.append(f"{role} token {_token(old, role, vocab)} → {_token(new, role, vocab)}")
    if old["other_special_tokens"] != new["other_special_tokens"]:
        gone = sorted(set(old["other_special_tokens"]) - set(new["other_special_tokens"]))
        came = sorted(set(new["other_special_tokens"]) - set(old["other_special_tokens"]))
        parts.append(
            "other special tokens"
            + (f" lose {show(gone, 60)}" if gone else "")
            + (f" gain {show(came, 60)}" if came else "")
        )
    if old["added_tokens"] != new["added_tokens"]:
        moved = [
            i for i in sorted(set(old["added_tokens"]) | set(new["added_tokens"]), key=int)
            if old["added_tokens"].get(i) != new["added_tokens"].get(i)
        ]  # fmt: skip
        parts.append(
            "added tokens differ at "
            + ", ".join(
                f"{i}: {show(old['added_tokens'].get(i), 40)} → "
                f"{show(new['added_tokens'].get(i), 40)}"
                for i in moved[:2]
            )
            + (f" (+{len(moved) - 2} more)" if len(moved) > 2 else "")
        )
    if old["size"] != new["size"]:
        parts.append(f"len(tokenizer) {old['size']} → {new['size']}")
    if texts:
        parts.append(
            f"{show(texts[0], 30)} encodes to {show(old['texts'][texts[0]], 40)} → "
            f"{show(new['texts'][texts[0]], 40)}"
            + (f" (and {len(texts) - 1} more of the {len(TOKENIZER_TEXTS)} fixed texts)"
               if len(texts) > 1 else "")
        )  # fmt: skip
    inside = [
        t
        for t in old["texts"]
        if t not in TOKENIZER_TEXTS and old["texts"][t] != new["texts"].get(t)
    ]
    if inside:
        parts.append(
            f"{show(inside[0], 40)} encodes to {show(old['texts'][inside[0]], 40)} → "
            f"{show(new['texts'][inside[0]], 40)}"
            + (f" (+{len(inside) - 1} more such sentences)" if len(inside) > 1 else "")
        )
    if old["chat"] != new["chat"]:
        parts.append(f"the chat template's rendered {CHAT_CONVERSATION} conversation differs")
    special = bool(parts)
    settings = [
        f"{s} {_limit(old[s])} → {_limit(new[s])}" for s in _SETTINGS[:-1] if old[s] != new[s]
    ]
    if old["decoded"] != new["decoded"]:
        t = next(x for x in TOKENIZER_TEXTS if old["decoded"][x] != new["decoded"][x])
        settings.append(
            f"the ids of {show(t, 30)} decode to {show(old['decoded'][t], 40)} → "
            f"{show(new['decoded'][t], 40)}"
        )
    note = (
        ""
        if vocab
        else " (no vocabulary file among the tracked files: transformers builds the tokenizer "
        "around an empty vocabulary, so only special tokens have ids)"
    )
    cls = new["class"] if old["class"] == new["class"] else f"{old['class']} → {new['class']}"
    if not special and not settings:
        return Executed(
            "tokenizer-same",
            f"{where}: AutoTokenizer builds {cls}, and what it makes is the same with and without "
            "this change: special tokens "
            + ", ".join(f"{r} {_token(new, r, vocab)}" for r in _ROLES if new[f"{r}_token"])
            + f"; padding side {new['padding_side']}; model_max_length "
            f"{_limit(new['model_max_length'])}; {len(new['texts'])} texts encode to the same "
            f"ids{'; the chat template renders the same' if new['chat'] else ''}{note}",
            version,
        )
    kind = (
        "tokenizer-text" if ordinary else "tokenizer-special" if special else "tokenizer-settings"
    )
    shown = "; ".join((parts + settings)[:4])
    more = len(parts) + len(settings) - 4
    return Executed(
        kind,
        f"{where}: AutoTokenizer builds {cls}: {shown}"
        + (f" (+{more} more)" if more > 0 else "")
        + note,
        version,
        tuple(dict.fromkeys(s.split(" ", 1)[0] for s in settings)),
    )


def _val(attrs: Mapping[str, Any], key: str) -> str:
    value = _get(attrs, key)
    return "(unset)" if value is _ABSENT else show(value, 40)


def _differ(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The attributes that differ; inside a sub-config (a dict on both sides), its own keys."""
    out: list[str] = []
    for k in sorted(set(old) | set(new)):
        a, b = old.get(k, _ABSENT), new.get(k, _ABSENT)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict) and k != "rope_parameters":
            out += [f"{k}.{sub}" for sub in _differ(a, b)]
        else:
            out.append(k)
    return out


def _get(attrs: Mapping[str, Any], key: str) -> object:
    node: object = attrs
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _ABSENT
        node = node[part]
    return node


def _shown(built: _Built, key: str) -> str:
    """An effective attribute, with the value it was written as where transformers' code makes
    them differ (a sliding window at least the context long is no window)."""
    value = _val(built.attrs, key)
    raw = _val(built.raw, key)
    if key == "sliding_window" and raw != value:
        return f"{raw} (no window: ≥ max_position_embeddings)"
    return value


def _mode(gen: Mapping[str, Any]) -> str:
    beams = gen.get("num_beams") or 1
    if gen.get("do_sample"):
        return "sampling" + (f" with {beams} beams" if beams > 1 else "")
    return f"beam search ({beams} beams)" if beams > 1 else "greedy"


def _line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:160] if text else type(exc).__name__


def _pattern(name: str) -> str:
    return _DIGITS.sub(".*", name)


def _tree_delta(old: _Built, new: _Built) -> str:
    """What differs between two module trees, in words (counts first, then the first differing
    rows with layer indices folded)."""
    parts: list[str] = []
    if old.model != new.model:
        parts.append(f"model class {old.model} → {new.model}")
    if old.params != new.params:
        parts.append(f"parameters {_count(old.params)} → {_count(new.params)}")
    a, b = old.tree or (), new.tree or ()
    if len([r for r in a if r[1] != "parameter"]) != len([r for r in b if r[1] != "parameter"]):
        mods = sum(1 for r in a if r[1] not in {"parameter", "buffer", "tied", "attribute"})
        mods2 = sum(1 for r in b if r[1] not in {"parameter", "buffer", "tied", "attribute"})
        if mods != mods2:
            parts.append(f"modules {mods} → {mods2}")
    ra, rb = dict(((r[0], r[1]), r[2]) for r in a), dict(((r[0], r[1]), r[2]) for r in b)
    seen: dict[str, None] = {}
    for (name, kind), value in ra.items():
        other = rb.get((name, kind))
        if other is not None and other != value:
            seen.setdefault(f"{_pattern(name)}: {value} → {other}", None)
    kinds_a = {r[0]: r[1] for r in a if r[1] not in {"parameter", "buffer", "tied", "attribute"}}
    kinds_b = {r[0]: r[1] for r in b if r[1] not in {"parameter", "buffer", "tied", "attribute"}}
    for name, kind in kinds_a.items():
        if name in kinds_b and kinds_b[name] != kind:
            seen.setdefault(f"{_pattern(name) or 'model'}: {kind} → {kinds_b[name]}", None)
    tied_a = {r[0] for r in a if r[1] == "tied"}
    tied_b = {r[0] for r in b if r[1] == "tied"}
    if tied_a != tied_b:
        seen.setdefault(
            f"tied parameters {sorted(tied_a) or 'none'} → {sorted(tied_b) or 'none'}", None
        )
    rows = list(seen)[:3]
    more = f" (+{len(seen) - 3} more)" if len(seen) > 3 else ""
    if rows:
        parts.append("; ".join(rows) + more)
    return "the model built on the meta device differs: " + (
        ", ".join(parts) if parts else "its module tree"
    )


def _tree_rows(old: _Built, new: _Built) -> tuple[str, ...]:
    """The attributes, parameters and buffers of the model built that differ between two trees
    (layer indices folded; `model.embed_tokens.padding_idx: 0 → null`, `lm_head.weight: absent →
    (32000, 4096)`), else the modules whose `extra_repr` differs."""
    leaf = {"attribute", "parameter", "buffer", "tied"}
    rows: dict[str, None] = {}
    modules: dict[str, None] = {}
    ra = {(r[0], r[1]): r[2] for r in old.tree or ()}
    rb = {(r[0], r[1]): r[2] for r in new.tree or ()}
    for name, kind in sorted(set(ra) | set(rb)):
        a, b = ra.get((name, kind), "absent"), rb.get((name, kind), "absent")
        if a != b:
            target = rows if kind in leaf else modules
            target.setdefault(f"{_pattern(name) or 'model'}: {a} → {b}", None)
    return tuple(rows or modules)


def _count(n: int) -> str:
    if n >= 1_000_000_000:
        return f"{n / 1e9:.2f}B"
    if n >= 1_000_000:
        return f"{n / 1e6:.1f}M"
    return f"{n:,}"


def changed_keys(differ: Sequence[str]) -> str:
    return ", ".join(f"`{k}`" for k in differ)
