"""Render an advisory's Markdown `details`: what changed, before → after, evidence, estimate table, advice (pure)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence

from tracker.advisories.classify import Classified
from tracker.advisories.groups import ChangeGroup, Subject
from tracker.domain import Artifact, Estimate, JSONValue

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
}
"""How an advisory's text names each group (every Artifact can be a group)."""

ADVICE: Mapping[Artifact, str] = {
    Artifact.CONFIG: "Pin the previous revision (`revision=` in `from_pretrained`) until you have checked "
    "that your code, adapters and serving configuration still match the new config.",
    Artifact.GENERATION_CONFIG: "Pass your own generation settings explicitly, or pin the previous revision.",
    Artifact.TOKENIZER: "Do not mix the new tokenizer with weights, caches or fine-tunes made with the old "
    "one; pin the previous revision until you have re-validated tokenization.",
    Artifact.SPECIAL_TOKENS: "Check stop/pad handling in your generation and training code; pin the "
    "previous revision until you have.",
    Artifact.CHAT_TEMPLATE: "Re-run your prompt tests: prompts the model sees have changed. Pin the "
    "previous revision or ship your own template if you depend on the old format.",
    Artifact.WEIGHTS: "Re-validate outputs and memory before upgrading; pin the previous revision until then.",
    Artifact.CUSTOM_CODE: "Review the new code before loading with `trust_remote_code=True`, or pin the "
    "previous revision.",
    Artifact.EXECUTABLE: "Do not load pickle-based files you have not reviewed; prefer safetensors, or "
    "pin the previous revision.",
    Artifact.MODEL_CARD: "Review the model card changes (license and access terms in particular).",
    Artifact.PROCESSOR: "Re-run your preprocessing tests; pin the previous revision until you have.",
    Artifact.ESTIMATE: "Re-check your hardware plan against the new estimate before upgrading.",
}

_ESTIMATE_ROWS: tuple[tuple[str, Callable[[Estimate], int | float]], ...] = (
    ("parameters (total)", lambda e: e.params.total),
    ("parameters (active)", lambda e: e.params.active),
    ("parameters (embedding)", lambda e: e.params.embedding),
    ("serve weights (GB)", lambda e: e.memory.serve_weights),
    ("KV cache (GB)", lambda e: e.memory.kv_cache),
    ("LoRA fine-tune (GB)", lambda e: e.memory.lora),
    ("full fine-tune (GB)", lambda e: e.memory.full_finetune),
)
MAX_EVIDENCE_LINES = 40
MAX_CELL = 60


def _cell(value: JSONValue, skip: int = 0) -> str:
    """`value` as one table cell; `skip` leading characters (a common prefix) are elided as "…"."""
    if value is None:
        return "—"
    text = (
        value
        if isinstance(value, str)
        else json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    )
    text = " ".join(text.split())
    if skip:
        text = "…" + text[skip:]
    text = text.replace("|", "\\|").replace("`", "'")
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def _num(value: JSONValue) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return _cell(value)
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


def estimate_table(before: Estimate | None, after: Estimate | None) -> str:
    """A Markdown table of the headline estimate numbers before and after, with deltas; under it,
    why card-fit verdicts are withheld when either estimate cannot be vouched for."""
    if before is None and after is None:
        return "No estimate is available for either revision."
    lines = ["| Estimate | Before | After | Δ |", "|---|---:|---:|---:|"]
    for label, get in _ESTIMATE_ROWS:
        b = get(before) if before is not None else None
        a = get(after) if after is not None else None
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


def _common_prefix(before: JSONValue, after: JSONValue) -> int:
    """For two long strings, how many leading characters to elide so the cells show where they differ."""
    if not (isinstance(before, str) and isinstance(after, str)):
        return 0
    a, b = " ".join(before.split()), " ".join(after.split())
    if max(len(a), len(b)) <= MAX_CELL:
        return 0
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return max(0, n - 10) if n > 10 else 0


def _change_lines(items: Sequence[Classified]) -> list[str]:
    lines = ["| Severity | File | Key | Change | Before | After |", "|---|---|---|---|---|---|"]
    for c in items:
        ch = c.change
        skip = _common_prefix(ch.before, ch.after)
        lines.append(
            f"| {c.severity.value} | {_cell(ch.file or '—')} | {_cell(ch.key or '—')} | {ch.kind.value} "
            f"| {_cell(ch.before, skip)} | {_cell(ch.after, skip)} |"
        )
    return lines


def _evidence(items: Sequence[Classified]) -> list[str]:
    out: list[str] = []
    for c in items:
        detail = c.change.detail.strip("\n")
        if not detail:
            continue
        lines = detail.splitlines()
        shown = lines[:MAX_EVIDENCE_LINES]
        if len(lines) > MAX_EVIDENCE_LINES:
            shown.append(f"… ({len(lines) - MAX_EVIDENCE_LINES} more lines)")
        fence = "````" if "```" in detail else "```"
        out += [
            "",
            f"**{c.change.key or c.change.file}** ({c.change.kind.value}):",
            "",
            f"{fence}diff",
            *shown,
            fence,
        ]
    return out


def render_details(
    *, subject: Subject, group: ChangeGroup, estimate_changes: Sequence[Classified]
) -> str:
    """The Markdown body of one advisory; deterministic for equal inputs; ends with a newline."""
    repo_id, repo_url, introduced = subject.repo_id, subject.url, subject.introduced
    previous = subject.previous
    top = next(c for c in group.published if c.severity is group.severity)
    since = f"since `{previous}`" if previous else "(first ingested revision)"
    label = GROUP_LABELS[group.name]
    out = [
        f"**Severity: {group.severity.value}**: {top.rationale}.",
        "",
        f"Revision [`{introduced}`]({repo_url}/commit/{introduced}) of [{repo_id}]({repo_url}) "
        f"changed its {label} {since}.",
        "",
        "## What changed",
        "",
        *_change_lines(group.published),
        "",
        *(
            f"- **{c.severity.value}** ({c.rule}): {' '.join(c.change.summary.split())}: {c.rationale}"
            for c in group.published
        ),
    ]
    evidence = _evidence(group.published)
    if evidence:
        out += ["", "## Evidence", *evidence]
    out += [
        "",
        "## Estimate",
        "",
        estimate_table(subject.estimate_before, subject.estimate_after),
    ]
    if estimate_changes:
        out += ["", *(f"- {' '.join(c.change.summary.split())}" for c in estimate_changes)]
    if group.suppressed:
        out += ["", "## Suppressed by the watchlist", ""]
        out += [
            f"- `{c.change.key or c.change.file}` ({c.change.kind.value}): {c.suppressed}"
            for c in group.suppressed
        ]
    out += [
        "",
        "## What to do",
        "",
        ADVICE[group.name],
        "",
    ]
    return "\n".join(out)
