"""Plain text fitted to a width, without rich (the one-off `tracker estimate` stays light): lines wrap
at spaces only, so no number, name or sha is ever cut; table cells wrap inside their column; when
even the narrowest cells do not fit, whole columns are dropped in priority order and a line under
the table names them, as tracker/cli/tables.py does for the rich tables.
"""

from __future__ import annotations

import re
import shutil
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

GAP = 2
"""Spaces between two columns."""

_GLUE = "\x00"
_NUMBER_AND_UNIT = re.compile(r"(?<![\w.(])(\d[\d,.]*) (?=[A-Za-z]+\b)(?!at\b|and\b|per\b)")
_BATCH = re.compile(r"\bbatch (?=\d)")


def width() -> int:
    """The width to fit: COLUMNS when set, else the terminal's, else 80 (stdout piped)."""
    return max(20, shutil.get_terminal_size((80, 24)).columns)


def wrap(text: str, at: int, indent: str = "  ") -> list[str]:
    """`text` as lines of at most `at` characters (a single word longer than that stays whole),
    continuation lines indented by `indent`; an empty text is one empty line. A number stays on
    the line of the word after it ("2 cards"), and "batch N" stays together."""
    if not text:
        return [""]
    lines = textwrap.wrap(
        _glue(text),
        at,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return [line.replace(_GLUE, " ") for line in lines] or [""]


def _glue(text: str) -> str:
    return _BATCH.sub("batch" + _GLUE, _NUMBER_AND_UNIT.sub(r"\1" + _GLUE, text))


@dataclass(frozen=True)
class Column:
    """A column: `keep` values are never wrapped (names, numbers); `right` aligns them right;
    `priority` 0 is never dropped, higher numbers are dropped first."""

    name: str
    priority: int = 0
    keep: bool = False
    right: bool = False


def _longest_word(texts: Sequence[str]) -> int:
    return max([len(w) for t in texts for w in _glue(t).split()] or [1])


def _min_width(col: Column, cells: Sequence[str]) -> int:
    if col.keep:
        return max(len(col.name), *(len(c) for c in cells)) if cells else len(col.name)
    return _longest_word([col.name, *cells])


def _natural(col: Column, cells: Sequence[str]) -> int:
    return max([len(col.name), *(len(c) for c in cells)])


def _widths(cols: Sequence[Column], rows: Sequence[Sequence[str]], at: int) -> list[int]:
    """Each column's width: natural when everything fits, else the minimum plus a share of the
    room left, given to the wrapping columns in proportion to what they lack."""
    cells = [[r[i] for r in rows] for i in range(len(cols))]
    low = [_min_width(c, v) for c, v in zip(cols, cells, strict=True)]
    high = [_natural(c, v) for c, v in zip(cols, cells, strict=True)]
    room = at - GAP * (len(cols) - 1)
    if sum(high) <= room:
        return high
    spare = room - sum(low)
    lack = [h - lo for h, lo in zip(high, low, strict=True)]
    total = sum(lack) or 1
    out = [lo + spare * k // total for lo, k in zip(low, lack, strict=True)]
    left = room - sum(out)
    for i in sorted(range(len(cols)), key=lambda i: -lack[i]):
        if left <= 0:
            break
        if out[i] < high[i]:
            out[i] += 1
            left -= 1
    return out


def fit_columns(
    cols: Sequence[Column], rows: Sequence[Sequence[str]], at: int
) -> tuple[list[Column], list[list[str]]]:
    """The columns (and their cells) whose minimum widths fit `at`: the highest priority number
    is dropped first; priority-0 columns are always kept."""
    kept = list(range(len(cols)))
    while True:
        kc = [cols[i] for i in kept]
        kr = [[r[i] for i in kept] for r in rows]
        need = sum(_min_width(c, [r[j] for r in kr]) for j, c in enumerate(kc))
        need += GAP * (len(kc) - 1)
        droppable = [i for i in kept if cols[i].priority > 0]
        if need <= at or not droppable:
            return kc, kr
        kept.remove(max(droppable, key=lambda i: (cols[i].priority, i)))


def table(title: str, cols: Sequence[Column], rows: Sequence[Sequence[str]], at: int) -> str:
    """`title` (wrapped), a header, a rule and the rows, fitted to `at` columns; rows whose cells
    wrap are separated by a blank line; a last line names the columns left out, if any."""
    kc, kr = fit_columns(cols, rows, at)
    widths = _widths(kc, kr, at)

    def block(cells: Sequence[str]) -> list[str]:
        parts = [
            [c] if col.keep else wrap(c, w, indent="")
            for c, col, w in zip(cells, kc, widths, strict=True)
        ]
        height = max(len(p) for p in parts)
        lines = []
        for k in range(height):
            out = []
            for p, col, w in zip(parts, kc, widths, strict=True):
                text = p[k] if k < len(p) else ""
                out.append(text.rjust(w) if col.right else text.ljust(w))
            lines.append((" " * GAP).join(out).rstrip())
        return lines

    body = [block(r) for r in kr]
    tall = any(len(b) > 1 for b in body)
    out = [*wrap(title, at), *block([c.name for c in kc])]
    out.append((" " * GAP).join("-" * w for w in widths))
    for i, b in enumerate(body):
        if tall and i:
            out.append("")
        out += b
    dropped = [c.name for c in cols if c not in kc]
    if dropped:
        out += wrap(f"(not shown at {at} columns: {', '.join(dropped)}; --json has everything)", at)
    return "\n".join(out) + "\n"
