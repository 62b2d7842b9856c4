"""Checkpoint census from safetensors headers (ESTIMATES.md §1) and the self-check against it.

Stored parameters are counted the way transformers would build them:
- packed quantized weights are unpacked: U8/I8 `*_blocks` / `*packed*` / NF4 / NVFP4 weights hold
  8 / bits values per byte, I32 `qweight` (GPTQ/AWQ) holds 32 / bits values per element (bits from
  the config's `quantization_config`, 4 when it does not say; 8-bit weights are not packed);
- quantization bookkeeping is left out: scales (`scale`, `scale_inv`, `absmax`, `qzeros`,
  `g_idx`, `quant_map`, `quant_state`, `input_scale`, ...);
- buffers some checkpoints store are left out: rotary `inv_freq`, GPT-2's causal-mask `attn.bias`
  and `masked_bias`, `position_ids`, DeepSeek's `e_score_correction_bias` (a buffer in
  transformers);
- modules transformers does not build are left out: multi-token-prediction layers stored as
  `layers.N` with N ≥ num_hidden_layers (DeepSeek-V3's `num_nextn_predict_layers`) or under `mtp.`.
The census (elements per dtype) and bytes cover every tensor.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tracker.estimate_values import CheckpointCensus, SafetensorsHeader

PACKED_DTYPES = frozenset({"U8", "I8", "U4", "I4"})
QUANTIZED_DTYPES = frozenset({"F8_E4M3", "F8_E5M2", "F8_E8M0", "U8", "I8", "U4", "I4", "I32"})
SCALE_MARKERS = (
    "scale",
    "absmax",
    "qzeros",
    "zeros",
    "g_idx",
    "quant_map",
    "quant_state",
    "nested_",
    "weight_global",
)
BUFFER_PATTERN = re.compile(
    r"(inv_freq$|(^|\.)attn\.(masked_)?bias$|position_ids$|e_score_correction_bias$|"
    r"rotary_emb\.|\.cos_cached$|\.sin_cached$)"
)
LAYER_INDEX = re.compile(r"(?:^|\.)layers\.(\d+)\.")


def _elements(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= max(0, int(d))
    return n


def quant_bits(config: Mapping[str, Any]) -> int:
    """Bits per packed value from a `quantization_config` (4 when it does not say)."""
    for where in (config, config.get("text_config") or {}):
        q = where.get("quantization_config") if isinstance(where, Mapping) else None
        if isinstance(q, Mapping):
            bits = q.get("bits", q.get("w_bit", q.get("num_bits")))
            if isinstance(bits, int) and not isinstance(bits, bool) and 1 <= bits <= 16:
                return bits
    return 4


def _stored(name: str, dtype: str, n: int, bits: int) -> int:
    """Parameters a stored tensor of `n` elements holds (packed values unpacked)."""
    lowered = name.lower()
    if dtype == "I32" and ("qweight" in lowered or "packed" in lowered):
        return n * (32 // bits)
    if (
        dtype in PACKED_DTYPES
        and bits <= 4
        and (
            "blocks" in lowered
            or "qweight" in lowered
            or "packed" in lowered
            or "weight" in lowered
        )
    ):
        return n * (8 // bits)
    return n


def compare(
    headers: Mapping[str, SafetensorsHeader],
    derived_total: int,
    *,
    layers: int | None = None,
    bits: int = 4,
) -> CheckpointCensus | None:
    """The census of `headers` and `derived_total`'s delta against it; None without headers.

    `layers`: the layer count transformers builds (tensors of later layer indexes are modules it
    does not build); `bits`: bits per packed value of I32-packed weights.
    """
    if not headers:
        return None
    census: dict[str, int] = {}
    total_bytes = params = scales = buffers = not_built = 0
    packed = False
    for header in headers.values():
        for name, info in header.tensors.items():
            n = _elements(info.shape)
            census[info.dtype] = census.get(info.dtype, 0) + n
            total_bytes += info.nbytes
            lowered = name.lower()
            if "quant_state" in lowered or any(
                m in lowered.rsplit(".", 1)[-1] for m in SCALE_MARKERS
            ):
                scales += n
                continue
            if BUFFER_PATTERN.search(name):
                buffers += n
                continue
            index = LAYER_INDEX.search(name)
            if (
                index and layers is not None and int(index.group(1)) >= layers
            ) or lowered.startswith(("mtp.", "model.mtp.")):
                not_built += n
                continue
            stored = _stored(name, info.dtype, n, bits)
            packed = packed or stored != n
            params += stored
    quantized = packed or any(d in census for d in QUANTIZED_DTYPES)
    delta = None if params == 0 else round((derived_total - params) / params * 100, 4)
    return CheckpointCensus(
        params=params,
        bytes=total_bytes,
        dtypes=dict(sorted(census.items())),
        delta_pct=delta,
        already_quantized=quantized,
        bytes_per_param=round(total_bytes / derived_total, 4) if derived_total else None,
        scale_elements=scales,
        bookkeeping_elements=buffers,
        not_built_elements=not_built,
    )


_SCALE = re.compile("|".join(re.escape(m) for m in SCALE_MARKERS))


def stored_by_dtype(
    headers: Mapping[str, SafetensorsHeader], *, layers: int | None = None, bits: int = 4
) -> dict[str, int]:
    """The census's stored parameters per dtype (packed values unpacked; scales, buffers and
    modules transformers does not build left out, as in `compare`): their sum is `compare`'s
    `params`. Preflight's capacity reads bytes per parameter from it."""
    out: dict[str, int] = {}
    for header in headers.values():
        for dtype, n in header_by_dtype(header, layers=layers, bits=bits).items():
            out[dtype] = out.get(dtype, 0) + n
    return dict(sorted(out.items()))


def header_by_dtype(
    header: SafetensorsHeader, *, layers: int | None = None, bits: int = 4
) -> dict[str, int]:
    """`stored_by_dtype` of one shard's header (callers may cache it per shard content)."""
    out: dict[str, int] = {}
    for name, info in header.tensors.items():
        lowered = name.lower()
        if "quant_state" in lowered or _SCALE.search(lowered.rsplit(".", 1)[-1]):
            continue
        if BUFFER_PATTERN.search(name):
            continue
        if layers is not None:
            index = LAYER_INDEX.search(name)
            if index and int(index.group(1)) >= layers:
                continue
        if lowered.startswith(("mtp.", "model.mtp.")):
            continue
        n = _stored(name, info.dtype, _elements(info.shape), bits)
        out[info.dtype] = out.get(info.dtype, 0) + n
    return out
