"""Chat template diffs: the effective templates resolved as transformers does, as source and as rendered prompts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import assert_never

from tracker.diff._common import (
    SideState,
    decode_text,
    digest,
    load_json_object,
    read_side,
    short_value,
    unified,
)
from tracker.diff.conversations import CONVERSATIONS, template_variables
from tracker.diff.sandbox import (
    DEFAULT_LIMITS,
    Renderer,
    RenderLimits,
    RenderOutcome,
    RenderResult,
    render_in_process,
)
from tracker.diff.special_tokens import effective_special_tokens
from tracker.diff.tokenizer import TOKENIZER_CONFIG_FILE
from tracker.shared.domain import Artifact, Change, ChangeKind, JSONValue, Snapshot
from tracker.shared.errors import UnreadableArtifactError

TEMPLATE_FILE = "chat_template.jinja"
TEMPLATE_JSON_FILE = "chat_template.json"
TEMPLATE_DIR = "additional_chat_templates/"
DEFAULT = "default"
_ART = Artifact.CHAT_TEMPLATE


@dataclass(frozen=True)
class Templates:
    """The effective chat templates of a snapshot: name → source, name → the file it came from."""

    sources: Mapping[str, str]
    origins: Mapping[str, str]


class _Unknown(Exception):
    """A file that decides the template was not fetched or could not be read."""

    def __init__(self, file: str, reason: str, *, untracked: bool = False) -> None:
        super().__init__(reason)
        self.file = file
        self.reason = reason
        self.untracked = untracked


def _from_field(path: str, value: object) -> dict[str, str]:
    """Templates from a `chat_template` field: a string, or a list of {name, template}."""
    if isinstance(value, str):
        return {DEFAULT: value}
    if isinstance(value, list):
        out: dict[str, str] = {}
        for item in value:
            if not (
                isinstance(item, dict)
                and isinstance(item.get("name"), str)
                and isinstance(item.get("template"), str)
            ):
                raise UnreadableArtifactError(
                    f"could not read the chat template in {path}: list items must be {{name, template}} strings"
                )
            out[item["name"]] = item["template"]
        return out
    raise UnreadableArtifactError(
        f"could not read the chat template in {path}: `chat_template` is {type(value).__name__}, not a string or list"
    )


def resolve_templates(snap: Snapshot) -> Templates:
    """The effective templates, in transformers' order of precedence.

    `chat_template.jinja` (default) and `additional_chat_templates/*.jinja` (named) over
    `chat_template.json`'s `chat_template`, over tokenizer_config.json's `chat_template` (a string,
    or a list of {name, template}). Raises _Unknown when a deciding file is unreadable or unfetched.
    """
    sources: dict[str, str] = {}
    origins: dict[str, str] = {}

    def side(path: str, parse: object) -> object:
        s = read_side(snap, path, parse)
        if s.state is SideState.UNREADABLE:
            raise _Unknown(path, s.reason)
        if s.state is SideState.UNTRACKED:
            raise _Unknown(path, f"{path} was not fetched", untracked=True)
        return s.value if s.state is SideState.OK else None

    jinja = side(TEMPLATE_FILE, decode_text)
    if isinstance(jinja, str):
        sources[DEFAULT], origins[DEFAULT] = jinja, TEMPLATE_FILE
    for path in sorted(
        p
        for p in snap.paths | set(snap.files)
        if p.startswith(TEMPLATE_DIR) and p.endswith(".jinja")
    ):
        text = side(path, decode_text)
        if isinstance(text, str):
            name = path[len(TEMPLATE_DIR) : -len(".jinja")]
            sources[name], origins[name] = text, path
    if sources:
        return Templates(sources, origins)
    for path in (TEMPLATE_JSON_FILE, TOKENIZER_CONFIG_FILE):
        doc = side(path, load_json_object)
        if isinstance(doc, dict) and doc.get("chat_template") is not None:
            try:
                found = _from_field(path, doc["chat_template"])
            except UnreadableArtifactError as exc:
                raise _Unknown(path, str(exc)) from exc
            return Templates(found, dict.fromkeys(found, path))
    return Templates({}, {})


def _field(name: str) -> str:
    """Where in a JSON file template `name` sits, for diff headers (`chat_template`, `chat_template[rag]`)."""
    return "chat_template" if name == DEFAULT else f"chat_template[{name}]"


def _key(name: str) -> str:
    return "source" if name == DEFAULT else name


def render_all(
    source: str,
    special_tokens: Mapping[str, object],
    limits: RenderLimits,
    render: Renderer = render_in_process,
) -> dict[str, RenderResult]:
    """Render `source` over every canonical conversation: conversation id → RenderResult.

    One `render` call per template and side; every outcome is deterministic (`tracker.diff.sandbox`);
    the backstop renderer raises RetryLaterError instead of returning when it is hit.
    """
    variables = [template_variables(conv, special_tokens) for conv in CONVERSATIONS]
    results = render(source, variables, limits)
    return {conv.id: r for conv, r in zip(CONVERSATIONS, results, strict=True)}


def diff_chat_template(
    before: Snapshot | None,
    after: Snapshot,
    limits: RenderLimits = DEFAULT_LIMITS,
    render: Renderer = render_in_process,
) -> list[Change]:
    """Template source changes (unified diff), BROKEN templates, and RENDERED prompt changes.

    Keys: `source` for the default template, the template name for named ones; rendered changes
    use the conversation id (`<name>:<id>` for named templates). On the first revision only an
    unreadable template is reported; a template that cannot be known at either side is skipped.
    """
    try:
        new = resolve_templates(after)
    except _Unknown as exc:
        if exc.untracked:  # not fetched: nothing is known, nothing is claimed
            return []
        if before is not None:
            try:
                resolve_templates(before)
            except _Unknown as old_exc:
                if old_exc.reason == exc.reason:
                    return []
        return [
            Change(_ART, ChangeKind.UNREADABLE, exc.file, "source", None, exc.reason, exc.reason)
        ]
    if before is None:
        return []
    try:
        old = resolve_templates(before)
    except _Unknown as exc:
        if not new.sources or exc.untracked:
            return []
        return [
            Change(
                _ART,
                ChangeKind.CHANGED,
                new.origins.get(DEFAULT, next(iter(new.origins.values()))),
                "source",
                exc.reason,
                None,
                f"chat template is readable again (was: {exc.reason})",
            )
        ]
    old_tokens, new_tokens = effective_special_tokens(before), effective_special_tokens(after)
    names = sorted(set(old.sources) | set(new.sources), key=lambda n: (n != DEFAULT, n))
    out: list[Change] = []
    for name in names:
        out.extend(_diff_one(name, old, new, old_tokens, new_tokens, limits, render))
    return out


def _diff_one(
    name: str,
    old: Templates,
    new: Templates,
    old_tokens: Mapping[str, object],
    new_tokens: Mapping[str, object],
    limits: RenderLimits,
    render: Renderer,
) -> list[Change]:
    key = _key(name)
    label = "chat template" if name == DEFAULT else f"chat template {name!r}"
    a, b = old.sources.get(name), new.sources.get(name)
    if a is None and b is not None:
        return [
            Change(
                _ART,
                ChangeKind.ADDED,
                new.origins[name],
                key,
                None,
                _ident(b, new.origins[name]),
                f"{label} added (in {new.origins[name]})",
                b if len(b) < 20_000 else "",
            )
        ]
    if b is None and a is not None:
        return [
            Change(
                _ART,
                ChangeKind.REMOVED,
                old.origins[name],
                key,
                _ident(a, old.origins[name]),
                None,
                f"{label} removed (was in {old.origins[name]})",
            )
        ]
    assert a is not None and b is not None
    file = new.origins[name]
    out: list[Change] = []
    if a == b and dict(old_tokens) == dict(new_tokens):
        return out
    before_r = render_all(a, old_tokens, limits, render)
    after_r = render_all(b, new_tokens, limits, render)
    if all(r.outcome is RenderOutcome.SYNTAX for r in after_r.values()):
        if not all(r.outcome is RenderOutcome.SYNTAX for r in before_r.values()):
            err = next(iter(after_r.values())).error
            out.append(
                Change(
                    _ART,
                    ChangeKind.BROKEN,
                    file,
                    key,
                    "parses",
                    err,
                    f"{label} no longer parses: {err}",
                )
            )
    else:
        out.extend(_rendered_changes(name, label, file, before_r, after_r))
    if a != b:
        differs = [
            c.key.split(":")[-1] for c in out if c.kind in (ChangeKind.RENDERED, ChangeKind.BROKEN)
        ]
        if any(c.key == key and c.kind is ChangeKind.BROKEN for c in out):
            differs = list(after_r)  # no longer parses: every conversation is affected
        outcome = render_outcome(before_r, after_r, differs)
        source = Change(
            _ART,
            ChangeKind.CHANGED,
            file,
            key,
            _ident(a, old.origins[name]),
            _ident(b, file),
            f"{label} source changed ({_line_delta(a, b)}); {outcome_phrase(outcome)}",
            "\n".join(
                [
                    *_outcome_lines(outcome),
                    unified(a, b, file if file.endswith(".jinja") else f"{file}#{_field(name)}"),
                ]
            ),
            {"rendered": outcome},
        )
        out.insert(0, source)
    return out


def _rendered_changes(
    name: str,
    label: str,
    file: str,
    before_r: Mapping[str, RenderResult],
    after_r: Mapping[str, RenderResult],
) -> list[Change]:
    out: list[Change] = []
    for conv_id, old_r in before_r.items():
        new_r = after_r[conv_id]
        if old_r.shown() == new_r.shown():
            continue
        ckey = conv_id if name == DEFAULT else f"{name}:{conv_id}"
        if old_r.ok and _breaks(new_r.outcome):
            out.append(
                Change(
                    _ART,
                    ChangeKind.BROKEN,
                    file,
                    ckey,
                    short_value(old_r.output),
                    new_r.shown(),
                    f"{label} no longer renders `{conv_id}`: {new_r.outcome.value}: {new_r.error}",
                )
            )
            continue
        out.append(
            Change(
                _ART,
                ChangeKind.RENDERED,
                file,
                ckey,
                short_value(old_r.shown()),
                short_value(new_r.shown()),
                f"{label} renders `{conv_id}` differently ({_where(old_r.shown(), new_r.shown())})",
                _render_detail(old_r.shown(), new_r.shown(), conv_id),
            )
        )
    return out


def _breaks(outcome: RenderOutcome) -> bool:
    """Whether a render that used to work and now ends with `outcome` is a BROKEN template (a
    deliberate raise_exception is the template speaking: a RENDERED change, not a breakage)."""
    match outcome:
        case RenderOutcome.OK | RenderOutcome.RAISED:
            return False
        case (
            RenderOutcome.SYNTAX
            | RenderOutcome.ERROR
            | RenderOutcome.SECURITY
            | RenderOutcome.LIMIT
            | RenderOutcome.BUDGET
        ):
            return True
        case _:
            assert_never(outcome)


def render_outcome(
    before_r: Mapping[str, RenderResult],
    after_r: Mapping[str, RenderResult],
    differs: list[str],
) -> dict[str, JSONValue]:
    """What a template change did to the canonical conversations (the source change's `facts`).

    `same`: rendered in both revisions to the same prompt; `differs`: reported as their own
    RENDERED/BROKEN changes; `fails_both`: could not be rendered in either revision (id → the
    error at the new revision), so the change's effect on them is unknown.
    """
    same = [c for c in before_r if c not in differs and before_r[c].ok and after_r[c].ok]
    fails = {
        c: f"{after_r[c].outcome.value}: {after_r[c].error}"
        for c in before_r
        if c not in differs and not before_r[c].ok and not after_r[c].ok
    }
    return {"conversations": len(before_r), "same": same, "differs": differs, "fails_both": fails}


def outcome_phrase(outcome: Mapping[str, JSONValue]) -> str:
    """`rendered output unchanged for 9 conversations` / `renders differently for 2 of 9 conversations`,
    with the conversations that fail in both revisions named."""
    same, differs, fails = outcome["same"], outcome["differs"], outcome["fails_both"]
    total = outcome["conversations"]
    if differs:
        text = f"renders differently for {len(differs)} of {total} conversations"
    else:
        text = f"rendered output unchanged for {len(same)} conversation{'s' * (len(same) != 1)}"
    if fails:
        n = len(fails)
        text += (
            f"; {n} fail{'s' * (n == 1)} to render in both revisions ({', '.join(sorted(fails))})"
        )
    return text


def _outcome_lines(outcome: Mapping[str, JSONValue]) -> list[str]:
    lines = [f"# rendered output: {outcome_phrase(outcome)}"]
    lines += [
        f"# fails to render in both revisions: {conv}: {err}"
        for conv, err in sorted(outcome["fails_both"].items())
    ]
    return lines


def _ident(source: str, file: str) -> dict[str, object]:
    return {"file": file, "sha256": digest(source), "lines": source.count("\n") + 1}


def _line_delta(a: str, b: str) -> str:
    added = removed = 0
    for line in unified(a, b, "t").splitlines()[2:]:
        if line.startswith("+"):
            added += 1
        elif line.startswith("-"):
            removed += 1
    return f"+{added} -{removed} lines"


def _where(a: str, b: str) -> str:
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    return f"first difference at character {i}; {len(a)} → {len(b)} characters"


def _render_detail(a: str, b: str, conv_id: str) -> str:
    """Evidence: a line diff of the two whole prompts (lines are never cut)."""
    return unified(a, b, f"rendered/{conv_id}")
