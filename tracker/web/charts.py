"""Charts across a repo's revisions as inline SVG (pygal), each with its values as a table.

pygal draws the SVG server-side; its tooltip script and configuration `<script>` are removed (the
pages run no JavaScript) and its element ids are made unique per chart so several charts can sit
on one page. Values come straight from each revision's stored estimate; a revision without one
is a gap in the line and "no estimate" in the table, an unverified one is marked in both.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pygal
from lxml import etree
from markupsafe import Markup
from pygal.style import Style

from tracker.shared.domain import Estimate
from tracker.web.views import ChartPoint

_STYLE = Style(
    background="#ffffff",
    plot_background="#ffffff",
    foreground="#1b1f23",
    foreground_strong="#1b1f23",
    foreground_subtle="#57606a",
    colors=("#0a58ca", "#b42318", "#1a7f37", "#9a6700", "#6f42c1", "#3d5a80"),
    font_family="system-ui, sans-serif",
)
_SVG = "{http://www.w3.org/2000/svg}"

# pygal's import appends a legacy `sys.meta_path` finder (for its optional map plugins, unused
# here) that has no `find_spec`: every later import of a module not yet loaded then warns
# (ImportWarning) on Python 3.11. Take it out again.
sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "PluginImportFixer"]
SETUP_TITLES = {"full_finetune": "full fine-tune", "lora": "LoRA", "serve": "serving"}


@dataclass(frozen=True)
class ChartRow:
    label: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class Chart:
    key: str
    title: str
    series: tuple[str, ...]
    rows: tuple[ChartRow, ...]
    svg: Markup


Getter = Callable[[Estimate], float | int]


def _label(p: ChartPoint) -> str:
    if p.estimate is None:
        return f"{p.label} (no estimate)"
    if not p.estimate.verification.vouched:
        return f"{p.label} (unverified)"
    return p.label


def _svg(chart: pygal.Line, key: str) -> Markup:
    """The chart's SVG element without scripts, comments or ids that could collide."""
    tree = chart.render_tree()
    for el in list(tree.iter()):
        if not isinstance(el.tag, str) or el.tag in (f"{_SVG}script", "script"):
            el.getparent().remove(el)  # comments (a build date) and pygal's config script
    root_id = tree.get("id")
    for el in tree.iter():
        if el is not tree and el.get("id"):
            el.set("id", f"{key}-{el.get('id')}")
    tree.set("role", "img")
    text = etree.tostring(tree, encoding="unicode")
    # pygal names the root `chart-<uuid4>` and its stylesheet selects by that id: a fixed id per
    # chart instead, so equal data renders equal bytes (the page's ETag stays put).
    assert root_id is not None
    return Markup(text.replace(root_id, f"svg-{key}"))  # serialized by lxml: text escaped


def _line(
    key: str,
    title: str,
    points: Sequence[ChartPoint],
    series: Sequence[tuple[str, Getter]],
    fmt: Callable[[float | int], str],
    y_title: str,
) -> Chart:
    chart = pygal.Line(
        js=[],
        disable_xml_declaration=True,
        style=_STYLE,
        width=720,
        height=320,
        show_dots=True,
        dots_size=3,
        x_label_rotation=20,
        legend_at_bottom=True,
        truncate_legend=40,
        y_title=y_title,
        include_x_axis=True,
        print_values=False,
        show_y_guides=True,
        allow_interruptions=True,
        explicit_size=False,
    )
    chart.x_labels = [_label(p) for p in points]
    for name, get in series:
        chart.add(name, [None if p.estimate is None else get(p.estimate) for p in points])
    rows = tuple(
        ChartRow(
            _label(p),
            tuple(
                "no estimate" if p.estimate is None else fmt(get(p.estimate)) for _, get in series
            ),
        )
        for p in points
    )
    return Chart(key, title, tuple(n for n, _ in series), rows, _svg(chart, key))


def _billions(x: float | int) -> str:
    return f"{x:,.3f} B"


def _gb(x: float | int) -> str:
    return f"{x:,.2f} GB"


def _batch(x: float | int) -> str:
    return f"{int(x):,}" if x else "0 (does not fit)"


def charts(points: Sequence[ChartPoint]) -> list[Chart]:
    """Parameters, memory, and the largest batch per card for each setup, across `points`."""
    if not any(p.estimate is not None for p in points):
        return []
    out = [
        _line(
            "params",
            "Parameters (billions)",
            points,
            [
                ("total", lambda e: e.params.total / 1e9),
                ("active per token", lambda e: e.params.active / 1e9),
            ],
            _billions,
            "billion parameters",
        ),
        _line(
            "memory",
            "Memory at batch 1 (GB)",
            points,
            [
                ("full fine-tune", lambda e: e.memory.full_finetune),
                ("LoRA", lambda e: e.memory.lora),
                (
                    "serving (weights + KV cache)",
                    lambda e: e.memory.serve_weights + e.memory.kv_cache,
                ),
            ],
            _gb,
            "GB",
        ),
    ]
    cards: list[str] = []
    for p in points:
        if p.estimate is not None:
            cards += [c.name for c in p.estimate.cards if c.name not in cards]
    for setup, words in SETUP_TITLES.items():
        series: list[tuple[str, Getter]] = []
        for name in cards:

            def get(e: Estimate, name: str = name, setup: str = setup) -> int:
                card = e.card(name)
                return 0 if card is None else card.fit(setup).batch

            series.append((name, get))
        out.append(
            _line(
                f"batch-{setup}",
                f"Largest batch per card: {words}",
                points,
                series,
                _batch,
                "batch",
            )
        )
    return out
