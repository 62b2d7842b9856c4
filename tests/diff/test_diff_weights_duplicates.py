"""A tensor name stored in two shards keeps each shard's entry: one copy's change is never hidden.

Headers are synthesised stand-ins (two small shards), the shape of the problem rather than a real
checkpoint: no published repo in the corpus has a duplicated name.
"""

from __future__ import annotations

from diffkit import make_snapshot

from tracker.diff import diff_snapshots
from tracker.diff.weights import build_manifest
from tracker.shared.domain import Artifact, ChangeKind, SafetensorsHeader, Snapshot, TensorInfo

S1 = "model-00001-of-00002.safetensors"
S2 = "model-00002-of-00002.safetensors"


def _t(shape: tuple[int, ...], dtype: str = "F32") -> TensorInfo:
    n = 1
    for d in shape:
        n *= d
    return TensorInfo(dtype, shape, n * (4 if dtype == "F32" else 2))


def _snap(s1: dict[str, TensorInfo], s2: dict[str, TensorInfo], ids: str) -> Snapshot:
    """Two shards whose tree identities are the two characters of `ids`."""
    headers = {S1: SafetensorsHeader(s1), S2: SafetensorsHeader(s2)}
    return make_snapshot({}, extra_tree={S1: ids[0] * 40, S2: ids[1] * 40}, headers=headers)


def test_manifest_keeps_every_shards_entry_and_counts_both_in_totals() -> None:
    snap = _snap({"a": _t((2,)), "b": _t((4,))}, {"b": _t((4,)), "c": _t((3,))}, "ab")
    m = build_manifest(snap, None)
    assert [(t.shard, t.shape) for t in m.copies["b"]] == [(S1, (4,)), (S2, (4,))]
    assert set(m.copies) == {"b"}
    assert m.tensors["b"].shard == S1
    assert m.total_bytes == (2 + 4 + 4 + 3) * 4
    assert len(m.records()) == 4


def test_a_change_in_the_first_shards_copy_is_reported_with_its_shard() -> None:
    # Merged by name, the second shard's copy hid the first's: this change was invisible.
    before = _snap({"a": _t((2,)), "b": _t((4,))}, {"b": _t((4,)), "c": _t((3,))}, "ab")
    after = _snap({"a": _t((2,)), "b": _t((5,))}, {"b": _t((4,)), "c": _t((3,))}, "cb")
    changes = [c for c in diff_snapshots(before, after) if c.artifact is Artifact.WEIGHTS]
    assert [(c.kind, c.file, c.key, c.before, c.after) for c in changes] == [
        (ChangeKind.RESHAPED, S1, "b", [4], [5]),
        # no index file in the repo: the shards carry the change, not an index it does not have
        (ChangeKind.CHANGED, S1, "content", None, 1),
        (ChangeKind.CHANGED, f"{S1}, {S2}", "total_bytes", 52, 56),
    ]


def test_a_second_copy_appearing_is_a_finding_and_an_added_entry() -> None:
    before = _snap({"a": _t((2,)), "b": _t((4,))}, {"c": _t((3,))}, "ab")
    after = _snap({"a": _t((2,)), "b": _t((4,))}, {"b": _t((4,), "BF16"), "c": _t((3,))}, "cd")
    changes = [c for c in diff_snapshots(before, after) if c.artifact is Artifact.WEIGHTS]
    by_key = {(c.key, c.kind): c for c in changes}
    added = by_key[("b", ChangeKind.ADDED)]
    assert (added.file, added.after) == (S2, "BF16 [4]")
    assert added.summary == f"tensor b added in {S2} (BF16 [4]; also in {S1})"
    dup = by_key[("duplicates", ChangeKind.CHANGED)]
    assert dup.before == [] and dup.after == [f"b: {S1}, {S2}"]
    assert dup.summary == f"tensor names stored in more than one shard: 0 → 1 (b: {S1}, {S2})"
    census = by_key[("dtypes", ChangeKind.CHANGED)]
    assert (census.before, census.after) == ({"F32": 3}, {"BF16": 1, "F32": 3})


def test_removing_one_copy_says_where_the_other_is() -> None:
    before = _snap({"b": _t((4,))}, {"b": _t((4,))}, "ab")
    after = _snap({"a": _t((4,))}, {"b": _t((4,))}, "cd")
    changes = [c for c in diff_snapshots(before, after) if c.artifact is Artifact.WEIGHTS]
    summaries = [c.summary for c in changes]
    assert f"tensor b removed from {S1} (still in {S2})" in summaries
    assert "tensor a added (F32 [4])" in summaries
    dup = next(c for c in changes if c.key == "duplicates")
    assert (dup.before, dup.after) == ([f"b: {S1}, {S2}"], [])


def test_a_shard_holding_only_names_also_in_an_earlier_shard_is_a_shard_of_the_manifest() -> None:
    # Built from each name's first copy, the manifest left S2 out (its only name was also in S1):
    # S2's new content was invisible, and a change of S1 said "1 of 1 shard files".
    m = build_manifest(_snap({"a": _t((2,)), "shared": _t((4,))}, {"shared": _t((4,))}, "ab"), None)
    assert m.shards == (S1, S2)
    assert m.shard_ids == {S1: "a" * 40, S2: "b" * 40}
    assert [t.shard for t in m.copies["shared"]] == [S1, S2]
    before = _snap({"a": _t((2,)), "shared": _t((4,))}, {"shared": _t((4,))}, "ab")
    second_rewritten = _snap({"a": _t((2,)), "shared": _t((4,))}, {"shared": _t((4,))}, "ac")
    changes = [
        c for c in diff_snapshots(before, second_rewritten) if c.artifact is Artifact.WEIGHTS
    ]
    assert [(c.kind, c.file, c.key, c.after, c.summary) for c in changes] == [
        (ChangeKind.CHANGED, S2, "content", 1, "1 of 2 shard files have new content")
    ]
    first_rewritten = _snap({"a": _t((2,)), "shared": _t((4,))}, {"shared": _t((4,))}, "cb")
    changes = [c for c in diff_snapshots(before, first_rewritten) if c.artifact is Artifact.WEIGHTS]
    assert [(c.file, c.key, c.summary) for c in changes] == [
        (S1, "content", "1 of 2 shard files have new content")
    ]


def test_three_shards_with_an_all_duplicates_shard_in_the_middle_are_all_counted() -> None:
    s3 = "model-00003-of-00003.safetensors"
    s1, s2 = S1.replace("00002", "00003", 1), S2.replace("of-00002", "of-00003")

    def snap(ids: str) -> Snapshot:
        headers = {
            s1: SafetensorsHeader({"a": _t((2,)), "shared": _t((4,))}),
            s2: SafetensorsHeader({"shared": _t((4,))}),
            s3: SafetensorsHeader({"c": _t((3,))}),
        }
        tree = {s1: ids[0] * 40, s2: ids[1] * 40, s3: ids[2] * 40}
        return make_snapshot({}, extra_tree=tree, headers=headers)

    assert build_manifest(snap("abc"), None).shards == (s1, s2, s3)
    changes = [c for c in diff_snapshots(snap("abc"), snap("dbc")) if c.key == "content"]
    assert [(c.file, c.summary) for c in changes] == [(s1, "1 of 3 shard files have new content")]
    changes = [c for c in diff_snapshots(snap("abc"), snap("aec")) if c.key == "content"]
    assert [(c.file, c.summary) for c in changes] == [(s2, "1 of 3 shard files have new content")]
