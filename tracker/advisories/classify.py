"""Classify changes into severities by the rules table, with per-repo overrides and suppressions.

Pure: takes `Change` values, the revision's `Context` (both snapshots, for the effect checks) and
the repo's `advisories:` mapping from watchlist.yaml, returns values. The default table itself is
data in `tracker.advisories.rules`; transformers' knowledge is in `tracker.advisories.knowledge`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from typing import Annotated

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from tracker.advisories.effects import Context, Executed
from tracker.advisories.knowledge import Knowledge, load
from tracker.advisories.rules import DEFAULT_RULES, EXECUTED_PREFIX, SEVERITY_RANK, Match, Rule
from tracker.diff import INFERRED, MODEL_READS_CLAUSE
from tracker.shared.domain import Artifact, Change, ChangeKind, JSONValue, Severity
from tracker.shared.problems import validate

__all__ = [
    "DEFAULT_RULES",
    "SEVERITY_RANK",
    "Classified",
    "Context",
    "Match",
    "Overrides",
    "Rule",
    "Suppression",
    "classify",
    "highest",
    "key_names",
    "parse_overrides",
]


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
    unlisted_code: str | None = None
    """Why this repo's Hub lists trees without the repo's code files (the demo's replica), or
    None: then a code file `auto_map` names that the first ingested revision lacks is a finding
    (`consistency.introduced`); with a reason it is not (a deleted one still is)."""


EFFECT_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.json",
)
"""The files whose changes' effects transformers is run on (`tracker.advisories.execute`)."""


@dataclass(frozen=True)
class Classified:
    """A change with its severity, the rule that decided it and, if suppressed, why.

    `decided_by`: `transformers <version>` when the effect was measured by running it (an
    `executed-*` rule), `watchlist` for a repo's own rule, `inferred` otherwise (the rules table
    and the checked-in knowledge)."""

    change: Change
    severity: Severity
    rule: str
    rationale: str
    suppressed: str | None = None
    decided_by: str = "inferred"


def key_names(change: Change, knowledge: Knowledge | None = None) -> tuple[str, ...]:
    """The change's key under every name of its fact: itself first, then the aliases of its last
    part from transformers' attribute maps (`n_layer` → also `num_hidden_layers`, `num_layers`, …).

    Only config.json keys have aliases (config classes read them); other files' keys stand alone.
    """
    if not change.key or change.file != "config.json":
        return (change.key,)
    head, _, leaf = change.key.rpartition(".")
    others = sorted((knowledge or load()).names_of(leaf) - {leaf})
    return (change.key, *(f"{head}.{n}" if head else n for n in others))


def classify(
    change: Change, overrides: Overrides = Overrides(), context: Context | None = None
) -> Classified:
    """Return `change` classified by the first matching override rule, else default rule.

    A rule matches on the change's key under any of its names (`key_names`); a rule with an
    effect check applies only when the check finds evidence in `context` (the revision's two
    snapshots; None: only checks that need no snapshot can say yes), and the evidence is added
    to the rationale. The defaults end with a catch-all, so every change gets a severity. A
    suppression (first matching) sets `suppressed` to its reason; the severity is still the one
    the rules give.
    """
    knowledge = context.knowledge if context is not None else load()
    names = key_names(change, knowledge)
    evidence = ""
    for rule in (*overrides.rules, *DEFAULT_RULES):
        if not rule.match.matches(change, names):
            continue
        if rule.when is not None:
            found = rule.when(change, context)
            if found is None:
                continue
            evidence = found
        break
    else:  # pragma: no cover - DEFAULT_RULES ends with a catch-all
        raise AssertionError("no rule matched")
    own = rule not in DEFAULT_RULES  # a watchlist rule: the operator decided
    executed = rule.name.startswith(EXECUTED_PREFIX) and not own
    notes = [_alias_note(rule, names, knowledge), evidence]
    rationale = rule.rationale.replace("{key}", change.key or change.file)
    rationale = ": ".join([rationale, *(n for n in notes if n)])
    if (
        not executed
        and not own
        and change.file in EFFECT_FILES
        and change.artifact is not Artifact.CHAT_TEMPLATE  # rendered, not inferred
    ):
        unrun = context.executed(change) if context is not None else None
        why = f": {unrun.evidence}" if unrun is not None and unrun.kind == "unexecuted" else ""
        rationale = f"inferred (transformers {knowledge.version} not run on it{why}): {rationale}"
    reason = next((s.reason for s in overrides.suppress if s.match.matches(change, names)), None)
    measured = context.executed(change) if executed and context is not None else None
    decided = f"transformers {measured.version}" if measured is not None else "inferred"
    decided = "watchlist" if own else decided
    if context is not None:
        change = _reads_as_executed(change, context.executed(change))
    return Classified(change, rule.severity, rule.name, rationale, reason, decided)


def _reads_as_executed(change: Change, measured: Executed | None) -> Change:
    """`change` with its summary's "model code reads config.json's" claim (the diff stage's
    hand table, labelled inferred) replaced by what running transformers measured: what of the
    model built differs, or which classes read the key when it runs; or that the model built and
    run is the same. Unchanged where transformers was not run on the change."""
    summary = change.summary
    start = summary.find(MODEL_READS_CLAUSE)
    end = summary.find(INFERRED + ")", start)
    if change.file != "config.json" or start < 0 or end < 0 or measured is None:
        return change
    checked = f"checked with transformers {measured.version}"
    if measured.kind == "model" and measured.readers:
        claim = f"{MODEL_READS_CLAUSE}{'; '.join(measured.readers)} ({checked})"
    elif measured.kind in ("same", "unread", "generation-same"):
        claim = f"the model transformers builds from this config does not read it ({checked})"
    else:
        return change
    return replace(change, summary=summary[:start] + claim + summary[end + len(INFERRED) :])


def _alias_note(rule: Rule, names: tuple[str, ...], knowledge: Knowledge) -> str:
    """Why a rule written for another name applies, when it matched the key by an alias:
    `n_layer` is another name of `num_hidden_layers` where every class agrees; where a class
    holds the two side by side (`num_key_value_heads` and `num_attention_heads` in Llama),
    only that some classes map the one onto the other."""
    pattern = rule.match.key
    if pattern is None or fnmatchcase(names[0], pattern):
        return ""
    other = next((n for n in names[1:] if fnmatchcase(n, pattern)), None)
    if other is None:  # pragma: no cover - the rule matched one of the names
        return ""
    key, alias = names[0].rpartition(".")[2], other.rpartition(".")[2]
    if knowledge.same_fact(key, alias):
        return f"`{names[0]}` is another name of `{other}` in transformers' config classes"
    apart = knowledge.held_apart(key, alias)
    held = f"; {apart} holds both as different attributes" if apart else ""
    return (
        f"the rule for `{other}` applies because some transformers config classes map "
        f"`{names[0]}` onto it; they are not one fact in every class{held}"
    )


def highest(severities: Sequence[Severity]) -> Severity:
    """The most severe of a non-empty sequence of severities."""
    return max(severities, key=lambda s: SEVERITY_RANK[s])


def _listed(value: object) -> object:
    """One value or a list of values: always a list."""
    return value if isinstance(value, list) else [value]


def _reason(value: str) -> str:
    if not value.strip():
        raise ValueError("a non-empty reason is required (suppressions are recorded)")
    return value


def _why_unlisted(value: str) -> str:
    if not value.strip():
        raise ValueError("a non-empty reason is required (why this repo's trees lack its code)")
    return value


class MatchBlock(BaseModel):
    """`match:` of a watchlist rule or suppression: any of artifact, kind (a value or a list),
    key and file (fnmatch globs)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    artifact: Annotated[list[Artifact], BeforeValidator(_listed)] | None = None
    kind: Annotated[list[ChangeKind], BeforeValidator(_listed)] | None = None
    key: Annotated[str, Field(strict=True)] | None = None
    file: Annotated[str, Field(strict=True)] | None = None

    @model_validator(mode="after")
    def _not_empty(self) -> MatchBlock:
        if not self.model_fields_set:
            raise ValueError("must name any of artifact, kind, key, file")
        return self

    def match(self) -> Match:
        return Match(
            None if self.artifact is None else frozenset(self.artifact),
            None if self.kind is None else frozenset(self.kind),
            self.key,
            self.file,
        )


class RuleBlock(BaseModel):
    """A watchlist rule: changes matching `match` get `severity` (tried before the defaults)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    match: MatchBlock = Field(description="'match: {artifact, kind, key, file}'")
    severity: Severity = Field(description="'severity: critical|high|moderate|low'")
    rationale: Annotated[str, Field(strict=True)] = "severity set by the watchlist"
    name: Annotated[str, Field(strict=True)] | None = None


class SuppressBlock(BaseModel):
    """A watchlist suppression: matching changes are recorded with `reason`, never published."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    match: MatchBlock = Field(description="'match: {artifact, kind, key, file}'")
    reason: Annotated[str, Field(strict=True), AfterValidator(_reason)] = Field(
        description="a non-empty 'reason' (suppressions are recorded)"
    )


class OverridesBlock(BaseModel):
    """A repo's `advisories:` block in the watchlist."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rules: list[RuleBlock] | None = None
    suppress: list[SuppressBlock] | None = None
    unlisted_code: Annotated[str, Field(strict=True), AfterValidator(_why_unlisted)] | None = Field(
        default=None,
        description="a non-empty reason why this repo's trees leave out its code files",
    )

    def overrides(self) -> Overrides:
        rules = tuple(
            Rule(r.name or f"watchlist-rule-{i}", r.match.match(), r.severity, r.rationale)
            for i, r in enumerate(self.rules or ())
        )
        return Overrides(
            rules,
            tuple(Suppression(s.match.match(), s.reason) for s in self.suppress or ()),
            self.unlisted_code,
        )


def parse_overrides(raw: Mapping[str, JSONValue] | None, *, where: str = "advisories") -> Overrides:
    """Validate a repo's `advisories:` mapping (`OverridesBlock`) into Overrides; raise ConfigError
    listing every problem.

    Shape: `{rules: [{match: {artifact, kind, key, file}, severity, rationale?, name?}],
    suppress: [{match: {...}, reason}], unlisted_code: reason}`; `artifact`/`kind` may be a value
    or a list of values, `key`/`file` are fnmatch globs. None or `{}` means no overrides.
    """
    if raw is None:
        return Overrides()
    block = validate(
        OverridesBlock, raw, where=where, message=f"{where}: invalid advisory overrides"
    )
    return block.overrides()
