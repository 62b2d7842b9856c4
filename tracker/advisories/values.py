"""Values in an advisory's text, always whole: inline when short, else a line diff (text) or the
entries that changed (lists, maps) (pure).

Nothing here cuts a value: a value too long for a table cell is described in the cell ("text, 12
lines") and shown whole, as a diff against the other side, under the table.
"""

from __future__ import annotations

import difflib
import json
import re
from collections import Counter
from collections.abc import Mapping

from tracker.shared.domain import JSONValue

MAX_INLINE = 60
"""The longest value (as text) a table cell shows; longer ones are shown whole under the table."""


def json_text(value: JSONValue) -> str:
    """`value` as compact JSON text (sorted keys, UTF-8 as is)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _text(value: JSONValue) -> str:
    return value if isinstance(value, str) else json_text(value)


def code(text: str) -> str:
    """`text` as a Markdown code span that survives a table cell: a fence longer than any backtick
    run inside, `|` escaped (GFM strips the backslash in a table), padded when it starts or ends
    with a backtick or a space."""
    run = longest = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if text[:1] in ("`", " ") or text[-1:] in ("`", " ") else ""
    escaped = text.replace("|", "\\|")
    return f"{fence}{pad}{escaped}{pad}{fence}"


_ALWAYS = frozenset("\\`*[]<>|~&")
_LINE_START = re.compile(r"^(\s*|\s*\d+)([#=+-]|(?<=\d)[.)])")


def inline(text: str) -> str:
    """Upstream `text` (a commit title or message line, a key, a value, a summary) as literal
    Markdown text: every character that can open a construct is backslash-escaped (CommonMark
    renders an escaped ASCII punctuation character as itself), so `![i](http://…)` is no image,
    `<img>` no HTML, `[x](y)` no link, `*a*` no emphasis, `&copy;` no entity, `| a |` no table
    cell; `_` only where it could start or end emphasis (not inside a word, so `eos_token_id`
    stays as it reads); a line-start `#`, `-`, `+`, `=` or `1.` no heading or list item."""
    return _LINE_START.sub(lambda m: m[1] + "\\" + m[2], _escaped(text), count=1)


def _escaped(text: str) -> str:
    """`inline` without the line-start rule (text that does not start a line)."""
    out = []
    for i, ch in enumerate(text):
        if ch in _ALWAYS:
            out.append("\\" + ch)
        elif ch == "_":
            before, after = text[i - 1 : i], text[i + 1 : i + 2]
            intraword = before.isalnum() and after.isalnum()
            out.append(ch if intraword else "\\_")
        else:
            out.append(ch)
    return "".join(out)


_TICKS = re.compile(r"`+")


def literal(text: str) -> str:
    """Prose that mixes tracker's code spans with upstream words (a change's summary, a rule's
    rationale quoting values, a finding), placed after other text on its line (a bullet's or the
    severity line's label): every code span kept as written (CommonMark shows its content
    literally), everything outside escaped as `inline` does. A backtick run that closes no
    span is escaped too, so no upstream text can open an image, a link, HTML or emphasis."""
    out: list[str] = []
    pos = 0

    def plain(start: int, end: int) -> str:
        return _escaped(text[start:end])

    while pos < len(text):
        opening = _TICKS.search(text, pos)
        if opening is None:
            break
        run = opening.group()
        closing = next((m for m in _TICKS.finditer(text, opening.end()) if m.group() == run), None)
        if closing is None:  # no span: the run is literal text
            out.append(plain(pos, opening.end()))
            pos = opening.end()
            continue
        out.append(plain(pos, opening.start()) if opening.start() > pos else "")
        out.append(text[opening.start() : closing.end()])
        pos = closing.end()
    out.append(plain(pos, len(text)) if pos < len(text) else "")
    return "".join(out)


def fits_inline(value: JSONValue) -> bool:
    """Whether `value` is shown whole in a table cell (one line of at most MAX_INLINE characters)."""
    if value is None:
        return True
    text = _text(value)
    return "\n" not in text and len(text) <= MAX_INLINE


def cell(value: JSONValue) -> str:
    """A table cell: the whole value as a code span, "—" for none, or a description of a value
    shown whole under the table."""
    if value is None:
        return "—"
    if fits_inline(value):
        return code(_text(value))
    return describe(value)


def describe(value: JSONValue) -> str:
    """A few words for a value too long for a cell: "text, 3 lines, 287 characters", "list of 4"."""
    if isinstance(value, str):
        lines = value.count("\n") + 1
        return f"text, {lines} line{'s' * (lines != 1)}, {len(value):,} characters (below)"
    if isinstance(value, list):
        return f"list of {len(value)} (below)"
    if isinstance(value, Mapping):
        return f"map of {len(value)} key{'s' * (len(value) != 1)} (below)"
    return "(below)"


def _flatten(value: JSONValue, prefix: str = "") -> dict[str, JSONValue]:
    """A map as dotted paths to its non-map leaves (an empty map is a leaf)."""
    if isinstance(value, Mapping) and value:
        out: dict[str, JSONValue] = {}
        for k in sorted(value):
            out.update(_flatten(value[k], f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def _map_diff(before: Mapping[str, JSONValue], after: Mapping[str, JSONValue]) -> list[str]:
    b, a = _flatten(before), _flatten(after)
    out: list[str] = []
    for path in sorted(b.keys() | a.keys()):
        if path in b and path in a and json_text(b[path]) == json_text(a[path]):
            continue
        if path in b:
            out.append(f"-{path}: {json_text(b[path])}")
        if path in a:
            out.append(f"+{path}: {json_text(a[path])}")
    return out or ["(same entries)"]


def _list_diff(before: list[JSONValue], after: list[JSONValue]) -> list[str]:
    b = Counter(json_text(v) for v in before)
    a = Counter(json_text(v) for v in after)
    if a == b:
        return [
            f"(same {len(before)} entries in a new order)",
            f"-{json_text(before)}",
            f"+{json_text(after)}",
        ]
    return [*_only_in(before, b - a, "-"), *_only_in(after, a - b, "+")]


def _only_in(values: list[JSONValue], extra: Counter[str], mark: str) -> list[str]:
    """The entries of `values` counted in `extra` (in their order), each marked."""
    left = Counter(extra)
    out: list[str] = []
    for text in (json_text(v) for v in values):
        if left[text] > 0:
            left[text] -= 1
            out.append(f"{mark}{text}")
    return out


def value_diff(before: JSONValue, after: JSONValue) -> list[str]:
    """The lines of a `diff` block showing what changed between two whole values.

    Text: a unified line diff (one `-`/`+` pair for one-line text); maps: the dotted paths that
    changed, were added or removed; lists: the entries removed and added (or the same entries in a
    new order); anything else: the whole values as JSON, one line each.
    """
    if isinstance(before, str) and isinstance(after, str):
        if "\n" not in before and "\n" not in after:
            return [f"-{before}", f"+{after}"]
        return list(
            difflib.unified_diff(
                before.splitlines(), after.splitlines(), "before", "after", lineterm="", n=2
            )
        )
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        return _map_diff(before, after)
    if isinstance(before, list) and isinstance(after, list):
        return _list_diff(before, after)
    out: list[str] = []
    if before is not None:
        out += [f"-{line}" for line in _text(before).splitlines() or [""]]
    if after is not None:
        out += [f"+{line}" for line in _text(after).splitlines() or [""]]
    return out


def fence_for(lines: list[str]) -> str:
    """A code fence longer than any backtick fence inside `lines`."""
    # a line indented by up to three spaces closes a fence too (a diff's context line is one)
    bare = (s.lstrip(" ") for s in lines if len(s) - len(s.lstrip(" ")) <= 3)
    longest = max((len(b) - len(b.lstrip("`")) for b in bare), default=0)
    return "`" * max(3, longest + 1)
