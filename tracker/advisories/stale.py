"""Stale-derivative advisories: a derivative still has a value its base model just left (pure).

When a base revision changes its chat template, a special-token id, a generation default or its
tokenizer, each linked derivative's own copy (a GGUF model's embedded template and ids, a
fine-tune's files: `tracker.diff.lineage.Unit`) is compared with the value the base left. A unit
that still has it is stale; the advisory is on the derivative, introduced at the derivative's
revision where it was found, and fixed at the first later revision of the derivative whose units
no longer hold any stale value (`resolved`: re-converted, re-uploaded or removed).

A GGUF derivative whose embedded template or special ids differ from its base's at the newest
base revision compared, without having been left behind (`find_differs`: a value the base never
had, or one it left before tracker read it), is a finding of its own: a "differs from its base"
advisory (moderate: tracker cannot tell which side is right), fixed the same way when the
derivative's units no longer hold the value.

Its pending entries (`tracker.advisories.lifecycle`) sit at ("lineage", unit file, key) with the
digest of the value the base left as `current`: no change of the derivative's own diff moves
them; `resolved` decides the fix, which publishing applies in the revision's transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from tracker.advisories.classify import SEVERITY_RANK
from tracker.advisories.lifecycle import PendingChange, value_digest
from tracker.advisories.osv import commit_url, purl
from tracker.advisories.schema import SCHEMA_VERSION
from tracker.advisories.values import literal
from tracker.diff import Unit
from tracker.diff.lineage import TEMPLATE, TOKENIZER
from tracker.shared.domain import (
    Artifact,
    Commit,
    JSONValue,
    RepoId,
    Severity,
    Sha,
    is_full_sha,
    rfc3339,
)
from tracker.shared.errors import AdvisoryError

ARTIFACT = "lineage"
"""The artifact of a stale entry's pending location (no change of the derivative has it)."""
_VERB = {
    "quantized": "converted",
    "finetune": "fine-tuned",
    "adapter": "trained",
    "merge": "merged",
}
MAX_SHOWN = 400


@dataclass(frozen=True)
class Stale:
    """One unit of the derivative that still has the value `key` its base left at a revision:
    `left` is that value, `now` the base's value after it (None: the base removed it)."""

    key: str
    file: str
    gguf: bool
    left: JSONValue
    now: JSONValue

    def to_json(self) -> dict[str, JSONValue]:
        return {
            "key": self.key,
            "file": self.file,
            "gguf": self.gguf,
            "left": value_digest(self.left),
            "now": value_digest(self.now),
        }


def severity(key: str) -> Severity:
    """Template, ids and tokenizer: high (prompts render and stop wrongly); generation: moderate."""
    return Severity.MODERATE if key.startswith("generation.") else Severity.HIGH


def find_stale(
    before: Mapping[str, JSONValue],
    after: Mapping[str, JSONValue],
    head: Mapping[str, JSONValue],
    units: Sequence[Unit],
) -> list[Stale]:
    """The stale units of a derivative after its base went `before` → `after` (the base's values
    at two successive revisions; `head`: at the base's newest revision compared). A key the base
    had at `before` and changed or removed is stale in each unit that has exactly the `before`
    value, unless the base is back to that value at `head`. A key only the base gained is not
    stale anywhere: the derivative had nothing to leave."""
    out: list[Stale] = []
    for key in sorted(before):
        old, new = before[key], after.get(key)
        if old == new or head.get(key) == old:
            continue
        for unit in units:
            if key in unit.values and unit.values[key] == old:
                out.append(Stale(key, unit.file, unit.gguf, old, new))
    return out


def find_differs(
    base: Mapping[str, JSONValue], units: Sequence[Unit], keys: Sequence[str]
) -> list[Stale]:
    """Each GGUF unit's value of `keys` that differs from the base's (`base`: its values at the
    newest revision compared), as a Stale whose `left` is the derivative's own value and `now` the
    base's; a key one side does not say is not compared."""
    out: list[Stale] = []
    for unit in units:
        if not unit.gguf:
            continue
        for key in keys:
            if key in unit.values and key in base and unit.values[key] != base[key]:
                out.append(Stale(key, unit.file, True, unit.values[key], base[key]))
    return out


def initial_pending(stale: Sequence[Stale]) -> tuple[PendingChange, ...]:
    """One entry per (unit, key): before = the base's new value, current = the value it left."""
    out = {}
    for s in stale:
        left = value_digest(s.left)
        out[(s.file, s.key)] = PendingChange(
            ARTIFACT, s.file, s.key, before=value_digest(s.now), current=left, after=left
        )
    return tuple(out.values())


def resolved(pending: Sequence[Mapping[str, str]], units: Sequence[Unit]) -> bool:
    """Whether a derivative revision with `units` holds none of a stale advisory's left values
    (its `pending` entries, JSON): every stale unit gone or with another value there."""
    entries = [PendingChange.from_json(p) for p in pending]
    by_file = {u.file: u for u in units}
    lineage = [e for e in entries if e.artifact == ARTIFACT]
    if not lineage:
        return False
    for e in lineage:
        unit = by_file.get(e.file)
        if (
            unit is not None
            and e.key in unit.values
            and value_digest(unit.values[e.key]) == e.current
        ):
            return False
    return True


def _what(key: str) -> str:
    if key == TEMPLATE:
        return "chat template"
    if key == TOKENIZER:
        return "tokenizer (tokenizer.json)"
    if key.startswith("generation."):
        return f"generation default `{key.removeprefix('generation.')}`"
    return f"`{key}`"


def _shown(value: JSONValue) -> str:
    text = literal(str(value)) if not isinstance(value, str) else literal(value)
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + " …"


def _still(s: Stale, where: str) -> str:
    if s.key == TEMPLATE:
        return f"{where} still renders the old prompt"
    if s.key == TOKENIZER:
        return f"{where} still has the old tokenizer.json"
    return f"{where} still has {s.key.removeprefix('generation.')} = {_shown(s.left)}"


def _where(s: Stale) -> str:
    if s.gguf:
        return f"your GGUF `{s.file}`"
    return "this repo"


@dataclass(frozen=True)
class StaleSubject:
    """What a stale-derivative advisory is about: the derivative at `sha` (`url`: its URL), its
    base at the revision `base_sha` that left the values (`base_commit`: that commit when known)."""

    repo_id: RepoId
    url: str
    sha: Sha
    base: RepoId
    base_url: str
    base_sha: Sha
    base_commit: Commit | None
    relation: str | None


def _whats(stale: Sequence[Stale]) -> str:
    whats = list(dict.fromkeys(_what(s.key) for s in stale))
    return whats[0] + (f" (and {len(whats) - 1} more)" if len(whats) > 1 else "")


def summary_line(subject: StaleSubject, stale: Sequence[Stale], *, differs: bool = False) -> str:
    """`<repo>: stale derivative: converted before <base> changed its chat template at <sha>`;
    `differs`: `<repo>: differs from its base <base> at <sha>: chat template`."""
    if differs:
        return (
            f"{subject.repo_id}: differs from its base {subject.base} at "
            f"{subject.base_sha[:12]}: {_whats(stale)}"
        )
    verb = _VERB.get(subject.relation or "", "made")
    what = _whats(stale)
    return (
        f"{subject.repo_id}: stale derivative: {verb} before {subject.base} changed its "
        f"{what} at {subject.base_sha[:12]}"
    )


def _title(subject: StaleSubject) -> str:
    if subject.base_commit is not None and subject.base_commit.title:
        return f" (“{literal(subject.base_commit.title)}”)"
    return ""


def render_differs(subject: StaleSubject, differs: Sequence[Stale]) -> str:
    """The Markdown body of a "differs from its base" advisory (ends with a newline)."""
    base_commit = commit_url(subject.base_url, subject.base_sha)
    first = differs[0]
    out = [
        f"**Severity: {Severity.MODERATE.value}**: {_where(first)} has another {_what(first.key)} "
        f"than [{subject.base}]({subject.base_url}) at [`{subject.base_sha[:12]}`]({base_commit})"
        f"{_title(subject)}, and no change of the base that tracker read explains it.",
        "",
        "**Kind: a derivative that differs from its base**: llama.cpp, Ollama and LM Studio use "
        "the GGUF's embedded copy, so its users get another prompt or other stop and padding ids "
        "than the base's users.",
        "",
        f"Revision [`{subject.sha}`]({subject.url}/commit/{subject.sha}) of "
        f"[{subject.repo_id}]({subject.url}), whose base is [{subject.base}]({subject.base_url})"
        + (f" ({subject.relation})" if subject.relation else "")
        + ".",
        "",
        "## What differs",
        "",
    ]
    for d in differs:
        out.append(f"- **{Severity.MODERATE.value}** {_what(d.key)} in {_where(d)}")
        if d.key == TEMPLATE:
            out.append(
                f"  - the GGUF's: {len(str(d.left)):,} characters; the base's: "
                f"{len(str(d.now)):,} characters"
            )
        else:
            out.append(f"  - the GGUF's: {_shown(d.left)}; the base's: {_shown(d.now)}")
    advice = (
        f"Check which is meant: re-convert from [{subject.base}]({subject.base_url}) at "
        f"`{subject.base_sha[:12]}` to take the base's values, or pass the base's chat template "
        "or ids where you run this GGUF. tracker marks this advisory fixed at the derivative's "
        "first revision that no longer has the values listed."
    )
    out += ["", "## What to do", "", advice, ""]
    return "\n".join(out)


def render_details(subject: StaleSubject, stale: Sequence[Stale]) -> str:
    """The Markdown body of a stale-derivative advisory (ends with a newline)."""
    verb = _VERB.get(subject.relation or "", "made")
    top = top_severity(stale)
    base_commit = commit_url(subject.base_url, subject.base_sha)
    title = _title(subject)
    first = stale[0]
    out = [
        f"**Severity: {top.value}**: {verb} before [{subject.base}]({subject.base_url}) changed "
        f"its {_what(first.key)} at [`{subject.base_sha[:12]}`]({base_commit}){title}; "
        f"{_still(first, _where(first))}.",
        "",
        "**Kind: a stale derivative**: the base model left a value this derivative still has.",
        "",
        f"Revision [`{subject.sha}`]({subject.url}/commit/{subject.sha}) of "
        f"[{subject.repo_id}]({subject.url}), whose base is [{subject.base}]({subject.base_url})"
        + (f" ({subject.relation})" if subject.relation else "")
        + ".",
        "",
        "## What changed",
        "",
    ]
    for s in stale:
        now = "removed it" if s.now is None else "now has another"
        out.append(
            f"- **{severity(s.key).value}** {_what(s.key)}: {_still(s, _where(s))}; the base {now}."
        )
        if s.key != TEMPLATE and s.key != TOKENIZER:
            out.append(f"  - left: {_shown(s.left)}; base now: {_shown(s.now)}")
    advice = (
        f"Re-convert (or re-derive) from [{subject.base}]({subject.base_url}) at "
        f"`{subject.base_sha[:12]}` or later, or set the base's new values yourself where you "
        "run this derivative (a chat template or stop id passed to llama.cpp, Ollama or "
        "`from_pretrained`). tracker marks this advisory fixed at the derivative's first "
        "revision that no longer has the values listed."
    )
    out += ["", "## What to do", "", advice, ""]
    return "\n".join(out)


def build_record(
    *,
    advisory_id: str,
    subject: StaleSubject,
    stale: Sequence[Stale],
    now: datetime,
    differs: bool = False,
) -> dict[str, JSONValue]:
    """The OSV record of a new stale-derivative advisory introduced at `subject.sha` (one GIT range
    whose only event is `introduced`, `versions == [sha]`); `database_specific.lineage` names the
    base, its revision, the kind (`stale`, or `differs` for a "differs from its base" finding:
    `find_differs`) and each unit (`stale`)."""
    if not stale:
        raise AdvisoryError(f"{advisory_id}: a stale-derivative advisory needs stale values")
    if not is_full_sha(subject.sha) or not is_full_sha(subject.base_sha):
        raise AdvisoryError(f"{advisory_id}: commit ids must be full 40-hex shas")
    stamp = rfc3339(now)
    url = subject.url
    top = Severity.MODERATE if differs else top_severity(stale)
    return {
        "schema_version": SCHEMA_VERSION,
        "id": advisory_id,
        "published": stamp,
        "modified": stamp,
        "summary": summary_line(subject, stale, differs=differs),
        "details": render_differs(subject, stale) if differs else render_details(subject, stale),
        "affected": [
            {
                "package": {"ecosystem": "GIT", "name": url, "purl": purl(subject.repo_id)},
                "ranges": [{"type": "GIT", "repo": url, "events": [{"introduced": subject.sha}]}],
                "versions": [subject.sha],
            }
        ],
        "references": [
            {"type": "INTRODUCED", "url": commit_url(url, subject.sha)},
            {"type": "PACKAGE", "url": url},
            {"type": "EVIDENCE", "url": commit_url(subject.base_url, subject.base_sha)},
        ],
        "database_specific": {
            "severity": top.value,
            "group": Artifact.LINEAGE.value,
            "repo": subject.repo_id,
            "previous": None,
            "lineage": {
                "base": subject.base,
                "base_sha": subject.base_sha,
                "relation": subject.relation,
                "kind": "differs" if differs else "stale",
                "stale": [s.to_json() for s in stale],
            },
            "changes": [],
            "suppressed": [],
            "estimate_changes": [],
            "estimate": {"before": None, "after": None},
        },
    }


def top_severity(stale: Sequence[Stale]) -> Severity:
    return max((severity(s.key) for s in stale), key=lambda v: SEVERITY_RANK[v])


__all__ = [
    "ARTIFACT",
    "Stale",
    "StaleSubject",
    "build_record",
    "find_differs",
    "find_stale",
    "initial_pending",
    "resolved",
    "severity",
    "summary_line",
    "top_severity",
]
