"""Classify changes into severities by a rules table (first match wins), with per-repo overrides and suppressions.

Pure: takes `Change` values and the repo's `advisories:` mapping from watchlist.yaml, returns values.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from tracker.domain import Artifact, Change, ChangeKind, JSONValue, Severity
from tracker.errors import ConfigError

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


@dataclass(frozen=True)
class Suppression:
    """Changes matching `match` are recorded with `reason` but never published."""

    match: Match
    reason: str


@dataclass(frozen=True)
class Overrides:
    """A repo's validated `advisories:` settings: rules tried before the defaults, then suppressions."""

    rules: tuple[Rule, ...] = ()
    suppress: tuple[Suppression, ...] = ()


@dataclass(frozen=True)
class Classified:
    """A change with its severity, the rule that decided it and, if suppressed, why."""

    change: Change
    severity: Severity
    rule: str
    rationale: str
    suppressed: str | None = None


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
        ("vocab", "vocab.*", "vocab_size", "merges", "merges.*", "added_tokens*", "model.vocab*"),
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


def classify(change: Change, overrides: Overrides = Overrides()) -> Classified:
    """Return `change` classified by the first matching override rule, else default rule.

    The defaults end with a catch-all, so every change gets a severity. A suppression (first
    matching) sets `suppressed` to its reason; the severity is still the one the rules give.
    """
    for rule in (*overrides.rules, *DEFAULT_RULES):
        if rule.match.matches(change):
            break
    else:  # pragma: no cover - DEFAULT_RULES ends with a catch-all
        raise AssertionError("no rule matched")
    reason = next((s.reason for s in overrides.suppress if s.match.matches(change)), None)
    return Classified(change, rule.severity, rule.name, rule.rationale, reason)


def highest(severities: Sequence[Severity]) -> Severity:
    """The most severe of a non-empty sequence of severities."""
    return max(severities, key=lambda s: SEVERITY_RANK[s])


_MATCH_KEYS = ("artifact", "kind", "key", "file")
_RULE_KEYS = ("match", "severity", "rationale", "name")
_SUPPRESS_KEYS = ("match", "reason")
_TOP_KEYS = ("rules", "suppress")


def _unknown(
    where: str, given: Mapping[str, JSONValue], known: Sequence[str], problems: list[str]
) -> None:
    for k in given:
        if k not in known:
            near = difflib.get_close_matches(str(k), known, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            problems.append(f"{where}: unknown key {k!r}{hint}; expected one of {', '.join(known)}")


def _enum_set(
    where: str, value: JSONValue, enum: type[Artifact] | type[ChangeKind], problems: list[str]
) -> frozenset:  # type: ignore[type-arg]
    values = value if isinstance(value, list) else [value]
    out = []
    for v in values:
        try:
            out.append(enum(v))
        except ValueError:
            known = [e.value for e in enum]
            near = difflib.get_close_matches(str(v), known, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            problems.append(f"{where}: {v!r} is not one of {', '.join(known)}{hint}")
    return frozenset(out)


def _parse_match(where: str, raw: JSONValue, problems: list[str]) -> Match:
    if not isinstance(raw, Mapping) or not raw:
        problems.append(
            f"{where}: must be a non-empty mapping with any of {', '.join(_MATCH_KEYS)}"
        )
        return Match()
    _unknown(where, raw, _MATCH_KEYS, problems)
    for g in ("key", "file"):
        if g in raw and not isinstance(raw[g], str):
            problems.append(f"{where}.{g}: must be a glob string, got {type(raw[g]).__name__}")
    return Match(
        artifact=_enum_set(f"{where}.artifact", raw["artifact"], Artifact, problems)
        if "artifact" in raw
        else None,
        kind=_enum_set(f"{where}.kind", raw["kind"], ChangeKind, problems)
        if "kind" in raw
        else None,
        key=raw["key"] if isinstance(raw.get("key"), str) else None,
        file=raw["file"] if isinstance(raw.get("file"), str) else None,
    )


def parse_overrides(raw: Mapping[str, JSONValue] | None, *, where: str = "advisories") -> Overrides:
    """Validate a repo's `advisories:` mapping into Overrides; raise ConfigError listing every problem.

    Shape: `{rules: [{match: {artifact, kind, key, file}, severity, rationale?, name?}],
    suppress: [{match: {...}, reason}]}`; `artifact`/`kind` may be a value or a list of values,
    `key`/`file` are fnmatch globs. None or `{}` means no overrides.
    """
    if raw is None:
        return Overrides()
    problems: list[str] = []
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: invalid", (f"{where}: must be a mapping",))
    _unknown(where, raw, _TOP_KEYS, problems)
    rules: list[Rule] = []
    suppress: list[Suppression] = []
    raw_rules = raw.get("rules") or []
    if not isinstance(raw_rules, list):
        problems.append(f"{where}.rules: must be a list")
        raw_rules = []
    for i, item in enumerate(raw_rules):
        at = f"{where}.rules[{i}]"
        if not isinstance(item, Mapping):
            problems.append(f"{at}: must be a mapping")
            continue
        _unknown(at, item, _RULE_KEYS, problems)
        match = _parse_match(f"{at}.match", item.get("match"), problems)
        sev_raw = item.get("severity")
        try:
            severity = Severity(str(sev_raw))
        except ValueError:
            problems.append(
                f"{at}.severity: {sev_raw!r} is not one of {', '.join(s.value for s in Severity)}"
            )
            severity = Severity.LOW
        rationale = item.get("rationale", "severity set by the watchlist")
        if not isinstance(rationale, str):
            problems.append(f"{at}.rationale: must be a string")
            rationale = ""
        name = item.get("name", f"watchlist-rule-{i}")
        rules.append(Rule(str(name), match, severity, rationale))
    raw_sup = raw.get("suppress") or []
    if not isinstance(raw_sup, list):
        problems.append(f"{where}.suppress: must be a list")
        raw_sup = []
    for i, item in enumerate(raw_sup):
        at = f"{where}.suppress[{i}]"
        if not isinstance(item, Mapping):
            problems.append(f"{at}: must be a mapping")
            continue
        _unknown(at, item, _SUPPRESS_KEYS, problems)
        match = _parse_match(f"{at}.match", item.get("match"), problems)
        reason = item.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            problems.append(
                f"{at}.reason: a non-empty reason is required (suppressions are recorded)"
            )
            reason = ""
        suppress.append(Suppression(match, reason))
    if problems:
        raise ConfigError(f"{where}: invalid advisory overrides", tuple(problems))
    return Overrides(tuple(rules), tuple(suppress))
