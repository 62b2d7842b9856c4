"""Tensor sets of model checkpoints: names (each architecture's standard HF state-dict naming),
dtypes and shapes, derived from config.json.

`model_tensors(config)` lists every tensor the checkpoint declares; no data is involved.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracker.shared.errors import TrackerError

DTYPE_BYTES: Mapping[str, int] = {
    "F64": 8,
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
}

TORCH_DTYPES: Mapping[str, str] = {
    "float32": "F32",
    "float16": "F16",
    "bfloat16": "BF16",
    "torch.float32": "F32",
    "torch.float16": "F16",
    "torch.bfloat16": "BF16",
}


class WeightsSpecError(TrackerError):
    """A config or index from which no consistent set of tensors can be generated."""


@dataclass(frozen=True)
class Tensor:
    """One tensor to declare: name, safetensors dtype and shape."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return DTYPE_BYTES[self.dtype] * math.prod(self.shape)


def _dtype(cfg: Mapping[str, Any], override: str | None) -> str:
    if override is not None:
        return override
    text = cfg.get("text_config")
    nested = text.get("torch_dtype") or text.get("dtype") if isinstance(text, Mapping) else None
    raw = (
        cfg.get("torch_dtype") or cfg.get("dtype") or nested or cfg.get("params_dtype") or "float32"
    )
    if raw not in TORCH_DTYPES:
        raise WeightsSpecError(f"unsupported torch dtype {raw!r}")
    return TORCH_DTYPES[raw]


def _int(cfg: Mapping[str, Any], *keys: str) -> int:
    for key in keys:
        value = cfg.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    raise WeightsSpecError(f"config lacks a positive integer {' / '.join(keys)}")


def _attention(p: str, cfg: Mapping[str, Any], dt: str) -> list[Tensor]:
    hidden = _int(cfg, "hidden_size")
    heads = _int(cfg, "num_attention_heads")
    kv = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim") or hidden // heads
    out = [
        Tensor(f"{p}.self_attn.q_proj.weight", dt, (heads * head_dim, hidden)),
        Tensor(f"{p}.self_attn.k_proj.weight", dt, (kv * head_dim, hidden)),
        Tensor(f"{p}.self_attn.v_proj.weight", dt, (kv * head_dim, hidden)),
        Tensor(f"{p}.self_attn.o_proj.weight", dt, (hidden, heads * head_dim)),
        Tensor(f"{p}.input_layernorm.weight", dt, (hidden,)),
        Tensor(f"{p}.post_attention_layernorm.weight", dt, (hidden,)),
    ]
    if cfg.get("attention_bias"):
        out += [
            Tensor(f"{p}.self_attn.q_proj.bias", dt, (heads * head_dim,)),
            Tensor(f"{p}.self_attn.k_proj.bias", dt, (kv * head_dim,)),
            Tensor(f"{p}.self_attn.v_proj.bias", dt, (kv * head_dim,)),
        ]
    return out


def _decoder(
    cfg: Mapping[str, Any], dt: str, mlp: Callable[[str, Mapping[str, Any], str], list[Tensor]]
) -> list[Tensor]:
    hidden = _int(cfg, "hidden_size")
    vocab = _int(cfg, "vocab_size")
    out = [Tensor("model.embed_tokens.weight", dt, (vocab, hidden))]
    for i in range(_int(cfg, "num_hidden_layers")):
        p = f"model.layers.{i}"
        out += _attention(p, cfg, dt) + mlp(p, cfg, dt)
    out.append(Tensor("model.norm.weight", dt, (hidden,)))
    if not cfg.get("tie_word_embeddings", False):
        out.append(Tensor("lm_head.weight", dt, (vocab, hidden)))
    return out


def _qk_norm_attention(p: str, cfg: Mapping[str, Any], dt: str) -> list[Tensor]:
    hidden, heads = _int(cfg, "hidden_size"), _int(cfg, "num_attention_heads")
    head_dim = cfg.get("head_dim") or hidden // heads
    return [
        Tensor(f"{p}.self_attn.q_norm.weight", dt, (head_dim,)),
        Tensor(f"{p}.self_attn.k_norm.weight", dt, (head_dim,)),
    ]


def _dense_mlp(p: str, cfg: Mapping[str, Any], dt: str) -> list[Tensor]:
    hidden, inter = _int(cfg, "hidden_size"), _int(cfg, "intermediate_size")
    return [
        Tensor(f"{p}.mlp.gate_proj.weight", dt, (inter, hidden)),
        Tensor(f"{p}.mlp.up_proj.weight", dt, (inter, hidden)),
        Tensor(f"{p}.mlp.down_proj.weight", dt, (hidden, inter)),
    ]


def _mixtral_mlp(p: str, cfg: Mapping[str, Any], dt: str) -> list[Tensor]:
    hidden, inter = _int(cfg, "hidden_size"), _int(cfg, "intermediate_size")
    experts = _int(cfg, "num_local_experts")
    out = [Tensor(f"{p}.block_sparse_moe.gate.weight", dt, (experts, hidden))]
    for j in range(experts):
        e = f"{p}.block_sparse_moe.experts.{j}"
        out += [
            Tensor(f"{e}.w1.weight", dt, (inter, hidden)),
            Tensor(f"{e}.w2.weight", dt, (hidden, inter)),
            Tensor(f"{e}.w3.weight", dt, (inter, hidden)),
        ]
    return out


def _granitemoe_mlp(p: str, cfg: Mapping[str, Any], dt: str) -> list[Tensor]:
    hidden, inter = _int(cfg, "hidden_size"), _int(cfg, "intermediate_size")
    experts = _int(cfg, "num_local_experts")
    m = f"{p}.block_sparse_moe"
    return [
        Tensor(f"{m}.input_linear.weight", dt, (experts, 2 * inter, hidden)),
        Tensor(f"{m}.output_linear.weight", dt, (experts, hidden, inter)),
        Tensor(f"{m}.router.layer.weight", dt, (experts, hidden)),
    ]


def _llama(cfg: Mapping[str, Any], dt: str) -> list[Tensor]:
    return _decoder(cfg, dt, _dense_mlp)


def _qwen3(cfg: Mapping[str, Any], dt: str) -> list[Tensor]:
    """Qwen3 dense: Llama naming plus per-head q_norm/k_norm."""
    return _decoder(cfg, dt, lambda p, c, d: _qk_norm_attention(p, c, d) + _dense_mlp(p, c, d))


def _qwen3_vl(cfg: Mapping[str, Any], dt: str) -> list[Tensor]:
    """Qwen3VLForConditionalGeneration: `model.language_model.*` (Qwen3 text), `model.visual.*`
    (ViT blocks, patch/pos embeddings, merger and deepstack mergers) and `lm_head`."""
    text, vision = cfg.get("text_config"), cfg.get("vision_config")
    if not isinstance(text, Mapping) or not isinstance(vision, Mapping):
        raise WeightsSpecError("a VLM config needs text_config and vision_config objects")
    lm = [
        Tensor(t.name.replace("model.", "model.language_model.", 1), t.dtype, t.shape)
        for t in _qwen3({**text, "tie_word_embeddings": True}, dt)
    ]
    if not cfg.get("tie_word_embeddings", text.get("tie_word_embeddings", False)):
        lm.append(
            Tensor("lm_head.weight", dt, (_int(text, "vocab_size"), _int(text, "hidden_size")))
        )
    h, inter = _int(vision, "hidden_size"), _int(vision, "intermediate_size")
    out_h, merge = _int(vision, "out_hidden_size"), _int(vision, "spatial_merge_size")
    patch, tpatch = _int(vision, "patch_size"), _int(vision, "temporal_patch_size")
    merged = h * merge * merge
    v = "model.visual"
    out = [
        Tensor(
            f"{v}.patch_embed.proj.weight",
            dt,
            (h, _int(vision, "in_channels"), tpatch, patch, patch),
        ),
        Tensor(f"{v}.patch_embed.proj.bias", dt, (h,)),
        Tensor(f"{v}.pos_embed.weight", dt, (_int(vision, "num_position_embeddings"), h)),
    ]

    def linear(name: str, rows: int, cols: int) -> list[Tensor]:
        return [Tensor(f"{name}.weight", dt, (rows, cols)), Tensor(f"{name}.bias", dt, (rows,))]

    for i in range(_int(vision, "depth")):
        b = f"{v}.blocks.{i}"
        out += [
            Tensor(f"{b}.norm1.weight", dt, (h,)),
            Tensor(f"{b}.norm1.bias", dt, (h,)),
            Tensor(f"{b}.norm2.weight", dt, (h,)),
            Tensor(f"{b}.norm2.bias", dt, (h,)),
        ]
        out += linear(f"{b}.attn.qkv", 3 * h, h) + linear(f"{b}.attn.proj", h, h)
        out += linear(f"{b}.mlp.linear_fc1", inter, h) + linear(f"{b}.mlp.linear_fc2", h, inter)
    mergers = [(f"{v}.merger", h)] + [
        (f"{v}.deepstack_merger_list.{j}", merged)
        for j in range(len(vision.get("deepstack_visual_indexes") or []))
    ]
    for m, norm_width in mergers:
        out += [
            Tensor(f"{m}.norm.weight", dt, (norm_width,)),
            Tensor(f"{m}.norm.bias", dt, (norm_width,)),
        ]
        out += linear(f"{m}.linear_fc1", merged, merged) + linear(f"{m}.linear_fc2", out_h, merged)
    return lm + out


def _mixtral(cfg: Mapping[str, Any], dt: str) -> list[Tensor]:
    return _decoder(cfg, dt, _mixtral_mlp)


def _granitemoe(cfg: Mapping[str, Any], dt: str) -> list[Tensor]:
    return _decoder(cfg, dt, _granitemoe_mlp)


def _bloom(cfg: Mapping[str, Any], dt: str) -> list[Tensor]:
    """BloomModel's state dict (no `transformer.` prefix), as bigscience's checkpoints store it."""
    h = _int(cfg, "n_embed", "hidden_size")
    out = [
        Tensor("word_embeddings.weight", dt, (_int(cfg, "vocab_size"), h)),
        Tensor("word_embeddings_layernorm.weight", dt, (h,)),
        Tensor("word_embeddings_layernorm.bias", dt, (h,)),
        Tensor("ln_f.weight", dt, (h,)),
        Tensor("ln_f.bias", dt, (h,)),
    ]
    for i in range(_int(cfg, "n_layer", "num_hidden_layers")):
        p = f"h.{i}"
        for norm in ("input_layernorm", "post_attention_layernorm"):
            out += [Tensor(f"{p}.{norm}.weight", dt, (h,)), Tensor(f"{p}.{norm}.bias", dt, (h,))]
        for name, rows, cols in (
            ("self_attention.query_key_value", 3 * h, h),
            ("self_attention.dense", h, h),
            ("mlp.dense_h_to_4h", 4 * h, h),
            ("mlp.dense_4h_to_h", h, 4 * h),
        ):
            out += [
                Tensor(f"{p}.{name}.weight", dt, (rows, cols)),
                Tensor(f"{p}.{name}.bias", dt, (rows,)),
            ]
    return out


def _qwen(cfg: Mapping[str, Any], dt: str) -> list[Tensor]:
    """Qwen (v1) QWenLMHeadModel, from its remote code: fused c_attn with bias, SwiGLU w1/w2/c_proj."""
    h = _int(cfg, "hidden_size", "n_embd")
    vocab = _int(cfg, "padded_vocab_size", "vocab_size")
    ff = _int(cfg, "intermediate_size", "ffn_hidden_size") // 2
    out = [
        Tensor("transformer.wte.weight", dt, (vocab, h)),
        Tensor("transformer.ln_f.weight", dt, (h,)),
    ]
    for i in range(_int(cfg, "num_hidden_layers", "n_layer")):
        p = f"transformer.h.{i}"
        out += [
            Tensor(f"{p}.ln_1.weight", dt, (h,)),
            Tensor(f"{p}.attn.c_attn.weight", dt, (3 * h, h)),
            Tensor(f"{p}.attn.c_attn.bias", dt, (3 * h,)),
            Tensor(f"{p}.attn.c_proj.weight", dt, (h, h)),
            Tensor(f"{p}.ln_2.weight", dt, (h,)),
            Tensor(f"{p}.mlp.w1.weight", dt, (ff, h)),
            Tensor(f"{p}.mlp.w2.weight", dt, (ff, h)),
            Tensor(f"{p}.mlp.c_proj.weight", dt, (h, ff)),
        ]
    out.append(Tensor("lm_head.weight", dt, (vocab, h)))
    return out


def _fp8_linear(name: str, out_f: int, in_f: int, block: Sequence[int]) -> list[Tensor]:
    return [
        Tensor(f"{name}.weight", "F8_E4M3", (out_f, in_f)),
        Tensor(
            f"{name}.weight_scale_inv",
            "F32",
            (math.ceil(out_f / block[0]), math.ceil(in_f / block[1])),
        ),
    ]


def _deepseek_v3(cfg: Mapping[str, Any], dt: str) -> list[Tensor]:
    """DeepseekV3ForCausalLM with block-FP8 linears (weight + weight_scale_inv) and its MTP layers."""
    h = _int(cfg, "hidden_size")
    vocab = _int(cfg, "vocab_size")
    heads = _int(cfg, "num_attention_heads")
    q_lora, kv_lora = _int(cfg, "q_lora_rank"), _int(cfg, "kv_lora_rank")
    nope, rope, v = (
        _int(cfg, "qk_nope_head_dim"),
        _int(cfg, "qk_rope_head_dim"),
        _int(cfg, "v_head_dim"),
    )
    inter, moe_inter = _int(cfg, "intermediate_size"), _int(cfg, "moe_intermediate_size")
    experts, shared = _int(cfg, "n_routed_experts"), cfg.get("n_shared_experts") or 0
    dense_layers = cfg.get("first_k_dense_replace") or 0
    layers = _int(cfg, "num_hidden_layers")
    mtp = cfg.get("num_nextn_predict_layers") or 0
    quant = cfg.get("quantization_config") or {}
    block = quant.get("weight_block_size")

    def linear(name: str, out_f: int, in_f: int) -> list[Tensor]:
        if block:
            return _fp8_linear(name, out_f, in_f, block)
        return [Tensor(f"{name}.weight", dt, (out_f, in_f))]

    def mlp(p: str, width: int) -> list[Tensor]:
        return (
            linear(f"{p}.gate_proj", width, h)
            + linear(f"{p}.up_proj", width, h)
            + linear(f"{p}.down_proj", h, width)
        )

    out = [
        Tensor("model.embed_tokens.weight", dt, (vocab, h)),
        Tensor("model.norm.weight", dt, (h,)),
    ]
    out.append(Tensor("lm_head.weight", dt, (vocab, h)))
    for i in range(layers + mtp):
        p = f"model.layers.{i}"
        a = f"{p}.self_attn"
        out += [
            Tensor(f"{p}.input_layernorm.weight", dt, (h,)),
            Tensor(f"{p}.post_attention_layernorm.weight", dt, (h,)),
            Tensor(f"{a}.q_a_layernorm.weight", dt, (q_lora,)),
            Tensor(f"{a}.kv_a_layernorm.weight", dt, (kv_lora,)),
        ]
        out += linear(f"{a}.q_a_proj", q_lora, h)
        out += linear(f"{a}.q_b_proj", heads * (nope + rope), q_lora)
        out += linear(f"{a}.kv_a_proj_with_mqa", kv_lora + rope, h)
        out += linear(f"{a}.kv_b_proj", heads * (nope + v), kv_lora)
        out += linear(f"{a}.o_proj", h, heads * v)
        if i < dense_layers:
            out += mlp(f"{p}.mlp", inter)
        else:
            out += [
                Tensor(f"{p}.mlp.gate.weight", dt, (experts, h)),
                Tensor(f"{p}.mlp.gate.e_score_correction_bias", "F32", (experts,)),
            ]
            for j in range(experts):
                out += mlp(f"{p}.mlp.experts.{j}", moe_inter)
            if shared:
                out += mlp(f"{p}.mlp.shared_experts", moe_inter * shared)
        if i >= layers:  # multi-token-prediction module
            out += [
                Tensor(f"{p}.embed_tokens.weight", dt, (vocab, h)),
                Tensor(f"{p}.enorm.weight", dt, (h,)),
                Tensor(f"{p}.hnorm.weight", dt, (h,)),
                Tensor(f"{p}.eh_proj.weight", dt, (h, 2 * h)),
                Tensor(f"{p}.shared_head.norm.weight", dt, (h,)),
                Tensor(f"{p}.shared_head.head.weight", dt, (vocab, h)),
            ]
    return out


ARCHITECTURES: Mapping[str, Callable[[Mapping[str, Any], str], list[Tensor]]] = {
    "LlamaForCausalLM": _llama,
    "MistralForCausalLM": _llama,
    "Qwen3ForCausalLM": _qwen3,
    "Qwen3VLForConditionalGeneration": _qwen3_vl,
    "MixtralForCausalLM": _mixtral,
    "GraniteMoeForCausalLM": _granitemoe,
    "BloomForCausalLM": _bloom,
    "BloomModel": _bloom,
    "QWenLMHeadModel": _qwen,
    "DeepseekV3ForCausalLM": _deepseek_v3,
}
"""Architectures (config.json `architectures[0]`) whose state-dict naming this module knows."""


def model_tensors(config: Mapping[str, Any], *, dtype: str | None = None) -> list[Tensor]:
    """Every tensor the checkpoint of `config` declares (dtype from `torch_dtype` unless given).

    Raises WeightsSpecError for an unknown architecture or missing/invalid dimensions.
    """
    archs = config.get("architectures")
    if not isinstance(archs, list) or not archs or archs[0] not in ARCHITECTURES:
        raise WeightsSpecError(f"no tensor naming known for architectures {archs!r}")
    return ARCHITECTURES[archs[0]](config, _dtype(config, dtype))


def rotary_inv_freq(config: Mapping[str, Any], name: str) -> Tensor:
    """The fp32 `rotary_emb.inv_freq` buffer some checkpoints (Llama-2) store, named `name`."""
    hidden, heads = _int(config, "hidden_size"), _int(config, "num_attention_heads")
    head_dim = config.get("head_dim") or hidden // heads
    return Tensor(name, "F32", (head_dim // 2,))
