"""The default rules table (data, in order; first match wins) and the match/rule values it is made of.

Pure: imports only the domain. `classify` applies it, after a repo's watchlist overrides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase

from tracker.domain import Artifact, Change, ChangeKind, Severity

SEVERITY_RANK: Mapping[Severity, int] = {
    Severity.CRITICAL: 4,
    Severity.HIGH: 3,
    Severity.MODERATE: 2,
    Severity.LOW: 1,
}


@dataclass(frozen=True)
class Match:
    """What a rule or suppression matches; None matches anything, globs use fnmatch (case-sensitive)."""

    artifact: frozenset[Artifact] | None = None
    kind: frozenset[ChangeKind] | None = None
    key: str | None = None
    file: str | None = None

    def matches(self, change: Change) -> bool:
        if self.artifact is not None and change.artifact not in self.artifact:
            return False
        if self.kind is not None and change.kind not in self.kind:
            return False
        if self.key is not None and not fnmatchcase(change.key, self.key):
            return False
        return self.file is None or fnmatchcase(change.file, self.file)


@dataclass(frozen=True)
class Rule:
    """One row of the rules table: changes matching `match` get `severity` for `rationale`."""

    name: str
    match: Match
    severity: Severity
    rationale: str


def _m(
    artifact: Artifact | tuple[Artifact, ...] | None = None,
    kind: ChangeKind | tuple[ChangeKind, ...] | None = None,
    key: str | None = None,
    file: str | None = None,
) -> Match:
    arts = (artifact,) if isinstance(artifact, Artifact) else artifact
    kinds = (kind,) if isinstance(kind, ChangeKind) else kind
    return Match(
        artifact=frozenset(arts) if arts is not None else None,
        kind=frozenset(kinds) if kinds is not None else None,
        key=key,
        file=file,
    )


A, K, S = Artifact, ChangeKind, Severity
_IDS = ("eos_token_id", "bos_token_id", "pad_token_id", "eos_token", "bos_token", "pad_token")
_ARCH_KEYS = (
    "architectures",
    "model_type",
    "hidden_size",
    "intermediate_size",
    "moe_intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "d_model",
    "n_embd",
    "n_layer",
    "n_head",
    "num_experts",
    "num_local_experts",
    "n_routed_experts",
)
_DTYPE_KEYS = ("torch_dtype", "dtype", "quantization_config")
_POSITION_KEYS = ("rope_scaling", "rope_theta", "rope_parameters", "max_position_embeddings")


def _keys(names: tuple[str, ...], *, children: bool = False) -> tuple[str, ...]:
    """Glob patterns for `names` at top level and nested (`text_config.hidden_size`)."""
    out: list[str] = []
    for n in names:
        out += [n, f"*.{n}"]
        if children:
            out += [f"{n}.*", f"*.{n}.*"]
    return tuple(out)


def _rules(
    prefix: str,
    arts: Artifact | tuple[Artifact, ...],
    keys: tuple[str, ...],
    sev: Severity,
    why: str,
) -> tuple[Rule, ...]:
    return tuple(Rule(f"{prefix}:{k}", _m(arts, key=k), sev, why) for k in keys)


_UNREADABLE_WHY = (
    "tracker could not read the file at this revision, so none of its checks ran; treated as high "
    "(not critical: nothing is known to have changed, but nothing can be ruled out either)"
)

DEFAULT_RULES: tuple[Rule, ...] = (
    Rule(
        "custom-code-removed",
        _m(A.CUSTOM_CODE, K.REMOVED),
        S.MODERATE,
        "custom code removed: loading with trust_remote_code now fails or falls back to built-in classes",
    ),
    Rule(
        "custom-code",
        _m(A.CUSTOM_CODE),
        S.CRITICAL,
        "custom code added or changed: it runs on your machine under trust_remote_code",
    ),
    Rule(
        "pickle-removed",
        _m(A.EXECUTABLE, K.REMOVED),
        S.LOW,
        "a pickle-based file was removed: nothing new runs at load time",
    ),
    Rule(
        "pickle",
        _m(A.EXECUTABLE),
        S.CRITICAL,
        "a pickle-based weight file was added or changed: unpickling it runs code when loaded",
    ),
    Rule("unreadable", _m(kind=K.UNREADABLE), S.HIGH, _UNREADABLE_WHY),
    *_rules(
        "vocabulary",
        A.TOKENIZER,
        (
            "vocab",
            "vocab.*",
            "vocab_size",
            "merges",
            "merges.*",
            "added_tokens*",
            "model.vocab*",
            "model_type",
        ),
        S.CRITICAL,
        "vocabulary or token ids changed: the same text encodes to different ids than the weights expect",
    ),
    *_rules(
        "vocabulary",
        (A.CONFIG, A.SPECIAL_TOKENS),
        (*_keys(("vocab_size",)), "added_tokens*", "added_tokens_decoder*"),
        S.CRITICAL,
        "vocabulary or token ids changed: the same text encodes to different ids than the weights expect",
    ),
    Rule(
        "tensor-shapes",
        _m(A.WEIGHTS, (K.RESHAPED, K.ADDED, K.REMOVED)),
        S.CRITICAL,
        "tensor shapes or the set of tensors changed: code and checkpoints built for the old "
        "layout break, and missing tensors are silently re-initialised on load",
    ),
    Rule(
        "weight-values",
        _m(A.WEIGHTS, K.CHANGED, key="content"),
        S.HIGH,
        "shard files have new content with the same tensors: the weights (and the model's outputs) "
        "changed without any config change",
    ),
    Rule(
        "weight-dtype",
        _m(A.WEIGHTS, K.RETYPED),
        S.HIGH,
        "weight dtype changed: numerics, memory and kernels differ",
    ),
    *_rules(
        "weight-dtype",
        A.WEIGHTS,
        ("dtypes",),
        S.HIGH,
        "weight dtype changed: numerics, memory and kernels differ",
    ),
    Rule(
        "chat-template-removed",
        _m(A.CHAT_TEMPLATE, K.REMOVED),
        S.HIGH,
        "a chat template was removed: prompts that used it are now built differently",
    ),
    Rule(
        "chat-template-rendered",
        _m(A.CHAT_TEMPLATE, (K.RENDERED, K.BROKEN)),
        S.HIGH,
        "the chat template renders conversations differently (or no longer renders): prompts the "
        "model sees change",
    ),
    *_rules(
        "special-token-ids",
        (A.SPECIAL_TOKENS, A.CONFIG, A.GENERATION_CONFIG, A.TOKENIZER),
        _keys(_IDS),
        S.HIGH,
        "eos/bos/pad token changed: generation stops, starts or pads differently",
    ),
    *_rules(
        "special-token-insertion",
        (A.TOKENIZER, A.SPECIAL_TOKENS),
        ("add_bos_token", "add_eos_token"),
        S.HIGH,
        "automatic bos/eos insertion changed: every encoded prompt gets different ids",
    ),
    *_rules(
        "architecture",
        A.CONFIG,
        _keys(_ARCH_KEYS),
        S.HIGH,
        "architecture or hidden sizes changed: the model built from this config is a different model",
    ),
    *_rules(
        "weight-dtype",
        A.CONFIG,
        _keys(_DTYPE_KEYS, children=True),
        S.HIGH,
        "weight dtype changed: numerics, memory and kernels differ",
    ),
    *_rules(
        "license",
        A.MODEL_CARD,
        ("license", "license_name", "license_link", "license.*", "extra_gated*"),
        S.HIGH,
        "license or access terms changed: your right to use the model may have changed",
    ),
    Rule(
        "card-fit-lost",
        _m(A.ESTIMATE, K.FIT_LOST),
        S.HIGH,
        "a card no longer fits this setup in the estimate: deployments sized for it will run out of memory",
    ),
    *_rules(
        "position-limits",
        A.CONFIG,
        _keys(_POSITION_KEYS, children=True) + _keys(("sliding_window",)),
        S.MODERATE,
        "rope scaling or maximum positions changed: long-context behaviour changes",
    ),
    *_rules(
        "bookkeeping",
        (A.CONFIG, A.GENERATION_CONFIG, A.TOKENIZER, A.PROCESSOR),
        (
            "transformers_version",
            "_from_model_config",
            "_name_or_path",
            "name_or_path",
            "_commit_hash",
        ),
        S.LOW,
        "bookkeeping field written by the saving library: no effect on loading or outputs",
    ),
    Rule(
        "generation-defaults",
        _m(A.GENERATION_CONFIG),
        S.MODERATE,
        "generation defaults changed: sampling output differs unless you pin your own settings",
    ),
    Rule(
        "tokenizer-pipeline",
        _m(A.TOKENIZER, key="normalizer*"),
        S.HIGH,
        "tokenization pipeline changed: the same text may encode to different ids",
    ),
    *_rules(
        "tokenizer-pipeline",
        A.TOKENIZER,
        ("pre_tokenizer*", "post_processor*", "decoder*", "model.*", "model"),
        S.HIGH,
        "tokenization pipeline changed: the same text may encode to different ids",
    ),
    Rule(
        "parameter-count",
        _m(A.ESTIMATE, key="params.*"),
        S.MODERATE,
        "the estimated parameter count changed",
    ),
    Rule(
        "processor",
        _m(A.PROCESSOR),
        S.MODERATE,
        "input preprocessing changed: the same inputs reach the model differently",
    ),
    Rule(
        "broken",
        _m(kind=K.BROKEN),
        S.HIGH,
        "a file that parsed before no longer does: loading it fails",
    ),
    Rule("metadata", Match(), S.LOW, "other metadata changed"),
)
