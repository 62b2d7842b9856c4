"""Render an advisory's Markdown `details` (pure): the kind of change and the evidence for it, the
introducing commit, what changed (values whole; mass changes as patterns), evidence, the estimate
rows that moved, and advice fitting the kind; plus the status paragraph a fix, withdrawal or
reopening adds later.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC

from tracker.advisories.advice import KIND_TITLES, Restore, advice, assess
from tracker.advisories.classify import Classified
from tracker.advisories.consistency import Finding
from tracker.advisories.groups import ChangeGroup, Subject
from tracker.advisories.masses import Mass, Row, collapse, reshaped_any
from tracker.advisories.values import (
    cell,
    code,
    fence_for,
    fits_inline,
    inline,
    literal,
    value_diff,
)
from tracker.shared.domain import Artifact, ChangeKind, Commit, Estimate, JSONValue

GROUP_LABELS: Mapping[Artifact, str] = {
    Artifact.CONFIG: "config",
    Artifact.GENERATION_CONFIG: "generation defaults",
    Artifact.TOKENIZER: "tokenizer",
    Artifact.SPECIAL_TOKENS: "special tokens",
    Artifact.CHAT_TEMPLATE: "chat template",
    Artifact.WEIGHTS: "weights",
    Artifact.CUSTOM_CODE: "custom code",
    Artifact.EXECUTABLE: "pickle files",
    Artifact.MODEL_CARD: "model card",
    Artifact.PROCESSOR: "processor config",
    Artifact.ESTIMATE: "estimate",
    Artifact.LINEAGE: "lineage",
}
"""How an advisory's text names each group (every Artifact can be a group)."""

_ESTIMATE_ROWS: tuple[tuple[str, Callable[[Estimate], int | float]], ...] = (
    ("parameters (total)", lambda e: e.params.total),
    ("parameters (active)", lambda e: e.params.active),
    ("parameters (embedding)", lambda e: e.params.embedding),
    ("serve weights (GB)", lambda e: e.memory.serve_weights),
    ("KV cache (GB)", lambda e: e.memory.kv_cache),
    ("LoRA fine-tune (GB)", lambda e: e.memory.lora),
    ("full fine-tune (GB)", lambda e: e.memory.full_finetune),
)
MAX_EVIDENCE_LINES = 60


def _num(value: JSONValue) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return cell(value)
    return f"{value:,}" if isinstance(value, int) else f"{value:,.2f}"


def _delta(before: JSONValue, after: JSONValue) -> str:
    ok = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (before, after))
    if not ok:
        return "—" if before == after else "changed"
    diff = after - before
    if diff == 0:
        return "0"
    pct = f" ({diff / before:+.1%})" if before else ""
    return (f"{diff:+,}" if isinstance(diff, int) else f"{diff:+,.2f}") + pct


def _moved(
    before: Estimate | None, after: Estimate | None
) -> list[tuple[str, JSONValue, JSONValue]]:
    rows = []
    for label, get in _ESTIMATE_ROWS:
        b = get(before) if before is not None else None
        a = get(after) if after is not None else None
        if b != a:
            rows.append((label, b, a))
    return rows


def estimate_table(before: Estimate | None, after: Estimate | None) -> str:
    """A Markdown table of the headline estimate numbers that moved, before and after, with
    deltas ("" when none moved); under it, why card-fit verdicts are withheld when either
    estimate cannot be vouched for."""
    rows = _moved(before, after)
    if not rows:
        return ""
    lines = ["| Estimate | Before | After | Δ |", "|---|---:|---:|---:|"]
    for label, b, a in rows:
        lines.append(f"| {label} | {_num(b)} | {_num(a)} | {_delta(b, a)} |")
    for side, est in (("before", before), ("after", after)):
        if est is not None and not est.verification.vouched:
            why = "; ".join(est.verification.reasons)
            lines += [
                "",
                f"The estimate {side} this revision is **unverified** ({why}): its numbers are "
                "shown for reference, and no card-fit verdict is given from them.",
            ]
    return "\n".join(lines)


def _one(text: str) -> str:
    return " ".join(text.split())


def commit_line(commit: Commit, url: str) -> str:
    """ "[`abc123def456`](url) “title” by A, B on 2024-12-12 17:15 UTC"; the title and the
    authors (upstream text) as literal text (`inline`)."""
    who = ", ".join(inline(_one(a)) for a in commit.authors) or "an unknown author"
    when = commit.date.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    title = inline(_one(commit.title)) or "(no title)"
    return f"[`{commit.sha[:12]}`]({url}/commit/{commit.sha}) “{title}” by {who} on {when}"


def _commit_block(commit: Commit, url: str) -> list[str]:
    out = [f"Commit {commit_line(commit, url)}."]
    body = commit.message.strip()
    if body and _one(body) != _one(commit.title):
        title = commit.title.strip()
        if title and body.startswith(title):
            body = body[len(title) :].strip()
        if body:
            out += ["", *(f"> {inline(line)}".rstrip() for line in body.splitlines())]
    return out


def _label(row: Row) -> str:
    if isinstance(row, Mass):
        return f"{len(row.items)} tensors"
    return row.change.key or "—"


def _change_lines(rows: Sequence[Row]) -> list[str]:
    lines = ["| Severity | File | Key | Change | Before | After |", "|---|---|---|---|---|---|"]
    for row in rows:
        if isinstance(row, Mass):
            sev, file, kind = row.items[0].severity, row.file, row.kind
            retyped = kind is ChangeKind.RETYPED
            b = cell(row.before) if retyped else "(each its own)"
            a = cell(row.after) if retyped else "(each its own)"
        else:
            ch = row.change
            sev, file, kind = row.severity, ch.file, ch.kind
            b, a = cell(ch.before), cell(ch.after)
        lines.append(
            f"| {sev.value} | {cell(file) if file else '—'} | {cell(_label(row))} | {kind.value} "
            f"| {b} | {a} |"
        )
    return lines


def _bullet(row: Row, items: Sequence[Classified]) -> str:
    if isinstance(row, Mass):
        c = row.items[0]
        shapes = (
            "; shapes unchanged" if row.kind.value == "retyped" and not reshaped_any(items) else ""
        )
        return (
            f"- **{c.severity.value}** ({c.rule}): {literal(row.phrase)}{shapes} "
            f"({literal(row.examples)}): {literal(c.rationale)}"
        )
    return (
        f"- **{row.severity.value}** ({row.rule}): {literal(_one(row.change.summary))}: "
        f"{literal(row.rationale)}"
    )


def _evidence(rows: Sequence[Row]) -> list[str]:
    out: list[str] = []
    for row in rows:
        if isinstance(row, Mass):
            continue
        ch = row.change
        detail = ch.detail.strip("\n")
        lines = detail.splitlines() if detail else []
        if not (fits_inline(ch.before) and fits_inline(ch.after)):
            # the values the table points "below" to, whole; text the differ already line-diffed
            # is not repeated
            text = all(isinstance(v, str | None) for v in (ch.before, ch.after))
            diffed = any(x.startswith(("---", "@@")) for x in lines)
            if not (text and diffed):
                lines = [*value_diff(ch.before, ch.after), *lines]
        if not lines:
            continue
        shown = lines[:MAX_EVIDENCE_LINES]
        if len(lines) > MAX_EVIDENCE_LINES:
            shown.append(
                f"… ({len(lines) - MAX_EVIDENCE_LINES} more lines; the whole values are in "
                "the record's database_specific.changes)"
            )
        fence = fence_for(shown)
        out += [
            "",
            f"**{inline(ch.key or ch.file)}** ({ch.kind.value}):",
            "",
            f"{fence}diff",
            *shown,
            fence,
        ]
    return out


def _headline(group: ChangeGroup) -> Classified:
    """The change whose rationale heads the advisory: the first at the group's severity, but a
    shard-content change only when nothing more specific is at that severity."""
    top = [c for c in group.published if c.severity is group.severity]
    specific = [c for c in top if c.rule != "weight-values"]
    return (specific or top)[0]


def render_details(
    *,
    subject: Subject,
    group: ChangeGroup,
    estimate_changes: Sequence[Classified],
    restores: Sequence[Restore] = (),
    findings: Sequence[Finding] = (),
    resolved: Sequence[Finding] = (),
) -> str:
    """The Markdown body of one advisory; deterministic for equal inputs; ends with a newline.

    `restores`: changes of this revision that set a value back to what it was before an earlier
    advisory (named as fix evidence); `findings`: consistency problems this revision introduced
    (regression evidence); `resolved`: those of the previous revision it resolved (fix evidence).
    """
    repo_id, url, introduced = subject.repo_id, subject.url, subject.introduced
    previous = subject.previous
    top = _headline(group)
    since = (
        f"since [`{previous[:12]}`]({url}/commit/{previous})"
        if previous
        else "(first ingested revision)"
    )
    label = GROUP_LABELS[group.name]
    judged = assess(
        subject,
        group,
        restores,
        [literal(f.text) for f in findings],
        [literal(f.text) for f in resolved],
    )
    kind = f"**Kind: {KIND_TITLES[judged.kind]}**"
    why = "; ".join(judged.evidence)
    rows = collapse(group.published)
    out = [
        f"**Severity: {group.severity.value}**: {literal(top.rationale)}.",
        "",
        f"{kind}: {why}." if why else f"{kind}.",
        "",
        f"Revision [`{introduced}`]({url}/commit/{introduced}) of [{repo_id}]({url}) "
        f"changed its {label} {since}.",
    ]
    if subject.commit is not None:
        out += ["", *_commit_block(subject.commit, url)]
    out += [
        "",
        "## What changed",
        "",
        *_change_lines(rows),
        "",
        *(_bullet(row, group.published) for row in rows),
    ]
    if findings:
        out += ["", "## Consistency findings", ""]
        out += [f"- **{f.severity.value}** ({f.check}): {literal(f.text)}" for f in findings]
    evidence = _evidence(rows)
    if evidence:
        out += ["", "## Evidence", *evidence]
    table = estimate_table(subject.estimate_before, subject.estimate_after)
    fits = [
        c for c in estimate_changes if c.change.kind in (ChangeKind.FIT_LOST, ChangeKind.FIT_GAINED)
    ]
    others = [c for c in estimate_changes if c not in fits]
    if table or estimate_changes:
        out += ["", "## Estimate", ""]
        out += [f"- {_one(c.change.summary)}" for c in [*fits, *others]]
        if table:
            out += ["", table] if estimate_changes else [table]
    if group.suppressed:
        out += ["", "## Suppressed by the watchlist", ""]
        out += [
            f"- {code(c.change.key or c.change.file)} ({c.change.kind.value}): {c.suppressed}"
            for c in group.suppressed
        ]
    out += ["", ADVICE_HEADING, "", *advice(subject, group, judged), ""]
    return "\n".join(out)


STATUS_HEADING = "## Status"
ADVICE_HEADING = "## What to do"


def advice_of(details: str) -> str | None:
    """The paragraphs of `details`' "What to do" section (None: it has none)."""
    at = details.find(ADVICE_HEADING + "\n")
    if at == -1:
        return None
    body = details[at + len(ADVICE_HEADING) + 1 :]
    end = body.find("\n## ")
    return (body if end == -1 else body[:end]).strip("\n")


def with_advice(details: str, advice: str) -> str:
    """`details` with its "What to do" section's paragraphs replaced by `advice` (appended as
    the last section when it has none)."""
    at = details.find(ADVICE_HEADING + "\n")
    block = f"{ADVICE_HEADING}\n\n{advice.strip()}\n"
    if at == -1:
        return details.rstrip("\n") + "\n\n" + block
    end = details.find("\n## ", at + len(ADVICE_HEADING))
    return details[:at] + block + (details[end:] if end != -1 else "")


def with_status(details: str, paragraph: str | None) -> str:
    """`details` with its status section replaced by `paragraph` (None: removed); the section sits
    before "## What changed" (a findings advisory's "## Consistency findings"), where a reader
    sees it first after the headline."""
    text = details
    if STATUS_HEADING + "\n" in text:
        start = text.index(STATUS_HEADING + "\n")
        end = text.find("\n## ", start + len(STATUS_HEADING))
        text = text[:start] + (text[end + 1 :] if end != -1 else "")
    if paragraph is None:
        return text
    at = text.find("## What changed")
    at = at if at != -1 else text.find("## Consistency findings")  # a findings advisory's
    block = f"{STATUS_HEADING}\n\n{paragraph}\n\n"
    return text[:at] + block + text[at:] if at != -1 else text.rstrip("\n") + "\n\n" + block
