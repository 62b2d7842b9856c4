"""Advisories made of consistency findings alone: a revision broken as first seen, or broken with no change to carry it (pure).

A finding of the first revision tracker ingests of a repo has no change to ride on (the first
revision is compared with nothing), and neither has one a revision introduces when none of its
changes is published (all suppressed by the watchlist, say). Either way it is published as an
advisory of its own, never dropped. Its pending entries (`tracker.advisories.lifecycle`) are the
findings themselves, at the location ("consistency", file, "<check>:<key>"): a later revision that
resolves a finding (and has no new one at that place) restores its entry, and the advisory is
fixed at the revision that resolves the last of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from tracker.advisories.classify import SEVERITY_RANK
from tracker.advisories.consistency import Finding
from tracker.advisories.details import commit_line
from tracker.advisories.groups import Subject
from tracker.advisories.lifecycle import FINDING_ARTIFACT, PendingChange, value_digest
from tracker.advisories.osv import commit_url, compact_estimate, purl
from tracker.advisories.schema import SCHEMA_VERSION
from tracker.advisories.values import literal
from tracker.shared.domain import Artifact, JSONValue, Severity, is_full_sha, rfc3339
from tracker.shared.errors import AdvisoryError

ARTIFACT = FINDING_ARTIFACT
"""The artifact of a finding's pending entry (no change has it: only findings move such entries)."""
FIRST_SEEN = "broken as first seen"
_GROUPS = {
    "config.json": Artifact.CONFIG,
    "generation_config.json": Artifact.GENERATION_CONFIG,
    "tokenizer.json": Artifact.TOKENIZER,
    "vocab.json": Artifact.TOKENIZER,
    "tokenizer_config.json": Artifact.SPECIAL_TOKENS,
    "special_tokens_map.json": Artifact.SPECIAL_TOKENS,
}
_SHORT = {
    "token-id-out-of-vocab": "a special-token id outside the vocabulary",
    "architecture-class-unknown": "`architectures` names a class transformers does not define",
    "token-id-undefined": "a special-token id the tokenizer does not define",
    "special-token-mismatch": "a special-token id other than the tokenizer's",
    "token-id-disagrees": "config.json and generation_config.json disagree on a special-token id",
    "added-token-id-mislabelled": "added tokens listed under ids they do not load with",
    "vocab-smaller-than-tokenizer": "`vocab_size` smaller than the tokenizer",
    "vocab-size-disagrees-with-checkpoint": "`vocab_size` other than the checkpoint's embedding",
    "dtype-disagrees-with-checkpoint": "a dtype other than the checkpoint's",
    "template-token-undefined": "a chat template token the tokenizer does not define",
    "auto-map-code-missing": "`auto_map` names a code file the revision does not have",
}
MAX_SUMMARY = 160


def ranked(findings: Sequence[Finding]) -> list[Finding]:
    """`findings` most severe first (stable)."""
    return sorted(findings, key=lambda f: -SEVERITY_RANK[f.severity])


def group_of(findings: Sequence[Finding]) -> Artifact:
    """The advisory group: the artifact of the file the most severe finding is about."""
    top = ranked(findings)[0]
    if top.check == "template-token-undefined":
        return Artifact.CHAT_TEMPLATE
    if top.check == "vocab-size-disagrees-with-checkpoint":
        return Artifact.WEIGHTS
    return _GROUPS.get(top.file, Artifact.CONFIG)


def severity_of(findings: Sequence[Finding]) -> Severity:
    return ranked(findings)[0].severity


def location(f: Finding) -> tuple[str, str, str]:
    """Where a finding's pending entry sits: ("consistency", its file, "<check>:<key>")."""
    return (ARTIFACT, f.file, f"{f.check}:{f.key}")


def initial_pending(findings: Sequence[Finding]) -> tuple[PendingChange, ...]:
    """One pending entry per finding location (first wins): before = no finding, now = its text."""
    seen: dict[tuple[str, str, str], PendingChange] = {}
    for f in findings:
        loc = location(f)
        if loc not in seen:
            now = value_digest(f.text)
            seen[loc] = PendingChange(*loc, before=value_digest(None), current=now, after=now)
    return tuple(seen.values())


def places(pending: Sequence[PendingChange]) -> set[tuple[str, str]]:
    """(file, key) of the findings among `pending`: the values a fixing change sets."""
    return {
        (p.file, p.key.split(":", 1)[1]) for p in pending if p.artifact == ARTIFACT and ":" in p.key
    }


def findings_only(pending: Sequence[PendingChange]) -> bool:
    """Whether every entry of `pending` is a finding's (an advisory of findings alone)."""
    return bool(pending) and all(p.artifact == ARTIFACT for p in pending)


def settle(
    pending: Sequence[PendingChange],
    introduced: Sequence[Finding],
    resolved: Sequence[Finding],
) -> tuple[tuple[PendingChange, ...], bool]:
    """`pending` after a revision that introduced and resolved these findings, and whether any
    finding entry moved. A resolved finding restores its entry unless a finding at the same
    location is introduced with it (the value changed but is still wrong: the entry then holds
    the new text)."""
    new = {location(f): f for f in introduced}
    gone = {location(f) for f in resolved}
    out: list[PendingChange] = []
    moved = False
    for p in pending:
        loc = p.location
        if p.artifact != ARTIFACT or (loc not in new and loc not in gone):
            out.append(p)
            continue
        current = value_digest(new[loc].text) if loc in new else p.before
        moved = moved or current != p.current
        out.append(PendingChange(*loc, before=p.before, current=current, after=p.after))
    return tuple(out), moved


def _phrases(findings: Sequence[Finding]) -> list[str]:
    return list(dict.fromkeys(_SHORT.get(f.check, f.check) for f in ranked(findings)))


def summary_line(subject: Subject, findings: Sequence[Finding], first: bool) -> str:
    """`<repo>: broken as first seen: <what>` (or `<repo>: consistency: <what>`), whole: when too
    long, whole phrases are dropped and counted, never cut."""
    head = f"{subject.repo_id}: {FIRST_SEEN if first else 'consistency'}: "
    phrases = _phrases(findings)
    for n in range(len(phrases), 0, -1):
        rest = len(phrases) - n
        line = head + "; ".join(phrases[:n]) + (f" (and {rest} more)" if rest else "")
        if len(line) <= MAX_SUMMARY or n == 1:
            return line
    return head.rstrip(": ")  # pragma: no cover - findings are never empty


def _advice(subject: Subject, first: bool) -> str:
    if first or subject.previous is None:
        return (
            "There is no earlier revision to pin: this is the first revision tracker ingested of "
            "this repo, and it already has the findings above. Before you depend on it, set the "
            "values the findings name yourself where you load it (in the config or "
            "`GenerationConfig` you pass), or wait for a revision that resolves them: tracker "
            "marks this advisory fixed at the first revision that has none of them."
        )
    prev = subject.previous
    return (
        f"The previous revision `{prev[:12]}` does not have these findings: pin it "
        f'(`revision="{prev}"` in `from_pretrained`) until a later revision resolves them '
        "(tracker marks this advisory fixed when one does), or set the values the findings name "
        "yourself where you load this one."
    )


def render_details(subject: Subject, findings: Sequence[Finding], first: bool) -> str:
    """The Markdown body of a findings advisory (ends with a newline)."""
    url, sha = subject.url, subject.introduced
    top = ranked(findings)[0]
    n = len(findings)
    counted = f"{n} consistency finding{'s' * (n != 1)}"
    if first:
        kind = (
            f"**Kind: {FIRST_SEEN}**: this is the first revision tracker ingested of this repo, "
            f"and it already has {counted}: no change introduced {'them' if n != 1 else 'it'} "
            "here, the revision is broken as it stands."
        )
        where = "(first ingested revision)"
    else:
        prev = subject.previous or ""
        kind = (
            f"**Kind: a regression**: this revision introduced {counted}, and none of its "
            "changes is published to carry them."
        )
        where = f"since [`{prev[:12]}`]({url}/commit/{prev})"
    out = [
        f"**Severity: {top.severity.value}**: {literal(top.text)}.",
        "",
        kind,
        "",
        f"Revision [`{sha}`]({url}/commit/{sha}) of [{subject.repo_id}]({url}) {where}.",
    ]
    if subject.commit is not None:
        out += ["", f"Commit {commit_line(subject.commit, url)}."]
    out += ["", "## Consistency findings", ""]
    out += [f"- **{f.severity.value}** ({f.check}): {literal(f.text)}" for f in ranked(findings)]
    out += ["", "## What to do", "", _advice(subject, first), ""]
    return "\n".join(out)


def build_record(
    *,
    advisory_id: str,
    subject: Subject,
    findings: Sequence[Finding],
    now: datetime,
    first: bool,
) -> dict[str, JSONValue]:
    """The OSV record of a new findings advisory introduced at `subject.introduced` (same
    invariants as `osv.build_record`: one GIT range whose only event is `introduced`, `versions
    == [introduced]`); `database_specific` holds the findings, `first_seen` and no changes."""
    if not findings:
        raise AdvisoryError(f"{advisory_id}: a findings advisory needs findings")
    sha, previous = subject.introduced, subject.previous
    if not is_full_sha(sha) or (previous is not None and not is_full_sha(previous)):
        raise AdvisoryError(f"{advisory_id}: commit ids must be full 40-hex shas")
    stamp = rfc3339(now)
    url = subject.url
    return {
        "schema_version": SCHEMA_VERSION,
        "id": advisory_id,
        "published": stamp,
        "modified": stamp,
        "summary": summary_line(subject, findings, first),
        "details": render_details(subject, findings, first),
        "affected": [
            {
                "package": {"ecosystem": "GIT", "name": url, "purl": purl(subject.repo_id)},
                "ranges": [{"type": "GIT", "repo": url, "events": [{"introduced": sha}]}],
                "versions": [sha],
            }
        ],
        "references": [
            {"type": "INTRODUCED", "url": commit_url(url, sha)},
            {"type": "PACKAGE", "url": url},
        ],
        "database_specific": {
            "severity": severity_of(findings).value,
            "group": group_of(findings).value,
            "repo": subject.repo_id,
            "previous": previous,
            "first_seen": first,
            "findings": [f.to_json() for f in ranked(findings)],
            "changes": [],
            "suppressed": [],
            "estimate_changes": [],
            "estimate": {
                "before": compact_estimate(subject.estimate_before),
                "after": compact_estimate(subject.estimate_after),
            },
        },
    }
