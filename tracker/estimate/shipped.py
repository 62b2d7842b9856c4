"""The weights as shipped: what serving (and a quantized checkpoint's LoRA base) holds (pure).

Users serve a checkpoint in the format it ships in (vLLM, SGLang and transformers load FP8, MXFP4,
NF4, GPTQ and AWQ checkpoints as they are), so the serving weights follow the checkpoint, whether
or not our parameter count is verified:

1. the checkpoint's bytes: the index's `metadata.total_size` where the revision has an index (a
   shard whose header is missing then changes the census, never the bytes), else the bytes of
   the safetensors headers read (dtype × shape of every tensor, scales included);
2. without headers, the config's `quantization_config` applied to our count: the quantized
   linears of the layers at their bytes per weight with scales and zeros (below), everything
   else (embeddings, head, norms, towers, and modules the config leaves unquantized) at 2 bytes;
3. without either, bf16 (2 bytes per parameter) of our count.

Bytes per quantized weight (constants included):
- FP8 (`quant_method: fp8`, DeepSeek-V3/R1): 1 byte, plus an fp32 scale per
  `weight_block_size` block (128 × 128: 4 / 16,384 bytes);
- MXFP4 (`quant_method: mxfp4`, gpt-oss; compressed-tensors `mxfp4-pack-quantized`, Kimi-K3):
  4-bit values, 0.5 byte, plus a U8 (E8M0) scale per group of 32: 1 / 32 byte;
- NVFP4 (compressed-tensors `nvfp4-pack-quantized`): 0.5 byte plus an FP8 scale per 16;
- bitsandbytes NF4/FP4 (`load_in_4bit`): 0.5 byte plus an absmax per 64 values, 8-bit with
  an fp32 constant per 256 blocks when double-quantized (`bnb_4bit_use_double_quant`), else
  fp32; `load_in_8bit`: 1 byte (row scales negligible);
- GPTQ / AWQ (and compressed-tensors int `pack-quantized`): `bits` / 8 bytes plus, per
  `group_size` weights, an fp16 scale and a `bits`-wide zero ((2 + bits / 8) / group_size);
  `group_size` -1 (one group per row) leaves the constants negligible.
Which layer parameters are quantized: the linears of every layer (norms left out, routers too
where the config names them unconverted); `modules_to_not_convert` / compressed-tensors `ignore`
patterns naming attention, shared experts, the dense MLP or the router leave those components
at 2 bytes (gpt-oss and Kimi-K3 quantize their routed experts only).

A quantized checkpoint (fewer than 2 bytes per parameter as shipped) also gets the bf16 figure of
our count as a second serving row, labelled as an upcast: what a user who dequantizes (a card
without FP8 or FP4 kernels, a framework without the quantizer) would hold.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tracker.estimate.reading import Reading
from tracker.shared.estimate_values import CheckpointCensus

BF16 = 2.0
LAYER_COMPONENTS = (
    "attention",
    "linear_attention",
    "ssm",
    "dense_mlp",
    "routed_experts",
    "shared_experts",
    "router",
)
"""The components of the layers whose linears a quantizer converts (norms are never converted)."""

# which words in a `modules_to_not_convert` / `ignore` pattern leave which component unconverted
_IGNORED = (
    (re.compile(r"shared_expert"), ("shared_experts",)),
    (re.compile(r"self_attn|attention|\battn"), ("attention", "linear_attention")),
    (re.compile(r"mlp\\?\.\(?(gate|up|gate_up|down)(_proj|\|)"), ("dense_mlp",)),
    (re.compile(r"router|\.gate$|mlp\.gate\b|\bgate$"), ("router",)),
    (re.compile(r"mamba|mixer|ssm"), ("ssm",)),
)


@dataclass(frozen=True)
class Shipped:
    """The serving weights as shipped: `bytes`, where they come from (`source`: "checkpoint" or
    "quantization_config" or "derived"), the format in words, and whether it is quantized."""

    bytes: float
    source: str
    format: str
    quantized: bool


def quantization_config(config: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The config's `quantization_config` (top level, else the text config's)."""
    for where in (config, config.get("text_config")):
        if isinstance(where, Mapping):
            q = where.get("quantization_config")
            if isinstance(q, Mapping):
                return q
    return None


def _num(value: Any, default: float) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return default


def _patterns(q: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for key in ("modules_to_not_convert", "ignore", "llm_int8_skip_modules"):
        value = q.get(key)
        if isinstance(value, list):
            out += [str(v) for v in value if isinstance(v, str)]
    return out


def _unconverted(q: Mapping[str, Any]) -> set[str]:
    """The layer components a config's skip patterns leave at bf16."""
    out: set[str] = set()
    for pattern in _patterns(q):
        p = pattern.lower().removeprefix("re:")
        if "norm" in p.rsplit(".", 1)[-1]:
            continue  # a norm inside a module (q_norm, input_layernorm): never converted anyway
        for rx, components in _IGNORED:
            if rx.search(p):
                out.update(components)
    return out


def bytes_per_weight(q: Mapping[str, Any]) -> tuple[float, str] | None:
    """(bytes per quantized weight with its constants, the format in words) of a
    `quantization_config`; None for a method this table does not know."""
    method = str(q.get("quant_method", "")).lower()
    if method == "fp8":
        block = q.get("weight_block_size")
        if (
            isinstance(block, list)
            and len(block) == 2
            and all(isinstance(b, int) and b > 0 for b in block)
        ):
            return 1.0 + 4.0 / (block[0] * block[1]), (
                f"FP8 e4m3 with {block[0]}×{block[1]} block scales"
            )
        return 1.0, "FP8 e4m3"
    if method == "mxfp4":
        return 0.5 + 1 / 32, "MXFP4 (4-bit floats, a scale per 32)"
    if method == "bitsandbytes":
        if q.get("load_in_4bit"):
            kind = str(q.get("bnb_4bit_quant_type", "nf4")).upper()
            if q.get("bnb_4bit_use_double_quant"):
                return 0.5 + 1 / 64 + 4 / (64 * 256), f"{kind} (bitsandbytes, double-quantized)"
            return 0.5 + 4 / 64, f"{kind} (bitsandbytes)"
        if q.get("load_in_8bit"):
            return 1.0, "int8 (bitsandbytes LLM.int8)"
        return None
    if method in ("gptq", "awq"):
        bits = _num(q.get("bits", q.get("w_bit")), 4.0)
        group = _num(q.get("group_size", q.get("q_group_size")), 128.0)
        consts = (2 + bits / 8) / group if group > 0 else 0.0
        shown = f"group {int(group)}" if group > 0 else "one group per row"
        return bits / 8 + consts, f"{method.upper()} {int(bits)}-bit, {shown}, scales and zeros"
    if method == "compressed-tensors":
        fmt = str(q.get("format", "")).lower()
        groups = q.get("config_groups")
        weights: Mapping[str, Any] = {}
        if isinstance(groups, Mapping):
            for g in groups.values():
                if isinstance(g, Mapping) and isinstance(g.get("weights"), Mapping):
                    weights = g["weights"]
                    fmt = str(g.get("format") or fmt).lower()
                    break
        bits = _num(weights.get("num_bits"), 8.0)
        group = _num(weights.get("group_size"), 0.0)
        if fmt.startswith("mxfp4"):
            return 0.5 + 1 / (group or 32), f"MXFP4 (4-bit floats, a scale per {int(group or 32)})"
        if fmt.startswith("nvfp4"):
            return 0.5 + 1 / (group or 16), f"NVFP4 (4-bit floats, a scale per {int(group or 16)})"
        if fmt.startswith("float"):
            return bits / 8, f"FP{int(bits)}"
        if fmt in ("pack-quantized", "int-quantized", "naive-quantized"):
            consts = (2 + bits / 8) / group if group > 0 else 0.0
            return bits / 8 + consts, f"int{int(bits)}" + (f", group {int(group)}" if group else "")
        return None
    return None


def _census_format(ck: CheckpointCensus) -> str:
    """The census's dtypes, the most elements first (`F8_E4M3 + BF16 + F32`)."""
    order = sorted(ck.dtypes, key=lambda d: (-ck.dtypes[d], d))
    return " + ".join(order)


def shipped(
    config: Mapping[str, Any],
    r: Reading,
    ck: CheckpointCensus | None,
    total_size: int | None,
) -> Shipped:
    """The serving weights as shipped (see the module docstring)."""
    q = quantization_config(config)
    per = bytes_per_weight(q) if q is not None else None
    if ck is not None and (total_size or ck.bytes):
        size = float(total_size or ck.bytes)
        label = _census_format(ck)
        if per is not None:
            label += f" ({per[1]})"
        quantized = ck.already_quantized or (r.total > 0 and size / r.total < 1.5)
        return Shipped(size, "checkpoint", label, quantized)
    if per is not None:
        unconverted = _unconverted(q or {})
        converted = sum(
            n for k, n in r.by_component.items() if k in LAYER_COMPONENTS and k not in unconverted
        )
        rest = r.total - converted
        return Shipped(converted * per[0] + rest * BF16, "quantization_config", per[1], True)
    return Shipped(r.total * BF16, "derived", "bf16", False)
