"""Advisory summaries (issue 24, part 6): whole values only, shortened by dropping items; counts in
the unit that fits them."""

from __future__ import annotations

from tracker.advisories.classify import Classified
from tracker.advisories.groups import ChangeGroup
from tracker.advisories.osv import SUMMARY_CHARS, count_unit, fit, items_of, summary_line
from tracker.shared.domain import Artifact, Change, ChangeKind, RepoId, Severity

MIXTRAL = RepoId("mistralai/Mixtral-8x7B-v0.1")
# the demo's Mixtral preflight answer, whose summary was stored as "… weights 93.41 …"
CAPACITY = (
    "what it takes to fetch and hold is now known: 2.00 bytes/parameter: 4-bit weights would take "
    "4.0× less; weights 93.41 GB; download 93.41 GB, 0.21 h at 126 MB/s; weights-only cards: T4 "
    "16 GB 6, L4 24 GB 4, A100 40 GB 3, A100/H100 80 GB 2, H200 141 GB 1; held by 8 × H200 141 "
    "GB, 8 × B200 180 GB (unknown at the previous revision: no safetensors headers (nothing to "
    "count bytes from))"
)


def _estimate_group(*changes: Change) -> ChangeGroup:
    return ChangeGroup(
        Artifact.ESTIMATE, tuple(Classified(c, Severity.LOW, "r", "why") for c in changes), ()
    )


def _change(key: str, before: object, after: object, summary: str) -> Change:
    return Change(Artifact.ESTIMATE, ChangeKind.CHANGED, "", key, before, after, summary)  # type: ignore[arg-type]


def test_a_long_summary_drops_whole_items_and_says_how_many() -> None:
    group = _estimate_group(_change("preflight.capacity", None, None, CAPACITY))
    line = summary_line(MIXTRAL, group)
    assert line == (
        "mistralai/Mixtral-8x7B-v0.1: estimate: what it takes to fetch and hold is now known: "
        "2.00 bytes/parameter: 4-bit weights would take 4.0× less; weights 93.41 GB; and 3 more"
    )
    assert len(line) <= SUMMARY_CHARS
    assert "…" not in line


def test_items_are_split_outside_brackets_and_quotes_only() -> None:
    assert items_of('a (b; c); "d; e"; f') == ["a (b; c)", '"d; e"', "f"]
    # every item of the capacity answer is one of the text's own, whole
    assert "; ".join(items_of(CAPACITY)) == " ".join(CAPACITY.split())


def test_one_item_longer_than_the_limit_is_kept_whole() -> None:
    long = "x" * 300
    assert fit("repo: ", [long, "y"]) == f"repo: {long}; and 1 more"


def test_counts_take_the_unit_that_fits() -> None:
    assert [count_unit(n) for n in (6_738_415_616, 124_439_808, 12_300, 950, 0)] == [
        "6.74B",
        "124.44M",
        "12.30K",
        "950",
        "0",
    ]
    group = _estimate_group(_change("params.total", 1_100_000, 2_200_000, "params"))
    assert summary_line(RepoId("acme/tiny"), group) == (
        "acme/tiny: estimate: parameters 1.10M → 2.20M"
    )
