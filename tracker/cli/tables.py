"""CLI tables that stay readable at any width (80 columns included): repo names, ids and numbers are
never cut or wrapped; prose columns wrap; when even that does not fit, whole columns are dropped in
priority order (and a line under the table names them). One size style for every table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table


@dataclass(frozen=True)
class Col:
    """A column: `keep` (whole values: names, ids, numbers) or prose that may wrap; `priority`
    0 is never dropped, higher numbers go first when the table does not fit."""

    name: str
    priority: int = 0
    keep: bool = False
    right: bool = False
    min_width: int = 0


def console(width: int | None = None, *, stderr: bool = False) -> Console:
    """The console tables print to: the terminal's width on a terminal, else COLUMNS or 80
    (rich's default), or `width` when given."""
    return Console(width=width, stderr=stderr, soft_wrap=False)


PROSE_MIN = 16
"""The narrowest a prose column gets (narrower, text wraps into unreadable slivers)."""


def _widths(cols: Sequence[Col], rows: Sequence[Sequence[str]]) -> list[int]:
    """The minimum width of each column: whole values for `keep` columns, the longest word (at
    most PROSE_MIN, at least the header's longest word) for prose."""
    out = []
    for i, c in enumerate(cols):
        cells = [r[i] for r in rows]
        if c.keep:
            out.append(max([len(c.name), *(len(v) for v in cells)]))
        else:
            words = [len(w) for v in [c.name, *cells] for w in v.split()] or [1]
            longest = max([len(w) for w in c.name.split()] or [1])
            out.append(max(longest, min(max(words), PROSE_MIN), c.min_width))
    return out


def _table(title: str | None, cols: Sequence[Col], rows: Sequence[Sequence[str]]) -> Table:
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, expand=False)
    for c, w in zip(cols, _widths(cols, rows), strict=True):
        table.add_column(
            c.name,
            justify="right" if c.right else "left",
            no_wrap=c.keep,
            min_width=w,
            overflow="fold",
        )
    for row in rows:
        table.add_row(*(escape(v) for v in row))
    return table


def fit(
    out: Console, cols: Sequence[Col], rows: Sequence[Sequence[str]]
) -> tuple[list[Col], list[list[str]]]:
    """The columns (and rows) that fit `out`'s width: drop the highest-priority-number column
    until the columns' minimum widths (plus the gaps between them) fit; columns of priority 0
    are always kept."""
    kept = list(range(len(cols)))
    while True:
        kc = [cols[i] for i in kept]
        kr = [[r[i] for i in kept] for r in rows]
        need = sum(_widths(kc, kr)) + 3 * (len(kc) - 1)
        droppable = [i for i in kept if cols[i].priority > 0]
        if need <= out.width or not droppable:
            return kc, kr
        worst = max(droppable, key=lambda i: (cols[i].priority, i))
        kept.remove(worst)


def print_table(
    out: Console,
    title: str | None,
    cols: Sequence[Col],
    rows: Sequence[Sequence[str]],
) -> None:
    """Print a table that fits `out` (see `fit`), then which columns were left out, if any."""
    kc, kr = fit(out, cols, rows)
    out.print(_table(title, kc, kr))
    dropped = [c.name for c in cols if c not in kc]
    if dropped:
        out.print(
            f"(not shown at {out.width} columns: {', '.join(dropped)}; --json has everything)",
            highlight=False,
        )


def size(n: int | float | None) -> str:
    """Bytes in decimal units, one style everywhere: "812 B", "74.6 kB", "20.7 MB", "13.48 GB"."""
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{int(value):,} B" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1000
    return f"{n} B"  # pragma: no cover


def gb(n: float | None) -> str:
    """A memory figure given in (decimal) GB, in the same style as `size`."""
    return "-" if n is None else size(n * 1e9)


def params(n: int | None) -> str:
    """A parameter count: "6.74 bn", "560 M", "1,234"."""
    if n is None:
        return "-"
    if n >= 1e9:
        return f"{n / 1e9:,.2f} bn"
    if n >= 1e6:
        return f"{n / 1e6:,.0f} M"
    return f"{n:,}"
