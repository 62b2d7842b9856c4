"""Classify changes into severities by the rules table, with per-repo overrides and suppressions.

Pure: takes `Change` values, the revision's `Context` (both snapshots, for the effect checks) and
the repo's `advisories:` mapping from watchlist.yaml, returns values. The default table itself is
data in `tracker.advisories.rules`; transformers' knowledge is in `tracker.advisories.knowledge`.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from tracker.advisories.effects import Context
from tracker.advisories.knowledge import Knowledge, load
from tracker.advisories.rules import DEFAULT_RULES, SEVERITY_RANK, Match, Rule
from tracker.domain import Artifact, Change, ChangeKind, JSONValue, Severity
from tracker.errors import ConfigError

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


@dataclass(frozen=True)
class Classified:
    """A change with its severity, the rule that decided it and, if suppressed, why."""

    change: Change
    severity: Severity
    rule: str
    rationale: str
    suppressed: str | None = None


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
    notes = [_alias_note(rule, names), evidence]
    rationale = rule.rationale.replace("{key}", change.key or change.file)
    rationale = ": ".join([rationale, *(n for n in notes if n)])
    reason = next((s.reason for s in overrides.suppress if s.match.matches(change, names)), None)
    return Classified(change, rule.severity, rule.name, rationale, reason)


def _alias_note(rule: Rule, names: tuple[str, ...]) -> str:
    """`n_layer` is another name of `num_hidden_layers`, when the rule matched the key by an alias."""
    pattern = rule.match.key
    if pattern is None or fnmatchcase(names[0], pattern):
        return ""
    other = next((n for n in names[1:] if fnmatchcase(n, pattern)), None)
    if other is None:  # pragma: no cover - the rule matched one of the names
        return ""
    return f"`{names[0]}` is another name of `{other}` in transformers' config classes"


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
