"""Checkpoint comparison from safetensors headers: dtype census, bytes, packed-quantization
detection and the delta of the derived count against the stored one (ESTIMATES.md §1)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracker.domain import SafetensorsHeader

PACKED_DTYPES = frozenset({"U8", "I8", "U4", "I4"})
SCALE_MARKERS = ("scale", "absmax", "qzeros", "zeros")


def _elements(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= max(0, int(d))
    return n


def compare(headers: Mapping[str, SafetensorsHeader], derived_total: int) -> dict[str, Any] | None:
    """The §5 `checkpoint` object, or None when there are no headers.

    `params` counts stored elements (packed 4-bit bytes count two values each, scale tensors
    are excluded); `dtypes` is the census of stored elements per dtype; `bytes` the sum of the
    tensors' byte sizes; `delta_pct` = (derived − params) / params × 100.
    """
    if not headers:
        return None
    census: dict[str, int] = {}
    total_bytes = 0
    params = 0
    scales = 0
    packed_elems = 0
    for header in headers.values():
        for name, info in header.tensors.items():
            n = _elements(info.shape)
            census[info.dtype] = census.get(info.dtype, 0) + n
            total_bytes += info.nbytes
            lowered = name.lower()
            if any(m in lowered for m in SCALE_MARKERS):
                scales += n
                continue
            if info.dtype in PACKED_DTYPES and (
                "blocks" in lowered or "qweight" in lowered or "packed" in lowered
            ):
                packed_elems += n
                params += 2 * n
            else:
                params += n
    quantized = packed_elems > 0 or any(
        d in census for d in ("F8_E4M3", "F8_E5M2", "F8_E8M0", "U8", "I8", "U4", "I4")
    )
    delta = None if params == 0 else round((derived_total - params) / params * 100, 4)
    return {
        "params": params,
        "bytes": total_bytes,
        "dtypes": dict(sorted(census.items())),
        "delta_pct": delta,
        "already_quantized": quantized,
        "bytes_per_param": round(total_bytes / derived_total, 4) if derived_total else None,
        "scale_elements": scales,
    }
