"""Test helpers for the ingest tests: safetensors bytes and a store opened on a tmp SQLite file."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from tracker.store import Store


def safetensors_bytes(
    tensors: dict[str, tuple[str, list[int]]], *, declared: int | None = None
) -> bytes:
    """A real safetensors file (zero weights) with `tensors` name -> (dtype, shape)."""
    sizes = {"F32": 4, "BF16": 2, "F16": 2, "I64": 8}
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        n = sizes[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    length = declared if declared is not None else len(raw)
    return struct.pack("<Q", length) + raw + bytes(offset)


def open_store(tmp_path: Path) -> Store:
    return Store.open(f"sqlite:///{tmp_path / 'tracker.db'}")
