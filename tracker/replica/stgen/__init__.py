"""Generate safetensors headers and shard layouts for a model config, stored as sparse LFS objects.

Tensor names follow the standard Hugging Face state-dict naming of each supported architecture
(or a real `model.safetensors.index.json` weight_map, which then decides the shard of each
tensor); shapes come from config.json; the data is all zeros. A header is laid out as the
safetensors writer does (https://github.com/huggingface/safetensors#format): an 8-byte
little-endian length, a JSON object with `__metadata__` first, tensors sorted by name with
contiguous `data_offsets`, padded with spaces to a multiple of 8 bytes.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracker.replica.repos import LfsPointer, write_sparse_lfs_object, zero_padded_sha256
from tracker.replica.stgen.archs import (
    ARCHITECTURES,
    DTYPE_BYTES,
    TORCH_DTYPES,
    Tensor,
    WeightsSpecError,
    model_tensors,
    rotary_inv_freq,
)

__all__ = [
    "ARCHITECTURES",
    "DTYPE_BYTES",
    "TORCH_DTYPES",
    "OidCache",
    "Shard",
    "Tensor",
    "WeightsSpecError",
    "build_shards",
    "encode_header",
    "index_json",
    "model_tensors",
    "rotary_inv_freq",
    "shard_by_index",
    "shard_evenly",
    "write_shards",
]


@dataclass(frozen=True)
class Shard:
    """One .safetensors file: its repo path, the full head (length prefix + JSON) and its size."""

    path: str
    head: bytes
    size: int

    @property
    def key(self) -> str:
        """The oid-cache key: sha256 of the head (the head fixes the size too)."""
        return hashlib.sha256(self.head).hexdigest()


def encode_header(tensors: Sequence[Tensor], metadata: Mapping[str, str]) -> tuple[bytes, int]:
    """The head bytes (8-byte length + padded JSON) of a file holding `tensors`, and its full size.

    Tensors are laid out in name order; names must be unique.
    """
    ordered = sorted(tensors, key=lambda t: t.name)
    names = [t.name for t in ordered]
    if len(set(names)) != len(names):
        raise WeightsSpecError("duplicate tensor names in one shard")
    header: dict[str, Any] = {"__metadata__": dict(metadata)}
    offset = 0
    for t in ordered:
        header[t.name] = {
            "dtype": t.dtype,
            "shape": list(t.shape),
            "data_offsets": [offset, offset + t.nbytes],
        }
        offset += t.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text, 8 + len(text) + offset


def shard_by_index(
    tensors: Sequence[Tensor], weight_map: Mapping[str, str], config: Mapping[str, Any]
) -> dict[str, list[Tensor]]:
    """Group `tensors` by the file a real index's `weight_map` puts them in.

    Index names absent from `tensors` are accepted only for `*.rotary_emb.inv_freq` buffers
    (added as fp32); any other mismatch in either direction raises WeightsSpecError.
    """
    by_name = {t.name: t for t in tensors}
    extra = sorted(set(weight_map) - set(by_name))
    unknown = [n for n in extra if not n.endswith(".rotary_emb.inv_freq")]
    missing = sorted(set(by_name) - set(weight_map))
    if unknown or missing:
        raise WeightsSpecError(
            f"index and config disagree: index-only {unknown[:5]}, config-only {missing[:5]}"
        )
    for name in extra:
        by_name[name] = rotary_inv_freq(config, name)
    shards: dict[str, list[Tensor]] = {}
    for name, path in weight_map.items():
        shards.setdefault(path, []).append(by_name[name])
    return dict(sorted(shards.items()))


def shard_evenly(tensors: Sequence[Tensor], shards: int) -> dict[str, list[Tensor]]:
    """Split `tensors` (in the given order) into `shards` consecutive files of similar byte size,
    named `model-0000i-of-0000n.safetensors` (or `model.safetensors` when `shards` is 1)."""
    if shards < 1 or shards > len(tensors):
        raise WeightsSpecError(f"cannot split {len(tensors)} tensors into {shards} shards")
    if shards == 1:
        return {"model.safetensors": list(tensors)}
    total = sum(t.nbytes for t in tensors)
    out: dict[str, list[Tensor]] = {}
    acc, k = 0, 0
    for idx, t in enumerate(tensors):
        left_tensors = len(tensors) - idx
        left_shards = shards - k - 1
        if k < shards - 1 and (acc >= total * (k + 1) / shards or left_tensors == left_shards):
            k += 1
        out.setdefault(f"model-{k + 1:05d}-of-{shards:05d}.safetensors", []).append(t)
        acc += t.nbytes
    if len(out) != shards:
        raise WeightsSpecError(f"split produced {len(out)} shards, wanted {shards}")
    return out


def build_shards(
    layout: Mapping[str, Sequence[Tensor]], metadata: Mapping[str, str] | None = None
) -> list[Shard]:
    """The Shard (path, head, size) of every file in `layout`, in path order."""
    meta = dict(metadata) if metadata is not None else {"format": "pt"}
    out = []
    for path in sorted(layout):
        head, size = encode_header(layout[path], meta)
        out.append(Shard(path, head, size))
    return out


def index_json(layout: Mapping[str, Sequence[Tensor]]) -> bytes:
    """A `model.safetensors.index.json` for `layout`, as transformers writes it (indent 2)."""
    total = sum(t.nbytes for ts in layout.values() for t in ts)
    weight_map = {t.name: path for path, ts in layout.items() for t in ts}
    doc = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    return (json.dumps(doc, indent=2) + "\n").encode()


class OidCache:
    """sha256 oids of zero-padded objects, keyed by the sha256 of their head, in a TSV file.

    Lines: `<head sha256>\\t<size>\\t<oid>`. Hashing gigabytes of zeros is the only slow step
    of building weights; the cache makes rebuilds instant. Entries can be checked with
    `zero_padded_sha256` (tests do, for the small ones).
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.entries: dict[str, tuple[int, str]] = {}
        self.dirty = False
        if path is not None and path.is_file():
            for line in path.read_text().splitlines():
                key, size, oid = line.split("\t")
                self.entries[key] = (int(size), oid)

    def oids(self, shards: Sequence[Shard], workers: int = 2) -> dict[str, str]:
        """The oid of every shard by path; hashes misses on `workers` threads and records them."""
        misses = [s for s in shards if self.entries.get(s.key, (-1, ""))[0] != s.size]
        unique = list({s.key: s for s in misses}.values())
        if unique:
            with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
                digests = list(pool.map(lambda s: zero_padded_sha256(s.head, s.size), unique))
            for s, oid in zip(unique, digests, strict=True):
                self.entries[s.key] = (s.size, oid)
            self.dirty = True
        return {s.path: self.entries[s.key][1] for s in shards}

    def save(self) -> None:
        """Write the cache back (sorted, so the file is stable) when entries were added."""
        if self.path is None or not self.dirty:
            return
        lines = [f"{k}\t{s}\t{o}\n" for k, (s, o) in sorted(self.entries.items())]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text("".join(lines))
        tmp.replace(self.path)
        self.dirty = False


def write_shards(
    repo_dir: Path, shards: Sequence[Shard], cache: OidCache, workers: int = 2
) -> dict[str, LfsPointer]:
    """Write every shard as a sparse LFS object of its real size; returns pointers by path."""
    oids = cache.oids(shards, workers)
    return {
        s.path: write_sparse_lfs_object(repo_dir, s.head, s.size, oid=oids[s.path]) for s in shards
    }
