"""Weights-manifest diffs from model.safetensors.index.json and safetensors headers (dict-based, O(n log n))."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from tracker.diff._common import SideState, load_json_object, read_side
from tracker.shared.artifacts import is_header_only
from tracker.shared.domain import Artifact, Change, ChangeKind, Snapshot
from tracker.shared.errors import UnreadableArtifactError

INDEX_FILE = "model.safetensors.index.json"
BIN_INDEX_FILE = "pytorch_model.bin.index.json"
"""Used (names and shards only) when a repo has no safetensors index and no parsed headers."""
_ART = Artifact.WEIGHTS


class TensorRecord(NamedTuple):
    """One tensor in a manifest: its shard, and dtype/shape when a header was read (else None).

    A NamedTuple (immutable) rather than a dataclass: manifests hold ~100k of them.
    """

    shard: str
    dtype: str | None
    shape: tuple[int, ...] | None
    nbytes: int | None


@dataclass(frozen=True)
class Manifest:
    """Every tensor by name, the shard files, total bytes (from headers or the index) and shard identities.

    A name whose headers put it in more than one shard is in `copies` with every shard's entry
    (sorted by shard); `tensors[name]` is then its first copy. Totals and the dtype census count
    every copy, and `shards` holds every copy's shard (a shard whose names all sit in an earlier
    shard too is still one).
    """

    tensors: Mapping[str, TensorRecord]
    shards: tuple[str, ...]
    total_bytes: int | None
    shard_ids: Mapping[str, str]
    copies: Mapping[str, tuple[TensorRecord, ...]] = field(default_factory=dict)

    def records(self) -> list[TensorRecord]:
        """Every tensor entry, duplicated names once per shard that holds them."""
        out = [t for n, t in self.tensors.items() if n not in self.copies]
        for entries in self.copies.values():
            out.extend(entries)
        return out


def _parse_index(path: str, data: bytes) -> dict[str, str]:
    doc = load_json_object(path, data)
    weight_map = doc.get("weight_map")
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise UnreadableArtifactError(
            f"could not read {path}: `weight_map` is not an object of tensor → shard file"
        )
    meta = doc.get("metadata")
    total = meta.get("total_size") if isinstance(meta, dict) else None
    out = dict(weight_map)
    out["\x00total_size"] = str(total) if isinstance(total, int | float) else ""
    return out


def build_manifest(snap: Snapshot, index: Mapping[str, str] | None) -> Manifest:
    """The manifest of `snap`: tensors from the index's weight_map, enriched by any parsed headers.

    Without an index, the tensors of every parsed header (`model.safetensors` single-file repos).
    """
    tensors: dict[str, TensorRecord] = {}
    copies: dict[str, list[TensorRecord]] = {}
    for shard in sorted(snap.headers):
        for name, info in snap.headers[shard].tensors.items():
            record = TensorRecord(shard, info.dtype, tuple(info.shape), info.nbytes)
            first = tensors.setdefault(name, record)
            if first is not record:
                copies.setdefault(name, [first]).append(record)
    index_total: int | None = None
    if index is not None:
        raw_total = index.get("\x00total_size", "")
        index_total = int(float(raw_total)) if raw_total else None
        for name in index.keys() - tensors.keys() - {"\x00total_size"}:
            tensors[name] = TensorRecord(index[name], None, None, None)
    dups = {name: tuple(entries) for name, entries in copies.items()}
    m = Manifest(tensors, (), None, {}, dups)
    records = m.records()
    # Every copy's shard and every parsed header: a shard whose names all sit in an earlier
    # shard too holds no first copy, and is still a shard file whose content can change.
    shard_set = {t.shard for t in records} | snap.headers.keys()
    shards = tuple(sorted(shard_set))
    ids = {e.path: e.identity for e in snap.tree if e.path in shard_set}
    sizes = [t.nbytes for t in records]
    header_total = sum(n for n in sizes if n is not None) if sizes and None not in sizes else None
    total = header_total if header_total is not None else index_total
    return Manifest(tensors, shards, total, ids, dups)


def _manifest_or_none(snap: Snapshot | None) -> tuple[Manifest | None, str, str]:
    """(manifest or None, the index file it came from, unreadable reason or "untracked" or "")."""
    if snap is None:
        return None, INDEX_FILE, ""
    index_file = INDEX_FILE
    side = read_side(snap, INDEX_FILE, _parse_index)
    if side.state is SideState.ABSENT and not snap.headers:
        index_file = BIN_INDEX_FILE
        side = read_side(snap, BIN_INDEX_FILE, _parse_index)
    if side.state is SideState.UNREADABLE:
        return None, index_file, side.reason
    if side.state is SideState.UNTRACKED:
        return None, index_file, "untracked"
    if side.state is SideState.ABSENT and not snap.headers:
        return None, index_file, ""
    return build_manifest(snap, side.value if side.state is SideState.OK else None), index_file, ""


def _weight_state(snap: Snapshot) -> tuple[object, ...]:
    """Everything the weights diff reads, by identity: index bytes, unreadable reasons, and the
    tree identity (content hash) of every .safetensors file and of every file a header came from."""
    ids = {e.path: e.identity for e in snap.tree if is_header_only(e.path)}
    return (
        snap.files.get(INDEX_FILE),
        snap.files.get(BIN_INDEX_FILE),
        ids,
        sorted(snap.headers),
        {p: r for p, r in snap.unreadable.items() if p.endswith((".safetensors", ".index.json"))},
    )


def _unchanged(before: Snapshot, after: Snapshot) -> bool:
    """True when no weight file changed content (same hashes: same headers), the common case.

    A header is a pure function of its file's bytes, so equal identities mean equal headers: the
    ~100k-tensor comparison is skipped (O(shards), not O(tensors)).
    """
    return _weight_state(before) == _weight_state(after)


def diff_weights(before: Snapshot | None, after: Snapshot) -> list[Change]:
    """Tensor-level and manifest-level changes (keys: tensor names, `shards`, `total_bytes`, `dtypes`, `content`).

    Renames pair removed and added tensors of the same (dtype, shape), in sorted-name order within
    each signature. A name stored in several shards is compared shard by shard (each copy's
    change is reported with its shard as `file`), and the set of such names is the `duplicates`
    key. Headers listed in `after.unreadable` give UNREADABLE changes.
    """
    out: list[Change] = []
    if before is not None and _unchanged(before, after):
        return []
    old_m, _, old_reason = _manifest_or_none(before)
    new_m, index_file, new_reason = _manifest_or_none(after)
    if new_reason and new_reason != "untracked" and (before is None or new_reason != old_reason):
        out.append(
            Change(_ART, ChangeKind.UNREADABLE, index_file, "", None, new_reason, new_reason)
        )
    for path in sorted(p for p in after.unreadable if is_header_only(p)):
        reason = after.unreadable[path]
        if before is None or before.unreadable.get(path) != reason:
            summary = (
                reason if reason.startswith("could not") else f"could not read {path}: {reason}"
            )
            out.append(Change(_ART, ChangeKind.UNREADABLE, path, "", None, reason, summary))
    if before is None or old_m is None or new_m is None:
        return out
    carrier = index_file
    if after.entry(index_file) is None and (before is None or before.entry(index_file) is None):
        carrier = ", ".join(new_m.shards) or index_file  # no index: the shards carry the change
    return out + compare_manifests(old_m, new_m, carrier)


def compare_manifests(b: Manifest, a: Manifest, index_file: str = INDEX_FILE) -> list[Change]:
    """Changes between two manifests: per tensor (sorted by name), then shards, total bytes, dtypes, content."""
    out: list[Change] = []
    removed = [n for n in b.tensors if n not in a.tensors]
    added = [n for n in a.tensors if n not in b.tensors]
    bt, at = b.tensors, a.tensors
    duplicated = b.copies.keys() | a.copies.keys()
    pairs: list[tuple[str, TensorRecord, TensorRecord]] = []
    for name in sorted(n for n in bt.keys() & at.keys()):
        if name in duplicated:
            out.extend(_copies_changes(name, b, a, pairs))
        elif bt[name] != at[name]:
            pairs.append((name, bt[name], at[name]))
    for name, old, new in pairs:
        if old.shape is not None and new.shape is not None and old.shape != new.shape:
            out.append(
                Change(
                    _ART,
                    ChangeKind.RESHAPED,
                    new.shard,
                    name,
                    list(old.shape),
                    list(new.shape),
                    f"{name} reshaped {list(old.shape)} → {list(new.shape)}",
                )
            )
        if old.dtype is not None and new.dtype is not None and old.dtype != new.dtype:
            out.append(
                Change(
                    _ART,
                    ChangeKind.RETYPED,
                    new.shard,
                    name,
                    old.dtype,
                    new.dtype,
                    f"{name} retyped {old.dtype} → {new.dtype}",
                )
            )
    by_sig_removed: dict[tuple[str, tuple[int, ...]], list[str]] = defaultdict(list)
    by_sig_added: dict[tuple[str, tuple[int, ...]], list[str]] = defaultdict(list)
    for n in removed:
        t = b.tensors[n]
        if t.dtype is not None and t.shape is not None:
            by_sig_removed[(t.dtype, t.shape)].append(n)
    for n in added:
        t = a.tensors[n]
        if t.dtype is not None and t.shape is not None:
            by_sig_added[(t.dtype, t.shape)].append(n)
    renamed_from: set[str] = set()
    renamed_to: set[str] = set()
    for sig, olds in by_sig_removed.items():
        news = by_sig_added.get(sig)
        if not news:
            continue
        for old_name, new_name in zip(sorted(olds), sorted(news), strict=False):
            renamed_from.add(old_name)
            renamed_to.add(new_name)
            out.append(
                Change(
                    _ART,
                    ChangeKind.RENAMED,
                    a.tensors[new_name].shard,
                    new_name,
                    old_name,
                    new_name,
                    f"{old_name} renamed to {new_name} ({sig[0]} {list(sig[1])})",
                )
            )
    for n in removed:
        if n not in renamed_from:
            t = b.tensors[n]
            out.append(
                Change(_ART, ChangeKind.REMOVED, t.shard, n, _desc(t), None, f"tensor {n} removed")
            )
    for n in added:
        if n not in renamed_to:
            t = a.tensors[n]
            out.append(
                Change(
                    _ART,
                    ChangeKind.ADDED,
                    t.shard,
                    n,
                    None,
                    _desc(t),
                    f"tensor {n} added ({_desc(t)})",
                )
            )
    out.sort(key=lambda c: c.key)
    out.extend(_manifest_level(b, a, index_file))
    return out


def _copies_changes(
    name: str, b: Manifest, a: Manifest, pairs: list[tuple[str, TensorRecord, TensorRecord]]
) -> list[Change]:
    """Shard-by-shard changes of a name stored in several shards on either side: copies in the
    same shard go to `pairs` (compared as tensors); a copy only one side has is added/removed."""
    old = {t.shard: t for t in b.copies.get(name, (b.tensors[name],))}
    new = {t.shard: t for t in a.copies.get(name, (a.tensors[name],))}
    out: list[Change] = []
    for shard in sorted(old.keys() | new.keys()):
        x, y = old.get(shard), new.get(shard)
        if x is not None and y is not None:
            if x != y:
                pairs.append((name, x, y))
        elif y is not None:
            others = ", ".join(s for s in sorted(new) if s != shard)
            out.append(
                Change(
                    _ART,
                    ChangeKind.ADDED,
                    shard,
                    name,
                    None,
                    _desc(y),
                    f"tensor {name} added in {shard} ({_desc(y)}; also in {others})",
                )
            )
        elif x is not None:
            others = ", ".join(s for s in sorted(new) if s != shard)
            out.append(
                Change(
                    _ART,
                    ChangeKind.REMOVED,
                    shard,
                    name,
                    _desc(x),
                    None,
                    f"tensor {name} removed from {shard} (still in {others})",
                )
            )
    return out


def _duplicates(m: Manifest) -> list[str]:
    return [f"{n}: {', '.join(t.shard for t in m.copies[n])}" for n in sorted(m.copies)]


def _desc(t: TensorRecord) -> str:
    if t.dtype is None or t.shape is None:
        return f"in {t.shard}"
    return f"{t.dtype} {list(t.shape)}"


def _census(m: Manifest) -> dict[str, int]:
    return dict(sorted(Counter(t.dtype for t in m.records() if t.dtype is not None).items()))


def _pct(before: int, after: int) -> str:
    pct = round((after - before) / before * 100)
    return f"{'+' if pct > 0 else '−' if pct < 0 else '±'}{abs(pct)}%"


def _census_text(census: dict[str, int]) -> str:
    return ", ".join(f"{n:,} {d}" for d, n in census.items())


def _manifest_level(b: Manifest, a: Manifest, index_file: str) -> list[Change]:
    out: list[Change] = []
    if len(b.shards) != len(a.shards) or b.shards != a.shards:
        out.append(
            Change(
                _ART,
                ChangeKind.CHANGED,
                index_file,
                "shards",
                len(b.shards),
                len(a.shards),
                f"shard files changed: {len(b.shards)} → {len(a.shards)}",
                "\n".join(
                    [
                        *(f"- {s}" for s in b.shards if s not in a.shards),
                        *(f"+ {s}" for s in a.shards if s not in b.shards),
                    ]
                ),
            )
        )
    if b.total_bytes is not None and a.total_bytes is not None and b.total_bytes != a.total_bytes:
        out.append(
            Change(
                _ART,
                ChangeKind.CHANGED,
                index_file,
                "total_bytes",
                b.total_bytes,
                a.total_bytes,
                f"checkpoint bytes changed: {b.total_bytes:,} → {a.total_bytes:,}"
                + (f" ({_pct(b.total_bytes, a.total_bytes)})" if b.total_bytes else ""),
            )
        )
    cb, ca = _census(b), _census(a)
    if cb and ca and cb != ca:
        out.append(
            Change(
                _ART,
                ChangeKind.CHANGED,
                index_file,
                "dtypes",
                cb,
                ca,
                f"dtype census changed: {_census_text(cb)} → {_census_text(ca)}",
            )
        )
    db, da = _duplicates(b), _duplicates(a)
    if db != da:
        out.append(
            Change(
                _ART,
                ChangeKind.CHANGED,
                index_file,
                "duplicates",
                db,
                da,
                f"tensor names stored in more than one shard: {len(db)} → {len(da)}"
                + (f" ({'; '.join(da[:3])}{'; …' if len(da) > 3 else ''})" if da else ""),
                "\n".join(
                    [*(f"- {d}" for d in db if d not in da), *(f"+ {d}" for d in da if d not in db)]
                ),
            )
        )
    same_named = [s for s in a.shards if s in b.shard_ids and s in a.shard_ids]
    rewritten = [s for s in same_named if b.shard_ids[s] != a.shard_ids[s]]
    if rewritten:
        out.append(
            Change(
                _ART,
                ChangeKind.CHANGED,
                ", ".join(rewritten) if len(rewritten) <= 3 else index_file,
                "content",
                None,
                len(rewritten),
                f"{len(rewritten)} of {len(a.shards)} shard files have new content",
                "\n".join(rewritten[:200]),
            )
        )
    return out
