"""Issue 10, item 6: a differ that runs out of stack or memory gives a recorded "could not
analyse" change for its artifact, never an exception that leaves the revision pending for ever.

The bounded parsers keep real content far from Python's recursion limit (JSON depth 64), so the
stack is made small instead: openai/gpt-oss-20b's config with `quantization_config` nested 60
levels (within the bounds) is diffed under a recursion limit deepdiff cannot walk it in. Before,
the RecursionError escaped `diff_snapshots` and the revision stayed pending with no record.
"""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path

from diffkit import make_snapshot

from tracker.diff import diff_snapshots
from tracker.shared.domain import Artifact, ChangeKind

CONFIG = json.loads(
    (
        Path(__file__).resolve().parents[3] / "shared/corpus/models/openai__gpt-oss-20b/config.json"
    ).read_text()
)


def _nested(depth: int, leaf: object) -> object:
    value = leaf
    for _ in range(depth):
        value = {"k": value}
    return value


def test_a_differ_out_of_stack_is_a_could_not_analyse_change() -> None:
    before = make_snapshot(
        {"config.json": json.dumps(dict(CONFIG, quantization_config=_nested(60, 1))).encode()}
    )
    after = make_snapshot(
        {"config.json": json.dumps(dict(CONFIG, quantization_config=_nested(60, 2))).encode()}
    )
    normal = diff_snapshots(before, after)
    assert [(c.kind, c.key.count(".")) for c in normal] == [(ChangeKind.CHANGED, 60)]
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack()) + 115)  # json.loads fits, deepdiff's walk does not
    try:
        small_stack = diff_snapshots(before, after)
    finally:
        sys.setrecursionlimit(limit)
    assert [(c.artifact, c.kind, c.file, c.summary) for c in small_stack] == [
        (
            Artifact.CONFIG,
            ChangeKind.UNREADABLE,
            "",
            "could not analyse the config of this revision: nested too deeply (RecursionError)",
        )
    ]
