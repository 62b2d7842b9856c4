"""Pure parser for safetensors headers (the 8-byte length prefix and the JSON header), with hard caps.

Format (https://github.com/huggingface/safetensors#format): a little-endian u64 `N`, then `N` bytes
of UTF-8 JSON: an optional `"__metadata__": {str: str}` and, per tensor, `{"dtype", "shape",
"data_offsets": [begin, end]}`. Only the header is ever read; the weights never are.
"""

from __future__ import annotations

import math
import struct
from typing import Any

from tracker.shared.bounded import SAFETENSORS_HEADER, BoundsError, load_json
from tracker.shared.domain import SafetensorsHeader, TensorInfo
from tracker.shared.errors import OversizedArtifactError, UnreadableArtifactError

# Bytes per element; sub-byte and exotic dtypes are accepted with nbytes taken from the offsets.
DTYPE_BYTES: dict[str, float] = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E5M2": 1,
    "F8_E4M3": 1,
    "F8_E8M0": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "F64": 8,
    "I64": 8,
    "U64": 8,
    "C64": 8,
    "F4": 0.5,
    "F6_E2M3": 0.75,
    "F6_E3M2": 0.75,
}
MAX_TENSORS = 1_000_000


def header_length(prefix: bytes, max_header_bytes: int) -> int:
    """The header length `N` declared by the first 8 bytes.

    Raises UnreadableArtifactError when fewer than 8 bytes are given or N is 0, and
    OversizedArtifactError when N exceeds `max_header_bytes` (a file declaring a 10 GB header
    is refused before anything else is read).
    """
    if len(prefix) < 8:
        raise UnreadableArtifactError(
            f"safetensors file is {len(prefix)} bytes long, shorter than its 8-byte length prefix"
        )
    (n,) = struct.unpack("<Q", prefix[:8])
    if n == 0:
        raise UnreadableArtifactError("safetensors header length is 0")
    if n > max_header_bytes:
        raise OversizedArtifactError(
            f"safetensors header declares {n} bytes, over the cap of {max_header_bytes} bytes"
        )
    return int(n)


def parse_header(raw: bytes, *, file_size: int | None = None) -> SafetensorsHeader:
    """Parse the JSON header bytes (without the 8-byte prefix) into a SafetensorsHeader.

    Checks: UTF-8 JSON object within `tracker.shared.bounded.SAFETENSORS_HEADER` (depth, values); `__metadata__` maps str → str; each tensor has a string dtype,
    a shape of non-negative ints and `data_offsets` [begin, end] with begin <= end, and for known
    dtypes `end - begin` equals the shape's element count times the dtype size. When
    `file_size` is given (the tree's LFS pointer size), the tensors must cover the data section
    exactly, in offset order from 0 without gaps or overlaps to its end (`_covers`). Any violation
    raises UnreadableArtifactError naming the tensor.
    """
    try:
        obj = load_json(raw, "safetensors header", SAFETENSORS_HEADER)
    except BoundsError as exc:
        why = str(exc).removeprefix("could not read safetensors header: ")
        raise UnreadableArtifactError(f"safetensors header is not UTF-8 JSON: {why}") from exc
    if not isinstance(obj, dict):
        raise UnreadableArtifactError(
            f"safetensors header is a JSON {type(obj).__name__}, not an object"
        )
    if len(obj) > MAX_TENSORS:
        raise UnreadableArtifactError(f"safetensors header lists {len(obj)} entries")
    metadata_obj = obj.pop("__metadata__", {})
    if metadata_obj is None:
        metadata_obj = {}
    if not isinstance(metadata_obj, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata_obj.items()
    ):
        raise UnreadableArtifactError("safetensors __metadata__ must map strings to strings")
    data_size = None if file_size is None else file_size - 8 - len(raw)
    tensors: dict[str, TensorInfo] = {}
    spans: list[tuple[int, int, str]] = []
    for name, spec in obj.items():
        tensors[name], begin, end = _tensor(name, spec, data_size)
        spans.append((begin, end, name))
    if data_size is not None:
        _covers(spans, data_size)
    return SafetensorsHeader(tensors=tensors, metadata=dict(metadata_obj))


def _covers(spans: list[tuple[int, int, str]], data_size: int) -> None:
    """The tensors' byte ranges, in offset order, must cover the data section exactly: from 0,
    without gaps or overlaps, to its last byte (the format requires it: "the byte buffer needs to
    be entirely indexed, and cannot contain holes"; the safetensors library refuses such a file).
    The data section's size comes from the tree's LFS pointer, so a header damaged in a way that
    keeps it parseable and self-consistent (a shape and its offsets shrunk together, a tensor
    dropped) no longer matches the file it claims to describe."""
    start = 0
    for begin, end, name in sorted(spans):
        if begin != start:
            where = "a gap before it" if begin > start else "it overlaps the tensor before it"
            raise UnreadableArtifactError(
                f"tensor {name!r}: data_offsets begin at {begin}, not at {start} ({where})"
            )
        start = end
    if start != data_size:
        raise UnreadableArtifactError(
            f"the tensors' data ends at byte {start} of the data section, but the file's size "
            f"(the LFS pointer's) leaves {data_size} bytes for it"
        )


def _tensor(name: str, spec: Any, data_size: int | None) -> tuple[TensorInfo, int, int]:
    if not isinstance(spec, dict):
        raise UnreadableArtifactError(f"tensor {name!r}: entry is not an object")
    dtype, shape, offsets = spec.get("dtype"), spec.get("shape"), spec.get("data_offsets")
    if not isinstance(dtype, str) or not dtype:
        raise UnreadableArtifactError(f"tensor {name!r}: dtype missing or not a string")
    if not isinstance(shape, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
    ):
        raise UnreadableArtifactError(f"tensor {name!r}: shape must be a list of ints >= 0")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(isinstance(o, int) and not isinstance(o, bool) and o >= 0 for o in offsets)
        or offsets[0] > offsets[1]
    ):
        raise UnreadableArtifactError(f"tensor {name!r}: data_offsets must be [begin, end]")
    nbytes = offsets[1] - offsets[0]
    size = DTYPE_BYTES.get(dtype)
    if size is not None:
        expected = math.ceil(math.prod(shape) * size)
        if expected != nbytes:
            raise UnreadableArtifactError(
                f"tensor {name!r}: {dtype}{shape} needs {expected} bytes but data_offsets span {nbytes}"
            )
    if data_size is not None and offsets[1] > data_size:
        raise UnreadableArtifactError(
            f"tensor {name!r}: data_offsets end at {offsets[1]}, past the {data_size}-byte data section"
        )
    return TensorInfo(dtype=dtype, shape=tuple(shape), nbytes=nbytes), offsets[0], offsets[1]


def parse_file_prefix(
    data: bytes, max_header_bytes: int, *, file_size: int | None = None
) -> SafetensorsHeader:
    """Parse a header from the first bytes of a safetensors file (prefix + at least the header).

    UnreadableArtifactError when `data` is shorter than the declared header (truncated file);
    with `file_size`, when a tensor lies past the end of a file that size.
    """
    n = header_length(data, max_header_bytes)
    if len(data) < 8 + n:
        raise UnreadableArtifactError(
            f"safetensors header declares {n} bytes but only {len(data) - 8} follow (truncated)"
        )
    return parse_header(data[8 : 8 + n], file_size=file_size)
