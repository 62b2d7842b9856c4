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
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from tracker.shared.bounded import bounds_for, load_json
from tracker.shared.errors import UnreadableArtifactError
from tracker.shared.estimate_values import CheckpointCensus, SafetensorsHeader

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
INDEX_FILES = ("model.safetensors.index.json",)
_TOTAL_SIZE = re.compile(rb'"total_size"\s*:\s*([0-9]{1,20})\b')


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


def compare(
    headers: Mapping[str, SafetensorsHeader],
    derived_total: int,
    *,
    layers: int | None = None,
    bits: int = 4,
) -> CheckpointCensus | None:
    """The census of `headers` and `derived_total`'s delta against it; None without headers.

    `layers`: the layer count transformers builds (tensors of later layer indexes are modules it
    does not build); `bits`: bits per packed value of I32-packed weights. Read from each shard's
    `ShardCensus` (`header_census(header)`: its tensors walked once, whoever asks first).
    """
    if not headers:
        return None
    census: dict[str, int] = {}
    total_bytes = params = scales = buffers = not_built = 0
    packed = False
    for header in headers.values():
        shard = header_census(header)
        for dtype, n in shard.dtypes.items():
            census[dtype] = census.get(dtype, 0) + n
        total_bytes += shard.bytes
        for (kind, _dtype, layer, pack), n in shard.groups.items():
            if kind == "scale":
                scales += n
            elif kind == "buffer":
                buffers += n
            elif kind == "mtp" or (layers is not None and layer >= layers):
                not_built += n
            else:
                stored = _unpacked(pack, n, bits)
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
    return header_census(header).stored_by_dtype(layers=layers, bits=bits)


@dataclass(frozen=True)
class ShardCensus:
    """One shard's tensors counted once, whatever the config: `dtypes` elements per dtype and
    `bytes` over every tensor; `groups` elements per (kind, dtype, layer, pack), kind one of
    scale / buffer / mtp / param (checked in that order, as `compare` does), layer the tensor's
    `layers.N` index (-1: none), pack `i32` (I32 qweight/packed) / `packed` (a packed dtype's
    blocks/qweight/packed/weight) / "" (not packed). A config's layer count and bits then take
    a few groups per shard instead of a walk of its tensors (DeepSeek-R1: 91,991 tensors in 163
    shards, a few dozen groups each)."""

    dtypes: Mapping[str, int]
    bytes: int
    groups: Mapping[tuple[str, str, int, str], int]

    def stored_by_dtype(self, *, layers: int | None = None, bits: int = 4) -> dict[str, int]:
        """`header_by_dtype` from the groups: param groups of layers transformers builds."""
        out: dict[str, int] = {}
        for (kind, dtype, layer, pack), n in self.groups.items():
            if kind != "param" or (layers is not None and layer >= layers):
                continue
            out[dtype] = out.get(dtype, 0) + _unpacked(pack, n, bits)
        return out


def _unpacked(pack: str, n: int, bits: int) -> int:
    """Parameters `n` stored elements of pack kind `pack` hold (see ShardCensus): I32-packed
    weights hold 32 / bits values per element, packed-dtype weights 8 / bits per byte when
    bits ≤ 4 (8-bit weights are not packed)."""
    if pack == "i32":
        return n * (32 // bits)
    if pack == "packed" and bits <= 4:
        return n * (8 // bits)
    return n


def header_census(header: SafetensorsHeader) -> ShardCensus:
    """`header`'s ShardCensus, its tensors walked once per header object whoever asks first: the
    estimate's `compare` and preflight's capacity of the same revision share it instead of walking
    the tensors twice. Kept on the (frozen) header itself, so it lives exactly as long as it."""
    found: ShardCensus | None = header.__dict__.get(_CENSUS)
    if found is None:
        found = shard_census(header)
        object.__setattr__(header, _CENSUS, found)
    return found


_CENSUS = "_shard_census"


def shard_census(header: SafetensorsHeader) -> ShardCensus:
    """Walk `header`'s tensors once into a ShardCensus (`header_census` keeps it)."""
    dtypes: dict[str, int] = {}
    groups: dict[tuple[str, str, int, str], int] = {}
    total = 0
    for name, info in header.tensors.items():
        dtype = info.dtype
        n = _elements(info.shape)
        dtypes[dtype] = dtypes.get(dtype, 0) + n
        total += info.nbytes
        lowered = name.lower()
        layer, pack = -1, ""
        if "quant_state" in lowered or _SCALE.search(lowered.rsplit(".", 1)[-1]):
            kind = "scale"
        elif BUFFER_PATTERN.search(name):
            kind = "buffer"
        elif lowered.startswith(("mtp.", "model.mtp.")):
            kind = "mtp"
        else:
            kind = "param"
            index = LAYER_INDEX.search(name)
            if index:
                layer = int(index.group(1))
            if dtype == "I32" and ("qweight" in lowered or "packed" in lowered):
                pack = "i32"
            elif dtype in PACKED_DTYPES and (
                "blocks" in lowered
                or "qweight" in lowered
                or "packed" in lowered
                or "weight" in lowered
            ):
                pack = "packed"
        key = (kind, dtype, layer, pack)
        groups[key] = groups.get(key, 0) + n
    return ShardCensus(dtypes=dtypes, bytes=total, groups=groups)


CensusCache = MutableMapping[tuple[str, str], ShardCensus]
"""Shard censuses by (path, content identity): what `count_shards` keeps across revisions."""


def count_shards(
    headers: Mapping[str, SafetensorsHeader],
    identity: Mapping[str, str],
    cache: CensusCache,
) -> None:
    """Give each of a revision's shard headers its census before the revision is analysed: a
    shard whose content (`identity`: path → blob id / LFS oid) an earlier revision had keeps
    that census (no walk), any other is walked now and kept. The estimate's `compare` and
    preflight's capacity then read `header_census(header)` without walking (a revision that keeps its
    163 shards walks none)."""
    for path, header in headers.items():
        key = (path, identity.get(path, ""))
        if not key[1]:
            continue
        known = cache.get(key)
        if known is None:
            cache[key] = header_census(header)
        elif _CENSUS not in header.__dict__:
            object.__setattr__(header, _CENSUS, known)  # what header_census reads first


def index_total_size(files: Mapping[str, bytes]) -> int | None:
    """The index's `metadata.total_size`. An index is megabytes of `weight_map` (string values):
    a single numeric `"total_size"` in it can only be the metadata's, read without parsing the
    rest; anything else is parsed in full."""
    for name in INDEX_FILES:
        data = files.get(name)
        if data is None:
            continue
        found = _TOTAL_SIZE.findall(data)
        if len(found) == 1 and int(found[0]) > 0:
            return int(found[0])
        try:  # bounded, like every reader of upstream JSON (issue 10)
            meta = load_json(data, name, bounds_for(name)).get("metadata") or {}
            size = meta.get("total_size")
        except (
            ValueError, AttributeError, UnicodeDecodeError, RecursionError, UnreadableArtifactError
        ):  # fmt: skip
            return None
        if isinstance(size, int | float) and not isinstance(size, bool) and size > 0:
            return int(size)
    return None
