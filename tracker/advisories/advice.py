"""What kind of change an advisory is about, from the evidence at hand, and what to do about that kind (pure).

Kinds: a fix of an earlier defect, a regression, new code to review, a new default, a change the
commit calls a fix, or a change with no evidence either way. The evidence: whether the change
restores a value an earlier advisory changed (named), what the chat template rendered before and
after over the canonical conversations (a message the old template rendered twice or dropped),
whether a template no longer renders, consistency findings introduced or resolved, the introducing
commit's title and message, and the artifact. The commit's words alone never make a fix: calling
the previous revision broken needs evidence tracker can show (a restored earlier value, a resolved
consistency finding, a rendered-template defect removed). Every kind's advice names the revisions
to pin or to take, and offers both directions where both apply.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from tracker.advisories.groups import ChangeGroup, Subject
from tracker.advisories.values import inline
from tracker.diff.conversations import CONVERSATIONS
from tracker.preflight.delta import SINCE
from tracker.shared.domain import Artifact, ChangeKind, JSONValue


class Kind(StrEnum):
    """What kind of change an advisory is about (the advice depends on it)."""

    FIX = "fix"
    REGRESSION = "regression"
    NEW_CODE = "new code"
    NEW_DEFAULT = "new default"
    CLAIMED_FIX = "claimed fix"
    CHANGE = "change"


KIND_TITLES: Mapping[Kind, str] = {
    Kind.FIX: "a fix of an earlier defect",
    Kind.REGRESSION: "a regression",
    Kind.NEW_CODE: "new code to review",
    Kind.NEW_DEFAULT: "a new default",
    Kind.CLAIMED_FIX: "a change the commit calls a fix (no evidence that the previous revision "
    "was broken)",
    Kind.CHANGE: "a change with no evidence that it fixes or breaks something",
}


@dataclass(frozen=True)
class Restore:
    """A change of this revision that sets a value back to what it was before an earlier advisory."""

    advisory_id: str
    key: str
    file: str


@dataclass(frozen=True)
class Assessment:
    """The kind of an advisory's change and the evidence for it (sentences, in order of weight)."""

    kind: Kind
    evidence: tuple[str, ...]


CHECKS: Mapping[Artifact, str] = {
    Artifact.CONFIG: "check that your code, adapters and serving configuration match the new config",
    Artifact.GENERATION_CONFIG: "check your outputs under the new generation defaults",
    Artifact.TOKENIZER: "re-validate tokenization, and do not mix the new tokenizer with weights, "
    "caches or fine-tunes made with the old one",
    Artifact.SPECIAL_TOKENS: "check stop and pad handling in your generation and training code",
    Artifact.CHAT_TEMPLATE: "re-render your prompts and re-run your prompt tests",
    Artifact.WEIGHTS: "re-validate outputs and memory",
    Artifact.CUSTOM_CODE: "review the new code before loading it with `trust_remote_code=True`",
    Artifact.EXECUTABLE: "review the pickle-based files before loading them (or load safetensors "
    "only)",
    Artifact.MODEL_CARD: "review the model card changes (license and access terms in particular)",
    Artifact.PROCESSOR: "re-run your preprocessing tests",
    Artifact.ESTIMATE: "re-check your hardware plan against the new estimate",
    Artifact.LINEAGE: "re-convert from the base model's newer revision, or set its new values "
    "where you run this derivative",
}
"""What to check before taking a change, by the artifact it changes."""

_FIX_WORDS = re.compile(
    r"\b(fix(es|ed|ing)?|bug(s|fix)?|correct(s|ed|ion)?|revert(s|ed)?|restor(e|es|ed|ing)|"
    r"typo|wrong|mistake|broken|repair(s|ed)?)\b",
    re.IGNORECASE,
)
_ROLE_NAMES = {"system": "system message", "user": "user message", "assistant": "assistant reply"}


def _quote(text: str) -> str:
    """Upstream `text` quoted on one line, as literal Markdown text (`values.inline`)."""
    return "“" + inline(" ".join(text.split())) + "”"


def _message_counts(conv_id: str, rendered: JSONValue) -> list[tuple[str, str, int]]:
    """(role, content, times the content appears in `rendered`) for each message with text content
    of the canonical conversation `conv_id`; empty when the prompt is not known whole."""
    conv = next((c for c in CONVERSATIONS if c.id == conv_id), None)
    if conv is None or not isinstance(rendered, str) or rendered.startswith("<string of "):
        return []
    out = []
    seen: set[str] = set()
    for m in conv.messages:
        content = m.get("content")
        if not isinstance(content, str) or not content or content in seen:
            continue
        seen.add(content)
        out.append((str(m.get("role")), content, rendered.count(content)))
    return out


def _times(n: int) -> str:
    return {0: "not at all", 1: "once", 2: "twice"}.get(n, f"{n} times")


def template_evidence(group: ChangeGroup) -> tuple[list[str], list[str]]:
    """(fix evidence, regression evidence) from a chat template's rendered prompts before and after:
    a message the old template rendered twice (or not at all) that the new one renders once is a
    fix; the reverse, or a template that no longer renders, is a regression."""
    fixed: dict[tuple[str, int, int], list[str]] = {}
    broke: dict[tuple[str, int, int], list[str]] = {}
    broken: list[str] = []
    for c in group.published:
        ch = c.change
        conv_id = ch.key.split(":")[-1]
        if ch.kind is ChangeKind.BROKEN:
            broken.append(conv_id)
            continue
        if ch.kind is not ChangeKind.RENDERED:
            continue
        before = _message_counts(conv_id, ch.before)
        after = _message_counts(conv_id, ch.after)
        if not before or len(before) != len(after):
            continue
        for (role, _, nb), (_, _, na) in zip(before, after, strict=True):
            what = _ROLE_NAMES.get(role, f"{role} message")
            if nb != 1 and na == 1:
                fixed.setdefault((what, nb, na), []).append(conv_id)
            elif nb == 1 and na != 1:
                broke.setdefault((what, nb, na), []).append(conv_id)
    fix = [
        f"the previous template rendered the {what} {_times(nb)} in {_convs(ids)}; this revision's "
        f"renders it {_times(na)}"
        for (what, nb, na), ids in fixed.items()
    ]
    reg = [
        f"this revision's template renders the {what} {_times(na)} in {_convs(ids)} (the previous "
        f"one rendered it {_times(nb)})"
        for (what, nb, na), ids in broke.items()
    ]
    if broken:
        reg.insert(0, f"the template no longer renders {_convs(broken)}")
    return fix, reg


def _convs(ids: Sequence[str]) -> str:
    names = ", ".join(f"`{i}`" for i in dict.fromkeys(ids))
    return f"{names} ({len(set(ids))} canonical conversation{'s' * (len(set(ids)) != 1)})"


def assess(
    subject: Subject,
    group: ChangeGroup,
    restores: Sequence[Restore] = (),
    findings: Sequence[str] = (),
    resolved: Sequence[str] = (),
) -> Assessment:
    """The kind of `group`'s change. Regression evidence (a template that no longer renders or
    renders a message wrongly, a consistency finding introduced) outranks everything; then new
    code; then fix evidence (a restored earlier value, a template defect gone, a consistency
    finding of the previous revision resolved), the commit's words supporting it; then a new
    default (generation defaults); then a change the commit calls a fix (its words alone); else a
    change."""
    fix, reg = template_evidence(group) if group.name is Artifact.CHAT_TEMPLATE else ([], [])
    reg += list(findings)
    for r in restores:
        fix.append(f"`{r.key}` is back to the value it had before {r.advisory_id}")
    if resolved:
        which = "a finding" if len(resolved) == 1 else f"{len(resolved)} findings"
        fix.append(f"it resolves {which} of the previous revision: {'; '.join(resolved)}")
    commit = subject.commit
    said = ""
    if commit is not None:
        if _FIX_WORDS.search(commit.title):
            said = f"the commit title calls it a fix: {_quote(commit.title)}"
        elif _FIX_WORDS.search(commit.message):
            said = "the commit message calls it a fix"
    if reg:
        return Assessment(Kind.REGRESSION, tuple(reg + fix))
    if group.name in (Artifact.CUSTOM_CODE, Artifact.EXECUTABLE):
        return Assessment(Kind.NEW_CODE, tuple(["it changes code that runs when the model loads"]))
    if fix:
        return Assessment(Kind.FIX, tuple(fix + ([said] if said else [])))
    if group.name is Artifact.GENERATION_CONFIG:
        keys = ", ".join(f"`{c.change.key}`" for c in group.published if c.change.key)
        return Assessment(
            Kind.NEW_DEFAULT,
            (f"calls that do not set {keys} themselves get the new generation defaults",)
            + ((said,) if said else ()),
        )
    if said:
        return Assessment(
            Kind.CLAIMED_FIX,
            (
                said,
                "tracker found no restored earlier value, resolved consistency finding or "
                "rendered-template defect that shows the previous revision was broken",
            ),
        )
    return Assessment(Kind.CHANGE, ())


def _py(value: JSONValue) -> str:
    """A JSON value as the Python literal one would pass to `generate`."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    return repr(value)


def advice(subject: Subject, group: ChangeGroup, assessment: Assessment) -> list[str]:
    """The "What to do" paragraphs for `group`, by the kind of its change."""
    check = CHECKS[group.name]
    new, prev = subject.introduced, subject.previous
    take = f"upgrade to `{new[:12]}` or later"
    if prev is None:
        return [
            "This is the first revision tracker ingested of this repo: there is no earlier one to "
            f"pin. Before you depend on it, {check}."
        ]
    if subject.broken_before:
        # the previous revision has an open advisory's consistency findings: it is no refuge
        named = ", ".join(subject.broken_before)
        return [
            f"Do not pin the previous revision `{prev[:12]}` to avoid this change: it has the "
            f"consistency findings of {named} (open), as does this revision. To take "
            f"the change, {take} once you {check}; for the findings, see {named}."
        ]
    if subject.fixed_here:
        # the previous revision has the defect of an advisory this revision fixes: pinning it
        # to keep the old behaviour, or to avoid this change, brings the defect back
        named = ", ".join(subject.fixed_here)
        defect = (
            f"the previous revision `{prev[:12]}` has the consistency findings of {named}, "
            "which this revision resolves"
        )
        if assessment.kind is Kind.FIX:
            return [
                f"To take the fix, {take} and {check}. There is no revision to pin to keep the "
                f"old behaviour: {defect}."
            ]
        return [
            f"Do not pin the previous revision to avoid this change: {defect}. To take the "
            f"change, {take} once you {check}."
        ]
    if group.published and all(c.rule == "preflight-answer-found" for c in group.published):
        # answers the previous revision could not give: nothing to keep, and pinning a revision
        # that lacked them (no config.json, no safetensors) is no advice
        return [
            "Nothing that worked breaks: the previous revision could not answer this. Plan the "
            "download, the cards and your LoRA targets for this revision from the answers above."
        ]
    lead, earlier = _since(group, prev)
    # every change compared with a revision before the previous: that one; a previous revision
    # that does not load (`tracker.advisories.loading`: no readable config.json, or no weights
    # `from_pretrained` reads): the newest earlier one that loads and lacks the changes
    kept = earlier or subject.kept or prev
    pin = f'pin `{kept[:12]}` (`revision="{kept}"` in `from_pretrained`)'
    if earlier is None and subject.kept is not None:
        lead.append(
            f"The previous revision `{prev[:12]}` has {subject.previous_lacks}, so it cannot be "
            f"loaded; `{kept[:12]}` is the newest earlier revision that can, and none of these "
            "changes holds there."
        )
    if earlier is None and subject.nothing_to_pin:
        return [
            " ".join(
                [
                    *lead,
                    *_OPENERS[assessment.kind],
                    "No revision tracker ingested before this one both loads (a readable "
                    "config.json and the weights `from_pretrained` reads for it; the previous "
                    f"revision `{prev[:12]}` has {subject.previous_lacks}) and lacks "
                    "these changes, so there is none to pin. To take the change, "
                    + (
                        f"{take}."
                        if assessment.kind is Kind.NEW_CODE
                        else f"{take} once you {check}."
                    ),
                ]
            )
        ]
    restore = _restore(subject, group, pin) if assessment.kind is Kind.NEW_DEFAULT else ""
    first, *rest = _by_kind(
        assessment.kind, group, pin, take, check, earlier is not None, restore, subject.kept
    )
    return [" ".join([*lead, first]), *rest]


_OPENERS: Mapping[Kind, tuple[str, ...]] = {
    Kind.FIX: (),
    Kind.REGRESSION: (),
    Kind.NEW_DEFAULT: (),
    Kind.CHANGE: (),
    Kind.NEW_CODE: (
        "Review the new code before loading this revision with `trust_remote_code=True`.",
    ),
    Kind.CLAIMED_FIX: (
        "The commit calls this a fix; nothing tracker checks shows the previous revision "
        "misbehaving.",
    ),
}
"""What advice says first, by kind, where there is no revision to pin."""


def _since(group: ChangeGroup, prev: str) -> tuple[list[str], str | None]:
    """For preflight answers the previous revision could not give, compared with the last
    revision before it that could (`tracker.preflight.delta.SINCE`): a sentence naming it, and
    that revision when every change of the group is compared with it (then it is the one to pin:
    the previous revision, with no config.json or safetensors, keeps nothing)."""
    since = [c.change.facts.get(SINCE) if c.change.facts else None for c in group.published]
    shas = sorted({str(s) for s in since if s})
    if not shas:
        return [], None
    named = ", ".join(f"`{s[:12]}`" for s in shas)
    if len(shas) == 1 and all(since):
        return [
            f"The previous revision `{prev[:12]}` could not answer this; the answers above are "
            f"compared with {named}, the last revision before it that could."
        ], shas[0]
    keys = ", ".join(f"`{c.change.key}`" for c, s in zip(group.published, since, strict=True) if s)
    return [
        f"The previous revision `{prev[:12]}` could not answer {keys}: they are compared with "
        f"{named}, the last revision before it that could; pin that one to keep those answers."
    ], None


def generation_kwargs(subject: Subject, group: ChangeGroup) -> dict[str, JSONValue] | None:
    """The `generate()` keyword arguments that give back the previous revision's effective
    generation defaults for every field `group` names, `do_sample` included: each such field
    whose effective value differs between the two revisions, with its old effective value (a
    field the old files left unset: the global default `generate()` applied). None when either
    revision's effective defaults cannot be known; empty when nothing differs."""
    old, new = subject.generation_before, subject.generation_after
    if old is None or new is None:
        return None
    named = [c.change.key.rpartition(".")[2] for c in group.published if c.change.key]
    fields = [k for k in dict.fromkeys([*named, "do_sample"]) if k in old]
    return {k: old[k] for k in fields if old[k] != new.get(k)}


def generate_call(kwargs: Mapping[str, JSONValue]) -> str:
    """`model.generate(..., do_sample=False, temperature=0.9)`: a call one can paste."""
    args = ", ".join(f"{k}={_py(v)}" for k, v in kwargs.items())
    return f"`model.generate(..., {args})`"


def _restore(subject: Subject, group: ChangeGroup, pin: str) -> str:
    """How to keep the old generation defaults: the call that restores them, or the pin."""
    kwargs = generation_kwargs(subject, group)
    if kwargs is None:
        return (
            f"{pin} (the previous revision's effective generation defaults could not be known "
            "here, so no values to pass are named)"
        )
    if not kwargs:
        return (
            f"nothing needs passing: `generate()` uses the same effective values for these "
            f"fields at both revisions (transformers' precedence); or {pin}"
        )
    return (
        f"pass the previous revision's effective values to every call, "
        f"{generate_call(kwargs)} (or set them on `model.generation_config`), or {pin}"
    )


def _by_kind(
    kind: Kind,
    group: ChangeGroup,
    pin: str,
    take: str,
    check: str,
    since: bool,
    restore: str = "",
    kept: str | None = None,
) -> list[str]:
    stay = (
        "the last revision that had the earlier answers"
        if since
        else "the newest earlier revision that loads"
        if kept
        else "the previous revision"
    )
    match kind:
        case Kind.FIX:
            return [
                f"To take the fix, {take} and {check}. To keep the old behaviour (for example "
                f"while prompts or fine-tunes made with it are still in use), {pin}."
            ]
        case Kind.REGRESSION:
            return [
                f"Stay on {stay}: {pin} until a later revision fixes this "
                "(tracker marks this advisory fixed when one does). If you have already "
                f"upgraded, {check}."
            ]
        case Kind.NEW_CODE:
            return [
                f"Review the new code before loading this revision with `trust_remote_code=True`. "
                f"To keep running the code you reviewed, {pin} and pass the same `code_revision=`."
            ]
        case Kind.NEW_DEFAULT:
            return [
                f"To keep the old behaviour, {restore}. To take the new defaults, {take} and {check}."
            ]
        case Kind.CLAIMED_FIX:
            return [
                f"The commit calls this a fix; nothing tracker checks shows the previous revision "
                f"misbehaving. To take the change, {take} once you {check}. To keep the old "
                f"behaviour, {pin}."
            ]
        case Kind.CHANGE:
            return [
                f"To keep the old behaviour, {pin}. To take the change, {take} once you {check}."
            ]
