"""Build OSV records from grouped, classified changes: ids, summary, affected ranges (pure; `now` passed in).

OSV git rules followed (https://ossf.github.io/osv-schema/#affectedranges-field): a `GIT` range
carries `repo` and full 40-hex commit ids in its events, and GIT ranges do not remove the need for
an explicit `versions` list, which holds the affected ingested commit shas.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import datetime

from tracker.advisories.advice import Restore
from tracker.advisories.classify import SEVERITY_RANK, Classified
from tracker.advisories.consistency import Finding
from tracker.advisories.details import GROUP_LABELS, render_details
from tracker.advisories.groups import ESTIMATE_GROUP, ChangeGroup, Subject, is_reupload
from tracker.advisories.masses import Mass, collapse
from tracker.advisories.schema import SCHEMA_VERSION
from tracker.shared.domain import (
    Artifact,
    Change,
    ChangeKind,
    Estimate,
    JSONValue,
    RepoId,
    Sha,
    VerificationStatus,
    is_full_sha,
    rfc3339,
)
from tracker.shared.errors import AdvisoryError

MAX_VALUE_CHARS = 100_000
"""A change's before/after values go into `database_specific.changes` whole up to this many
characters of JSON (the differ already describes huge values by size and digest); over it, a
digest with the length."""


def advisory_id(prefix: str, year: int, n: int) -> str:
    """`x_<PREFIX>-<YEAR>-<N>`, the OSV id form for a local database (the `x_` prefix)."""
    return f"x_{prefix}-{year}-{n}"


def compact_value(value: JSONValue) -> JSONValue:
    """`value` itself if its JSON is at most MAX_VALUE_CHARS, else a digest with a preview."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    if len(text) <= MAX_VALUE_CHARS:
        return json.loads(text)
    return {
        "truncated": True,
        "chars": len(text),
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
    }


def change_json(c: Classified) -> dict[str, JSONValue]:
    ch = c.change
    out: dict[str, JSONValue] = {
        "artifact": ch.artifact.value,
        "kind": ch.kind.value,
        "file": ch.file,
        "key": ch.key,
        "before": compact_value(ch.before),
        "after": compact_value(ch.after),
        "summary": ch.summary,
        "severity": c.severity.value,
        "rule": c.rule,
        "rationale": c.rationale,
        "decided_by": c.decided_by,
    }
    if c.suppressed is not None:
        out["suppressed"] = c.suppressed
    return out


def compact_estimate(est: Estimate | None) -> JSONValue:
    """The few headline numbers of an estimate (params, memory, architecture), or None; with
    `verification` (status and reasons) when the estimate is not verified."""
    if est is None:
        return None
    p, m = est.params, est.memory
    out: dict[str, JSONValue] = {
        "architecture": est.architecture,
        "model_type": est.model_type,
        "params": {"total": p.total, "active": p.active, "embedding": p.embedding},
        "memory_gb": {
            "full_finetune": m.full_finetune,
            "full_finetune_states": m.full_finetune_states,
            "lora": m.lora,
            "lora_adapter_params": m.lora_adapter_params,
            "activations_per_sample": m.activations_per_sample,
            "serve_weights": m.serve_weights,
            "kv_cache": m.kv_cache,
            "train_tokens": m.train_tokens,
            "serve_tokens": m.serve_tokens,
        },
    }
    if est.verification.status is not VerificationStatus.VERIFIED:
        out["verification"] = {
            "status": est.verification.status.value,
            "reasons": list(est.verification.reasons),
        }
    return compact_value(out)


SUMMARY_CHARS = 200
"""A summary longer than this drops whole items from its end (never part of one)."""


def items_of(text: str) -> list[str]:
    """`text` on one line, split into its "; "-separated items (not inside brackets or quotes)."""
    line = " ".join(text.split())
    out, depth, quoted, start = [], 0, False, 0
    for i, ch in enumerate(line):
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch in "([{":
            depth += 1
        elif not quoted and ch in ")]}":
            depth = max(0, depth - 1)
        elif not quoted and depth == 0 and line.startswith("; ", i):
            out.append(line[start:i])
            start = i + 2
    out.append(line[start:])
    return [x for x in out if x]


def fit(head: str, items: Sequence[str], limit: int = SUMMARY_CHARS) -> str:
    """`head` and as many whole `items` ("; "-joined) as fit in `limit` characters, then
    "and N more": a summary is shortened by dropping items, never by cutting a value. The first
    item is kept whole even when it alone is longer."""
    items = [x for text in items for x in items_of(text)]
    for n in range(len(items), 0, -1):
        rest = len(items) - n
        more = [f"and {rest} more"] if rest else []
        line = head + "; ".join([*items[:n], *more])
        if len(line) <= limit or n == 1:
            return line
    return head.rstrip(": ")


def summary_line(repo_id: RepoId, group: ChangeGroup) -> str:
    """One line: `<repo>: <what changed>`, e.g. `org/name: chat template renders differently (3 conversations)`."""
    changes = [c.change for c in group.published]
    label = GROUP_LABELS[group.name]
    if group.name is Artifact.CHAT_TEMPLATE:
        rendered = [c for c in changes if c.kind is ChangeKind.RENDERED]
        if any(c.kind is ChangeKind.BROKEN for c in changes):
            return f"{repo_id}: chat template no longer renders"
        if rendered:
            n = len(rendered)
            return (
                f"{repo_id}: chat template renders differently ({n} conversation{'s' * (n != 1)})"
            )
    if group.name is ESTIMATE_GROUP:
        return fit(f"{repo_id}: estimate: ", _estimate_parts(changes))
    masses = [r for r in collapse(group.published) if isinstance(r, Mass)]
    if masses:
        size = next((c for c in changes if c.key == "total_bytes"), None)
        tail = f"; {_bytes_phrase(size.before, size.after)}" if size is not None else ""
        phrase = "; ".join(m.phrase for m in masses)
        shapes = (
            "; shapes unchanged"
            if any(m.kind is ChangeKind.RETYPED for m in masses)
            and not any(c.kind is ChangeKind.RESHAPED for c in changes)
            else ""
        )
        if is_reupload(group):  # the dtype and the estimate it moved, after the tensors
            config = [
                f"{c.key} {json.dumps(c.before, ensure_ascii=False)} → "
                f"{json.dumps(c.after, ensure_ascii=False)}"
                for c in changes
                if c.artifact is Artifact.CONFIG
            ]
            moved = [c for c in changes if c.artifact is Artifact.ESTIMATE]
            parts = [f"{phrase}{shapes}", *config, tail.removeprefix("; ")]
            parts += _estimate_parts(moved) if moved else []
            return fit(f"{repo_id}: weights re-uploaded: ", [p for p in parts if p])
        return fit(f"{repo_id}: {label}: ", [f"{phrase}{shapes}{tail}"])
    if len(changes) == 1:
        return fit(f"{repo_id}: {label}: ", [changes[0].summary or changes[0].key])
    # most severe first, then in the differ's order
    ranked = sorted(group.published, key=lambda c: -SEVERITY_RANK[c.severity])
    keys = list(dict.fromkeys(c.change.key or c.change.file for c in ranked))
    shown = ", ".join(keys[:3]) + (f", and {len(keys) - 3} more" if len(keys) > 3 else "")
    return " ".join(f"{repo_id}: {label} changed ({len(changes)} changes: {shown})".split())


def _bytes_phrase(before: JSONValue, after: JSONValue) -> str:
    """ "checkpoint bytes −50%" (or the two sizes when either is not a positive number)."""
    if (
        isinstance(before, int)
        and isinstance(after, int)
        and not isinstance(before, bool)
        and before > 0
    ):
        pct = round((after - before) / before * 100)
        return f"checkpoint bytes {'+' if pct > 0 else '−' if pct < 0 else '±'}{abs(pct)}%"
    return f"checkpoint bytes {before} → {after}"


def count_unit(n: JSONValue) -> str:
    """A count in the unit that fits it: 6.74B, 124.44M, 12.30K, 950."""
    if not isinstance(n, int | float) or isinstance(n, bool):
        return str(n)
    for size, unit in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= size:
            return f"{n / size:.2f}{unit}"
    return f"{n:,}"


def _estimate_parts(changes: Sequence[Change]) -> list[str]:
    parts: list[str] = []
    total = next((c for c in changes if c.key == "params.total"), None)
    if total is not None:
        parts.append(f"parameters {count_unit(total.before)} → {count_unit(total.after)}")
    lost = sum(c.kind is ChangeKind.FIT_LOST for c in changes)
    gained = sum(c.kind is ChangeKind.FIT_GAINED for c in changes)
    if lost:
        parts.append(f"{lost} card setup{'s' * (lost != 1)} no longer fit{'s' * (lost == 1)}")
    if gained:
        parts.append(f"{gained} card setup{'s' * (gained != 1)} now fit{'s' * (gained == 1)}")
    parts += [c.summary for c in changes if c.key.startswith("preflight.")]  # preflight answers
    return parts or [f"{len(changes)} changes"]


def purl(repo_id: RepoId) -> str:
    """The package URL of a Hub model repo, without a version (OSV purls carry none)."""
    return f"pkg:huggingface/{repo_id}"


def commit_url(repo_url: str, sha: Sha) -> str:
    return f"{repo_url.rstrip('/')}/commit/{sha}"


def build_record(
    *,
    advisory_id: str,
    subject: Subject,
    group: ChangeGroup,
    estimate_changes: Sequence[Classified],
    now: datetime,
    restores: Sequence[Restore] = (),
    findings: Sequence[Finding] = (),
    resolved: Sequence[Finding] = (),
) -> dict[str, JSONValue]:
    """The OSV record of a new (open) advisory introduced at `subject.introduced`.

    Invariants: `published == modified == rfc3339(now)`; one affected package with one GIT range
    whose only event is `introduced`; `versions == [introduced]`; `database_specific` holds the
    severity word, the structured changes (values over MAX_VALUE_CHARS compacted to a digest),
    suppressed changes with reasons, and the compact estimate before and after.
    """
    repo_id, introduced, previous = subject.repo_id, subject.introduced, subject.previous
    if not is_full_sha(introduced) or (previous is not None and not is_full_sha(previous)):
        raise AdvisoryError(f"{advisory_id}: commit ids must be full 40-hex shas")
    stamp = rfc3339(now)
    url = subject.url
    details = render_details(
        subject=subject,
        group=group,
        estimate_changes=estimate_changes,
        restores=restores,
        findings=findings,
        resolved=resolved,
    )
    return {
        "schema_version": SCHEMA_VERSION,
        "id": advisory_id,
        "published": stamp,
        "modified": stamp,
        "summary": summary_line(repo_id, group),
        "details": details,
        "affected": [
            {
                "package": {"ecosystem": "GIT", "name": url, "purl": purl(repo_id)},
                "ranges": [{"type": "GIT", "repo": url, "events": [{"introduced": introduced}]}],
                "versions": [introduced],
            }
        ],
        "references": [
            {"type": "INTRODUCED", "url": commit_url(url, introduced)},
            {"type": "PACKAGE", "url": url},
        ],
        "database_specific": {
            "severity": group.severity.value,
            "group": group.name.value,
            "repo": repo_id,
            "previous": previous,
            **({"restores": [r.advisory_id for r in restores]} if restores else {}),
            **({"findings": [f.to_json() for f in findings]} if findings else {}),
            **({"resolved_findings": [f.to_json() for f in resolved]} if resolved else {}),
            "changes": [change_json(c) for c in group.published],
            "suppressed": [change_json(c) for c in group.suppressed],
            "estimate_changes": [change_json(c) for c in estimate_changes],
            "estimate": {
                "before": compact_estimate(subject.estimate_before),
                "after": compact_estimate(subject.estimate_after),
            },
        },
    }
