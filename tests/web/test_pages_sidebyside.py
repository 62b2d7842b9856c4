"""The side-by-side view of a unified diff (`tracker.web.views.side_by_side`): context on both
sides, each run of removed lines facing the run of added lines after it, hunks kept."""

from __future__ import annotations

from tracker.web.views import DiffLine, SideRow, diff_lines, side_by_side

UNIFIED = """--- before
+++ after
@@ -1,6 +1,5 @@
-<|system|>You are helpful.
 <|system|>You are helpful.
 <|user|>Hi
-<|assistant|>Hello
-there
+<|assistant|>Hello there
 <|end|>
+<|pad|>
@@ -9 +8 @@
-x
+y"""


def _d(kind: str, text: str) -> DiffLine:
    return DiffLine(kind, text)


def test_side_by_side_aligns_runs_of_removed_and_added_lines() -> None:
    lines = diff_lines(UNIFIED)
    assert lines is not None
    ctx1, ctx2, ctx3 = (
        _d("ctx", " <|system|>You are helpful."),
        _d("ctx", " <|user|>Hi"),
        _d("ctx", " <|end|>"),
    )
    assert side_by_side(lines) == (
        SideRow(hunk="@@ -1,6 +1,5 @@"),
        SideRow(before=_d("del", "-<|system|>You are helpful."), after=None),
        SideRow(before=ctx1, after=ctx1),
        SideRow(before=ctx2, after=ctx2),
        SideRow(
            before=_d("del", "-<|assistant|>Hello"), after=_d("add", "+<|assistant|>Hello there")
        ),
        SideRow(before=_d("del", "-there"), after=None),
        SideRow(before=ctx3, after=ctx3),
        SideRow(before=None, after=_d("add", "+<|pad|>")),
        SideRow(hunk="@@ -9 +8 @@"),
        SideRow(before=_d("del", "-x"), after=_d("add", "+y")),
    )


def test_an_addition_before_a_removal_starts_a_new_row() -> None:
    lines = (_d("hunk", "@@ -1 +1 @@"), _d("add", "+a"), _d("del", "-b"), _d("add", "+c"))
    assert side_by_side(lines) == (
        SideRow(hunk="@@ -1 +1 @@"),
        SideRow(before=None, after=_d("add", "+a")),
        SideRow(before=_d("del", "-b"), after=_d("add", "+c")),
    )
