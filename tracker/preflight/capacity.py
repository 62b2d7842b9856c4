"""Capacity from bytes, not from an assumed dtype (pure).

From the checkpoint census (stored parameters per dtype, `tracker.estimate.checkpoint`) and the
index's `metadata.total_size`: the bytes on disk, bytes per parameter (an already-quantized
checkpoint has no 4× left to gain from 4-bit weights), the cards needed to hold the weights as
shipped, weights only (no KV cache, activations, or headroom), for each card of the estimate's
list and for N-card boxes, how far short a box falls, and the download time at a throughput
against a provisioning window. Decimal units throughout: GB = 10^9 bytes, MB/s = 10^6 bytes/s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tracker.shared.domain import JSONValue

GB = 1e9
FOUR_BIT_BYTES = 0.5
"""Bytes per parameter of 4-bit weights: the floor quantizing to 4 bits reaches."""


@dataclass(frozen=True)
class Box:
    """`count` cards of `vram_gb` each (8 × H200 141 GB)."""

    count: int
    card: str
    vram_gb: float

    @property
    def name(self) -> str:
        return f"{self.count} × {self.card}"


DEFAULT_BOXES: tuple[Box, ...] = (Box(8, "H200 141 GB", 141.0), Box(8, "B200 180 GB", 180.0))


@dataclass(frozen=True)
class Capacity:
    """The capacity answer of one revision (see the module docstring)."""

    weights_bytes: int
    weights_source: str
    download_bytes: int
    download_source: str
    params: int
    params_by_dtype: Mapping[str, int]
    bytes_per_param: float | None
    quantized: bool
    cards: Mapping[str, int]  # card name -> cards needed, weights only
    boxes: Mapping[str, Mapping[str, JSONValue]]
    throughput_mb_s: float
    download_hours: float
    window_hours: float
    outlives_window: bool

    @property
    def quantization_note(self) -> str:
        """One line: bytes per parameter and what 4-bit weights would still gain."""
        bpp = self.bytes_per_param
        if bpp is None:
            return "bytes per parameter unknown (no stored parameters counted)"
        left = bpp / FOUR_BIT_BYTES
        if self.quantized or left < 1.5:
            return f"already quantized: {bpp:.2f} bytes/parameter, no 4× left"
        return f"{bpp:.2f} bytes/parameter: 4-bit weights would take {left:.1f}× less"

    def to_json(self) -> dict[str, JSONValue]:
        return {
            "weights_bytes": self.weights_bytes,
            "weights_source": self.weights_source,
            "download_bytes": self.download_bytes,
            "download_source": self.download_source,
            "params": self.params,
            "params_by_dtype": dict(self.params_by_dtype),
            "bytes_per_param": self.bytes_per_param,
            "quantized": self.quantized,
            "note": self.quantization_note,
            "cards": dict(self.cards),
            "boxes": {k: dict(v) for k, v in self.boxes.items()},
            "throughput_mb_s": self.throughput_mb_s,
            "download_hours": self.download_hours,
            "window_hours": self.window_hours,
            "outlives_window": self.outlives_window,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, JSONValue]) -> Capacity:
        return cls(
            weights_bytes=d["weights_bytes"],
            weights_source=d["weights_source"],
            download_bytes=d["download_bytes"],
            download_source=d["download_source"],
            params=d["params"],
            params_by_dtype=dict(d["params_by_dtype"]),
            bytes_per_param=d["bytes_per_param"],
            quantized=d["quantized"],
            cards=dict(d["cards"]),
            boxes={k: dict(v) for k, v in d["boxes"].items()},
            throughput_mb_s=d["throughput_mb_s"],
            download_hours=d["download_hours"],
            window_hours=d["window_hours"],
            outlives_window=d["outlives_window"],
        )


def cards_needed(weights_bytes: int, vram_gb: float) -> int:
    """Cards of `vram_gb` that hold `weights_bytes` of weights (weights only)."""
    return max(1, math.ceil(weights_bytes / (vram_gb * GB))) if weights_bytes else 0


def capacity(
    *,
    params_by_dtype: Mapping[str, int],
    census_bytes: int,
    total_size: int | None,
    file_bytes: int | None,
    quantized: bool,
    cards: Sequence[tuple[str, float]],
    boxes: Sequence[Box] = DEFAULT_BOXES,
    throughput_mb_s: float = 126.0,
    window_hours: float = 1.0,
) -> Capacity:
    """The capacity answer. `total_size`: the index's `metadata.total_size` (None without an
    index: the census bytes are used); `file_bytes`: the weight files' sizes in the repo tree
    (what a download fetches; None: the weights' bytes); `cards`: (name, GB) pairs."""
    weights = total_size if total_size else census_bytes
    weights_source = "index metadata.total_size" if total_size else "safetensors headers"
    download = file_bytes if file_bytes else weights
    download_source = "weight files in the tree" if file_bytes else weights_source
    params = sum(params_by_dtype.values())
    bpp = round(weights / params, 4) if params else None
    box_out: dict[str, dict[str, JSONValue]] = {}
    for b in boxes:
        holds = b.count * b.vram_gb * GB
        box_out[b.name] = {
            "count": b.count,
            "card": b.card,
            "vram_gb": b.vram_gb,
            "fits": weights <= holds,
            "short_gb": round(max(0.0, weights - holds) / GB, 1),
            "spare_gb": round(max(0.0, holds - weights) / GB, 1),
        }
    hours = round(download / (throughput_mb_s * 1e6) / 3600, 2)
    return Capacity(
        weights_bytes=weights,
        weights_source=weights_source,
        download_bytes=download,
        download_source=download_source,
        params=params,
        params_by_dtype=dict(sorted(params_by_dtype.items())),
        bytes_per_param=bpp,
        quantized=quantized,
        cards={name: cards_needed(weights, gb) for name, gb in cards},
        boxes=box_out,
        throughput_mb_s=throughput_mb_s,
        download_hours=hours,
        window_hours=window_hours,
        outlives_window=hours > window_hours,
    )
