"""Size estimates for the chat-template sandbox: how big a value, or a filter's result, would be."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import jinja2
import jinja2.utils


class LimitExceeded(jinja2.exceptions.SecurityError):
    """An operation would build something larger than the limits allow."""


# %-style: a width or precision of 7+ digits or taken from the arguments (`*`);
# {}-style: the same inside a replacement field's spec, or a nested field (`{:{}}`).
_BIG_FORMAT = re.compile(
    r"%[#0\- +]*(?:\*|\d{7,})|%[#0\- +]*\d*\.(?:\*|\d{7,})|\{[^{}]*:[^{}]*(?:\d{7,}|\{)"
)


def check_format(fmt: str) -> None:
    """Raise LimitExceeded for a format string whose output size the arguments cannot bound."""
    if _BIG_FORMAT.search(fmt):
        raise LimitExceeded("format string with an oversized or argument-given width or precision")


MAX_STEPS = 20_000
"""weight() looks at no more than this many values: anything larger counts as over the budget."""


def weigh(value: Any, budget: int) -> tuple[int, int]:
    """(size, visits): an upper-bound-ish size of `value` once rendered (characters, items, digits),
    and how many values were looked at to find it. Computed iteratively, stopping as soon as the
    size exceeds `budget` (so it costs O(budget) at most).

    Strings count their length, containers their items plus their elements' weights, namespaces
    their attributes, ints their decimal digits; more than MAX_STEPS values count as over the
    budget (a check stays cheap). A container referenced twice counts twice (its repr is printed
    twice: `[x, x]` doubling must not look small); every visit adds at least 1, so cycles and
    shared structure end when the budget runs out. Types are tested with `type()`, never
    `isinstance`, which would run a Namespace's own `__getattribute__`. `visits` is what the
    sandbox charges to the render's step budget for the check itself (it is Python work).
    """
    total = 0
    steps = 0
    stack = [value]
    while stack:
        steps += 1
        if steps > MAX_STEPS:
            return budget + 1, steps
        v = stack.pop()
        t = type(v)
        if issubclass(t, str | bytes):
            total += len(v)
        elif t is bool or v is None:
            total += 1
        elif issubclass(t, int):
            total += v.bit_length() // 3 + 1
        elif t is range:
            total += len(v)
        elif issubclass(t, list | tuple | set | frozenset | dict | jinja2.utils.Namespace):
            if issubclass(t, jinja2.utils.Namespace):
                v = object.__getattribute__(v, "_Namespace__attrs")
            total += 1 + len(v)
            if total > budget:
                return total, steps
            if isinstance(v, dict):
                stack.extend(v.keys())
                stack.extend(v.values())
            else:
                stack.extend(v)
        else:
            total += 1
        if total > budget:
            return total, steps
    return total, steps


def weight(value: Any, budget: int) -> int:
    """The size part of `weigh(value, budget)`."""
    return weigh(value, budget)[0]


def estimate(name: str, args: list[Any], kwargs: Mapping[str, Any], budget: int) -> int:
    """Estimated result size of filter or str method `name` called with `args`/`kwargs`.

    0 for the many filters that cannot grow their input beyond its (already checked) size.
    """
    first = args[0] if args else None
    rest = args[1:]
    if name == "join":
        sep = rest[0] if rest else kwargs.get("d", "")
        if isinstance(first, str) and isinstance(rest[0] if rest else None, list | tuple):
            first, sep = rest[0], first  # str.join(iterable): self is the separator
        n = len(first) if isinstance(first, list | tuple | dict | str) else 0
        return weight(first, budget) + n * (len(sep) if isinstance(sep, str) else 1)
    if name == "replace" and isinstance(first, str) and len(rest) >= 2:
        old, new = str(rest[0]), str(rest[1])
        hits = first.count(old) if old else len(first) + 1
        return len(first) + hits * max(0, len(new) - len(old))
    if name == "indent" and isinstance(first, str):
        width = rest[0] if rest else kwargs.get("width", 4)
        per = width if isinstance(width, int) else len(str(width))
        return len(first) + (first.count("\n") + 1) * per
    if name in ("format", "format_map") and isinstance(first, str):
        check_format(first)
        refs = first.count("{") + first.count("%") + 1
        return len(first) + refs * weight([rest, dict(kwargs)], budget)
    if name == "expandtabs" and isinstance(first, str):
        tab = rest[0] if rest else kwargs.get("tabsize", 8)
        return len(first) + first.count("\t") * (tab if isinstance(tab, int) else 8)
    if name == "wordwrap" and isinstance(first, str):
        width = rest[0] if rest else kwargs.get("width", 79)
        wrap = rest[3] if len(rest) > 3 else kwargs.get("wrapstring", "\n")
        lines = len(first) // max(1, width if isinstance(width, int) else 1) + 1
        return len(first) + lines * len(str(wrap))
    if name == "tojson":
        indent = rest[1] if len(rest) > 1 else kwargs.get("indent")
        per = indent if isinstance(indent, int) else len(str(indent or ""))
        return weight(first, budget) * (4 + per)
    return 0
