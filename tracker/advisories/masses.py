"""Many changes of one pattern as one line: "218 tensors F32 → BF16 in model.safetensors" (pure).

A dtype conversion or a renaming touches every tensor of a checkpoint; an advisory lists the
pattern once, with a few examples and the count, and the changes that do not fit a pattern one
by one. Only tensor-level weight changes are grouped (kinds retyped, reshaped, renamed, added,
removed): their keys are tensor names, and nothing else in an advisory comes in hundreds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tracker.advisories.classify import Classified
from tracker.shared.domain import Artifact, ChangeKind, JSONValue

MASS_MIN = 6
"""The fewest changes of one pattern shown as a pattern (fewer are listed one by one)."""
EXAMPLES = 3

_TENSOR_KINDS = (
    ChangeKind.RETYPED,
    ChangeKind.RESHAPED,
    ChangeKind.RENAMED,
    ChangeKind.ADDED,
    ChangeKind.REMOVED,
)


@dataclass(frozen=True)
class Mass:
    """Changes of one pattern: the same kind in the same file (and, for dtypes, the same before
    → after); `items` in the differ's order."""

    kind: ChangeKind
    file: str
    before: JSONValue
    after: JSONValue
    items: tuple[Classified, ...]

    @property
    def phrase(self) -> str:
        """ "218 tensors retyped F32 → BF16 in model.safetensors"."""
        n = len(self.items)
        what = f"{n} tensors {self.kind.value}"
        if self.kind is ChangeKind.RETYPED:
            what += f" {self.before} → {self.after}"
        return f"{what} in {self.file}" if self.file else what

    @property
    def examples(self) -> str:
        """ "e.g. a, b, c and 215 more"."""
        shown = [c.change.key for c in self.items[:EXAMPLES]]
        more = len(self.items) - len(shown)
        return "e.g. " + ", ".join(f"`{k}`" for k in shown) + (f" and {more} more" if more else "")


Row = Classified | Mass


def _pattern(c: Classified) -> tuple[object, ...] | None:
    ch = c.change
    if ch.artifact is not Artifact.WEIGHTS or ch.kind not in _TENSOR_KINDS:
        return None
    if ch.kind is ChangeKind.RETYPED:
        return (ch.kind, ch.file, ch.before, ch.after, c.severity, c.rule)
    return (ch.kind, ch.file, c.severity, c.rule)


def collapse(items: Sequence[Classified]) -> list[Row]:
    """`items` with every pattern of at least MASS_MIN changes replaced by one Mass, placed where
    its first change was; other changes unchanged and in order."""
    groups: dict[tuple[object, ...], list[Classified]] = {}
    for c in items:
        key = _pattern(c)
        if key is not None:
            groups.setdefault(key, []).append(c)
    big = {k: v for k, v in groups.items() if len(v) >= MASS_MIN}
    out: list[Row] = []
    placed: set[tuple[object, ...]] = set()
    for c in items:
        key = _pattern(c)
        if key is None or key not in big:
            out.append(c)
        elif key not in placed:
            placed.add(key)
            members = big[key]
            first = members[0].change
            out.append(Mass(first.kind, first.file, first.before, first.after, tuple(members)))
    return out


def reshaped_any(items: Sequence[Classified]) -> bool:
    return any(c.change.kind is ChangeKind.RESHAPED for c in items)
