"""The Linear modules a config implies, and what LoRA on `all-linear` adapts (pure).

The module tree is derived from the estimate's reading (LayerSpecs: each layer's attention and
FFN kind, widths, experts) and the module names transformers uses for the family (the pinned
release, 5.24.0). A module is (name, layer kind, in features, out features); its LoRA adapter at
rank r has r × (in + out) parameters. Both the estimate's memory table (`memory.lora_adapter_params`
via `all_linear_params`) and preflight's target resolution (`tracker.preflight.lora`) read it, so
they agree on one adapter count.

`all-linear` is what PEFT (0.21.2, on transformers 5.24.0, checked by running `get_peft_model`
on small configs of each family, tests/estimate/test_estimate_adapters.py) adapts for
`target_modules="all-linear"`: every Linear but the output head, and for the MoE families whose
state dict transformers 5 converts from v4's per-expert Linears (`conversion_mapping`'s
`mixtral` and `qwen2_moe` patterns, `PEFT_FUSED`) also the routed experts' fused 3-D parameters
and the router: PEFT maps v4's expert names onto them (`target_parameters`), `gate_up_proj` at
rank 2r (gate and up fused) and `down_proj` at rank r, each over all E experts, so
2r·E·(h + 2I) + r·E·(I + h) per layer, and the router r·(h + E). In the `qwen2_moe` pattern the
names `gate_proj`, `up_proj` and `down_proj` are taken for the experts: the Linears of those
names (the dense MLP, the shared experts) are then not adapted. In every other family the
routed experts are fused 3-D parameters that `all-linear` does not reach.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracker.estimate.reading import LayerSpec, Reading

_QKV_FUSED = {"bloom": "query_key_value", "gpt_neox": "query_key_value"}
_LLAMA_LIKE = {
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen2_moe",
    "qwen3",
    "qwen3_moe",
    "qwen3_next",
    "qwen3_5",
    "qwen3_5_text",
    "qwen3_5_moe",
    "qwen3_5_moe_text",
    "qwen3_vl",
    "qwen3_vl_text",
    "gemma",
    "gemma2",
    "gemma3",
    "gemma3_text",
    "granite",
    "granitemoe",
    "gpt_oss",
    "deepseek_v3",
    "kimi_k2",
    "llama4",
    "llama4_text",
    "phi3",
    "idefics3",
    "nemotron_h",
    "glm_moe_dsa",
    "deepseek_v32",
}
_QWEN_SHARED_GATE = {"qwen2_moe", "qwen3_next", "qwen3_5_moe", "qwen3_5_moe_text"}
_INDEXER = {"glm_moe_dsa", "deepseek_v32"}
_GATED_ATTENTION = {"qwen3_next", "qwen3_5", "qwen3_5_moe"}
_LINEAR_ROUTER = {"llama4"}  # Llama4Router subclasses nn.Linear: PEFT sees a Linear

Module = tuple[str, str, int, int]  # (name, kind, in, out)


def _text(config: Mapping[str, Any]) -> Mapping[str, Any]:
    for key in ("text_config", "language_config", "llm_config"):
        sub = config.get(key)
        if isinstance(sub, Mapping):
            return sub
    return config


def _int(cfg: Mapping[str, Any], *keys: str, default: int = 0) -> int:
    for k in keys:
        v = cfg.get(k)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return default


def _attention(spec: LayerSpec, style: str, cfg: Mapping[str, Any], h: int) -> list[Module]:
    full = "attention.full"
    if spec.attention in ("mha", "gqa", "mqa", "sliding"):
        q, k, v = spec.q_width, spec.k_width, spec.v_width
        if style == "gpt2":
            return [("c_attn", full, h, 3 * h), ("c_proj", full, h, h)]
        if style in _QKV_FUSED:
            return [(_QKV_FUSED[style], full, h, q + k + v), ("dense", full, q, h)]
        if style == "phi3":
            return [("qkv_proj", full, h, q + k + v), ("o_proj", full, q, h)]
        gate = 2 if style in _GATED_ATTENTION else 1  # the output gate rides on q_proj
        return [
            ("q_proj", full, h, gate * q),
            ("k_proj", full, h, k),
            ("v_proj", full, h, v),
            ("o_proj", full, q, h),
        ]
    if spec.attention == "mla":
        heads = _int(cfg, "num_attention_heads")
        nope, rope = _int(cfg, "qk_nope_head_dim"), _int(cfg, "qk_rope_head_dim")
        vdim, kv_lora = _int(cfg, "v_head_dim"), _int(cfg, "kv_lora_rank")
        q_lora = _int(cfg, "q_lora_rank")
        out: list[Module] = []
        if q_lora:
            out += [
                ("q_a_proj", full, h, q_lora),
                ("q_b_proj", full, q_lora, heads * (nope + rope)),
            ]
        else:
            out.append(("q_proj", full, h, heads * (nope + rope)))
        out += [
            ("kv_a_proj_with_mqa", full, h, kv_lora + rope),
            ("kv_b_proj", full, kv_lora, heads * (nope + vdim)),
            ("o_proj", full, heads * vdim, h),
        ]
        return out
    if spec.attention == "linear":
        kh, kd = _int(cfg, "linear_num_key_heads"), _int(cfg, "linear_key_head_dim")
        vh, vd = _int(cfg, "linear_num_value_heads"), _int(cfg, "linear_value_head_dim")
        lin = "attention.linear"
        if style == "qwen3_next":
            return [
                ("in_proj_qkvz", lin, h, 2 * kh * kd + 2 * vh * vd),
                ("in_proj_ba", lin, h, 2 * vh),
                ("out_proj", lin, vh * vd, h),
            ]
        return [
            ("in_proj_qkv", lin, h, 2 * kh * kd + vh * vd),
            ("in_proj_z", lin, h, vh * vd),
            ("in_proj_b", lin, h, vh),
            ("in_proj_a", lin, h, vh),
            ("out_proj", lin, vh * vd, h),
        ]
    if spec.attention == "ssm":
        heads, hd = _int(cfg, "mamba_num_heads"), _int(cfg, "mamba_head_dim")
        groups, state = _int(cfg, "n_groups", default=1), _int(cfg, "ssm_state_size")
        inner = heads * hd
        return [
            ("in_proj", "attention.linear", h, 2 * inner + 2 * groups * state + heads),
            ("out_proj", "attention.linear", inner, h),
        ]
    return []


def _ffn(spec: LayerSpec, style: str, cfg: Mapping[str, Any], h: int) -> list[Module]:
    if spec.ffn == "moe":
        out: list[Module] = []
        shared = spec.shared_width
        if shared:
            if style == "nemotron_h":
                out += [
                    ("up_proj", "mlp.shared", h, shared),
                    ("down_proj", "mlp.shared", shared, h),
                ]
            else:
                out += [
                    ("gate_proj", "mlp.shared", h, shared),
                    ("up_proj", "mlp.shared", h, shared),
                    ("down_proj", "mlp.shared", shared, h),
                ]
            if style in _QWEN_SHARED_GATE:
                out.append(("shared_expert_gate", "mlp.shared", h, 1))
        if style in _LINEAR_ROUTER:
            out.append(("router", "mlp.router", h, spec.experts))
        if spec.latent:
            out += [
                ("fc1_latent_proj", "mlp.experts", h, spec.latent),
                ("fc2_latent_proj", "mlp.experts", spec.latent, h),
            ]
        return out
    if spec.ffn == "none":
        return []
    width = spec.ffn_width
    dense = "mlp.dense"
    if style == "gpt2":
        return [("c_fc", dense, h, width), ("c_proj", dense, width, h)]
    if style in _QKV_FUSED:
        return [("dense_h_to_4h", dense, h, width), ("dense_4h_to_h", dense, width, h)]
    if style == "phi3":
        return [("gate_up_proj", dense, h, 2 * width), ("down_proj", dense, width, h)]
    if spec.gated:
        return [
            ("gate_proj", dense, h, width),
            ("up_proj", dense, h, width),
            ("down_proj", dense, width, h),
        ]
    return [("up_proj", dense, h, width), ("down_proj", dense, width, h)]


def _indexer(cfg: Mapping[str, Any], h: int, layers: int) -> list[Module]:
    """DeepSeek-V3.2 / GLM-5 sparse-attention indexer (per layer that has one)."""
    heads, hd = _int(cfg, "index_n_heads"), _int(cfg, "index_head_dim")
    q_lora = _int(cfg, "q_lora_rank")
    if not heads or not hd:
        return []
    types = cfg.get("indexer_types")  # GLM-5.3: "shared" layers reuse another layer's indexer
    count = sum(1 for t in types if t != "shared") if isinstance(types, list) else layers
    one = [
        ("wq_b", "attention.full", q_lora, heads * hd),
        ("wk", "attention.full", h, hd),
        ("weights_proj", "attention.full", h, heads),
    ]
    return one * count


def _vit_block(hv: int, inter: int, out: str) -> list[Module]:
    """One vision-transformer layer's Linears: q, k, v and the output projection `out` (hv × hv),
    then the two-matrix MLP fc1/fc2 (hv → inter → hv)."""
    vis = "vision"
    return [
        ("q_proj", vis, hv, hv),
        ("k_proj", vis, hv, hv),
        ("v_proj", vis, hv, hv),
        (out, vis, hv, hv),
        ("fc1", vis, hv, inter),
        ("fc2", vis, inter, hv),
    ]


def _vision(config: Mapping[str, Any]) -> list[Module] | str:
    """The vision tower's Linear modules (and the projector), or why they are not known."""
    v = config.get("vision_config")
    if not isinstance(v, Mapping):
        return []
    mt = str(config.get("model_type", ""))
    vis = "vision"
    if mt in ("qwen3_vl", "qwen3_5", "qwen3_5_moe"):
        depth, hv, inter = _int(v, "depth"), _int(v, "hidden_size"), _int(v, "intermediate_size")
        out_h = _int(v, "out_hidden_size")
        merge = hv * _int(v, "spatial_merge_size", default=2) ** 2
        block = [
            ("qkv", vis, hv, 3 * hv),
            ("proj", vis, hv, hv),
            ("linear_fc1", vis, hv, inter),
            ("linear_fc2", vis, inter, hv),
        ]
        deep = v.get("deepstack_visual_indexes") or []
        mergers = 1 + (len(deep) if isinstance(deep, list) else 0)
        return (
            block * depth
            + [("linear_fc1", vis, merge, merge), ("linear_fc2", vis, merge, out_h)] * mergers
        )
    if mt == "llama4":
        depth, hv, inter = (
            _int(v, "num_hidden_layers"),
            _int(v, "hidden_size"),
            _int(v, "intermediate_size"),
        )
        patch = _int(v, "patch_size")
        chans = _int(v, "num_channels", default=3)
        proj_in = _int(v, "projector_input_dim")
        proj_out = _int(v, "projector_output_dim")
        text_h = _int(_text(config), "hidden_size")
        adapter = _int(v, "vision_output_dim")
        block = _vit_block(hv, inter, "o_proj")
        ratio = v.get("pixel_shuffle_ratio") or 0.5
        shuffled = int(hv / (ratio * ratio)) if isinstance(ratio, int | float) and ratio else hv
        return block * depth + [
            ("linear", vis, chans * patch * patch, hv),
            ("fc1", vis, shuffled, proj_in),
            ("fc2", vis, proj_out, adapter),
            ("linear_1", vis, adapter, text_h),
        ]
    if mt in ("idefics3", "gemma3"):
        depth, hv, inter = (
            _int(v, "num_hidden_layers"),
            _int(v, "hidden_size"),
            _int(v, "intermediate_size"),
        )
        scale = _int(config, "scale_factor", default=2)
        text_h = _int(_text(config), "hidden_size")
        block = _vit_block(hv, inter, "out_proj")
        if mt == "gemma3":  # the projector is a bare parameter, not a Linear
            return block * depth
        return block * depth + [("proj", vis, hv * scale * scale, text_h)]
    if mt == "gemma4":
        depth, hv, inter = (
            _int(v, "num_hidden_layers"),
            _int(v, "hidden_size"),
            _int(v, "intermediate_size"),
        )
        patch = _int(v, "patch_size")
        text_h = _int(_text(config), "hidden_size")
        # Every projection is wrapped (`q_proj.linear`): only `all-linear` reaches them.
        block = (
            [("linear", vis, hv, hv)] * 4
            + [("linear", vis, hv, inter)] * 2
            + [("linear", vis, inter, hv)]
        )
        return block * depth + [
            ("input_proj", vis, 3 * patch * patch, hv),
            ("embedding_projection", vis, hv, text_h),
        ]
    if mt == "kimi_k25":
        return _kimi_k25_vision(config, v)
    return f"the vision tower of model_type {mt!r} has no module-name table"


# Kimi_K25VisionConfig's defaults in transformers 5.24.0: what the native build uses for a key
# the config lacks.
_KIMI_K25_VISION_DEFAULTS = {
    "hidden_size": 1152,
    "num_hidden_layers": 27,
    "intermediate_size": 4304,
}


def _kimi_k25_vision(config: Mapping[str, Any], v: Mapping[str, Any]) -> list[Module]:
    """Kimi-K2.5's MoonViT tower as transformers builds it natively: per layer separate
    q/k/v_proj, the attention output `proj`, the MLP's fc1/fc2; then the patch-merger projector
    (`mm_projector.in_proj`, `out_proj`) over merge-kernel-many vision tokens. The repo's own
    config names the widths `vt_*` (its remote code's keys); the native configuration class does
    not read them and keeps its defaults. A native key is read first, then the `vt_*` one (what
    the checkpoint holds: where it differs from the default, the native build would not load the
    weights), then the native default. In Kimi-K2.5's config the `vt_*` values equal them."""
    width = {
        k: _int(v, k, "vt_" + k, default=default)
        for k, default in _KIMI_K25_VISION_DEFAULTS.items()
    }
    hv, inter = width["hidden_size"], width["intermediate_size"]
    kernel = v.get("merge_kernel_size")
    if not (
        isinstance(kernel, list) and len(kernel) == 2 and all(isinstance(k, int) for k in kernel)
    ):
        kernel = [2, 2]  # the native default
    merged = hv * kernel[0] * kernel[1]
    text_h = _int(_text(config), "hidden_size")
    vis = "vision"
    block = _vit_block(hv, inter, "proj")
    return block * width["num_hidden_layers"] + [
        ("in_proj", vis, merged, merged),
        ("out_proj", vis, merged, text_h),
    ]


def _t5(cfg: Mapping[str, Any]) -> list[Module]:
    """T5: encoder blocks (self-attention q/k/v/o, wi/wo or gated wi_0/wi_1/wo) and decoder
    blocks (the same plus cross-attention q/k/v/o)."""
    d, inner = _int(cfg, "d_model"), _int(cfg, "num_heads") * _int(cfg, "d_kv")
    ff = _int(cfg, "d_ff")
    enc = _int(cfg, "num_layers")
    dec = _int(cfg, "num_decoder_layers", default=enc)
    gated = str(cfg.get("feed_forward_proj", "relu")).startswith("gated")
    attn = [("q", "attention.full", d, inner), ("k", "attention.full", d, inner),
            ("v", "attention.full", d, inner), ("o", "attention.full", inner, d)]  # fmt: skip
    ffn = (
        [("wi_0", "mlp.dense", d, ff), ("wi_1", "mlp.dense", d, ff)]
        if gated
        else [("wi", "mlp.dense", d, ff)]
    )
    ffn = [*ffn, ("wo", "mlp.dense", ff, d)]
    return (attn + ffn) * enc + (attn + attn + ffn) * dec


def _bert(cfg: Mapping[str, Any], architecture: str) -> list[Module]:
    """BERT: query/key/value, the attention output `dense`, the intermediate and output `dense`;
    a masked-LM head adds its transform `dense`."""
    h, inter = _int(cfg, "hidden_size"), _int(cfg, "intermediate_size")
    layer = [("query", "attention.full", h, h), ("key", "attention.full", h, h),
             ("value", "attention.full", h, h), ("dense", "attention.full", h, h),
             ("dense", "mlp.dense", h, inter), ("dense", "mlp.dense", inter, h)]  # fmt: skip
    head = [("dense", "head", h, h)] if architecture.endswith(("MaskedLM", "PreTraining")) else []
    return layer * _int(cfg, "num_hidden_layers") + head


def _gemma4(cfg: Mapping[str, Any]) -> list[Module]:
    """Gemma 4 text layers: sliding layers q/k/v/o at head_dim; full-attention layers at
    global_head_dim with global kv heads (and no v_proj when keys double as values); a dense
    MLP in every layer, plus a router Linear and fused experts when the MoE block is on."""
    h, heads = _int(cfg, "hidden_size"), _int(cfg, "num_attention_heads")
    hd, ghd = _int(cfg, "head_dim"), _int(cfg, "global_head_dim") or _int(cfg, "head_dim")
    kv, gkv = (
        _int(cfg, "num_key_value_heads"),
        _int(cfg, "num_global_key_value_heads") or _int(cfg, "num_key_value_heads"),
    )
    inter, experts = _int(cfg, "intermediate_size"), _int(cfg, "num_experts")
    full = "attention.full"
    out: list[Module] = []
    types = cfg.get("layer_types") or []
    for t in types:
        if t == "full_attention":
            out += [("q_proj", full, h, heads * ghd), ("k_proj", full, h, gkv * ghd)]
            if not cfg.get("attention_k_eq_v"):
                out.append(("v_proj", full, h, gkv * ghd))
            out.append(("o_proj", full, heads * ghd, h))
        else:
            out += [("q_proj", full, h, heads * hd), ("k_proj", full, h, kv * hd),
                    ("v_proj", full, h, kv * hd), ("o_proj", full, heads * hd, h)]  # fmt: skip
        out += [("gate_proj", "mlp.dense", h, inter), ("up_proj", "mlp.dense", h, inter),
                ("down_proj", "mlp.dense", inter, h)]  # fmt: skip
        if cfg.get("enable_moe_block") and experts:
            out.append(("proj", "mlp.router", h, experts))
    return out


def derive_modules(reading: Reading, config: Mapping[str, Any]) -> list[Module] | str:
    """Every Linear module the config implies (but the output head), or why not known."""
    text = _text(config)
    style = str(text.get("model_type") or config.get("model_type") or "")
    if style.endswith("_text"):
        style = {"qwen3_5_moe_text": "qwen3_5_moe"}.get(style, style.removesuffix("_text"))
    out: list[Module] = []
    if style == "t5":
        return _t5(text)
    if style == "bert":
        return _bert(text, reading.architecture)
    if style == "gemma4":
        if not isinstance(text.get("layer_types"), list):
            return "gemma4 without layer_types: the attention layout is not known"
        out = _gemma4(text)
        vision = _vision(config)
        return vision if isinstance(vision, str) else out + vision
    if style not in _LLAMA_LIKE | {"gpt2"} | set(_QKV_FUSED):
        return f"model_type {style!r} has no module-name table"
    if any(s.kind == "encoder" for s in reading.layers):
        return "encoder-decoder module names are not derived for this family"
    h = reading.hidden
    for spec in reading.layers:
        out += _attention(spec, style, text, h)
        out += _ffn(spec, style, text, h)
    if style in _INDEXER:
        out += _indexer(text, h, len(reading.layers))
    vision = _vision(config)
    if isinstance(vision, str):
        return vision
    return out + vision


PEFT_FUSED: Mapping[str, str] = {
    **dict.fromkeys(("mixtral", "minimax", "minimax_m2"), "mixtral"),
    **dict.fromkeys(
        (
            "afmoe",
            "beam",
            "cohere2_moe",
            "deepseek_v2",
            "deepseek_v3",
            "deepseek_v32",
            "dots1",
            "ernie4_5_moe",
            "exaone_moe",
            "flex_olmo",
            "glm4_moe",
            "glm4_moe_lite",
            "glm4v_moe",
            "glm_moe_dsa",
            "hunyuan_v1_moe",
            "longcat_flash",
            "mellum",
            "olmoe",
            "qwen3_moe",
            "qwen3_next",
            "qwen3_omni_moe",
            "qwen3_omni_moe_text",
            "qwen3_omni_moe_thinker",
            "sarvam_mla",
            "solar_open",
        ),
        "qwen2_moe",
    ),
}
"""model_type → the conversion pattern (transformers 5.24.0 `conversion_mapping`, plus PEFT's own
`mixtral`) under which PEFT 0.21.2 maps `all-linear` onto the fused experts and the router."""
TAKEN = {"mixtral": frozenset({"w1", "w2", "w3"}), "qwen2_moe": frozenset(
    {"gate_proj", "up_proj", "down_proj"})}  # fmt: skip
"""The Linear names each pattern maps onto the experts: no longer adapted as modules."""


EXPERTS_ADAPTED = (
    "all-linear adapts the routed experts: PEFT maps it onto their fused 3-D parameters "
    "(gate_up_proj at rank 2r, down_proj at rank r, over every expert) and the router"
)
EXPERTS_NOT_ADAPTED = (
    "all-linear does not adapt the routed experts: they are fused 3-D parameters in "
    "transformers 5, not Linear modules, and no target name resolves inside them"
)


def peft_fused(config: Mapping[str, Any]) -> str | None:
    """The conversion pattern PEFT applies to the model `config` describes (its top-level
    model_type, as `model.config.model_type`), or None."""
    return PEFT_FUSED.get(str(config.get("model_type") or ""))


def all_linear(
    reading: Reading, config: Mapping[str, Any], modules: list[Module]
) -> tuple[list[Module], str | None]:
    """What `all-linear` adapts of `modules` (see the module docstring), and whether the routed
    experts are among it ("adapted", "not adapted"; None without routed experts)."""
    moe = [spec for spec in reading.layers if spec.ffn == "moe" and spec.experts]
    pattern = peft_fused(config)
    if not moe:
        return list(modules), None
    if pattern is None:
        return list(modules), "not adapted"
    taken = TAKEN[pattern]
    out = [m for m in modules if m[0] not in taken and m[1] != "mlp.router"]
    h = reading.hidden
    for spec in moe:
        e, i = spec.experts, spec.moe_width
        out.append(("gate", "mlp.router", h, e))
        if spec.gated:
            # gate_up_proj at rank 2r: 2r·E·(h + 2I) = r·(2E·h + 4E·I)
            out.append(("experts.gate_up_proj", "mlp.experts", 2 * e * h, 4 * e * i))
        else:
            out.append(("experts.up_proj", "mlp.experts", e * h, e * i))
        out.append(("experts.down_proj", "mlp.experts", e * i, e * h))
    return out, "adapted"


FUSED_NAMES: Mapping[str, Mapping[str, str]] = {
    "mixtral": {"gate": "router", "w1": "gate_up", "w3": "gate_up", "w2": "down"},
    "qwen2_moe": {
        "gate": "router",
        "gate_proj": "gate_up",
        "up_proj": "gate_up",
        "down_proj": "down",
    },
}
"""Per conversion pattern, the v4 names PEFT 0.21.2 maps onto transformers 5's fused experts
(`gate_up_proj` from two names, `down_proj`) and the router, for a named target as for
`all-linear`."""


def _fused_name(pattern: str, target: str) -> str | None:
    """The v4 name of FUSED_NAMES[pattern] that `target` names (itself or a dotted suffix)."""
    for old in FUSED_NAMES[pattern]:
        if target == old or target.endswith(f".{old}"):
            return old
    return None


def named_target(
    reading: Reading, config: Mapping[str, Any], modules: list[Module], targets: list[str], t: str
) -> list[Module] | str:
    """What PEFT adapts for the named target `t` among `targets` (not `all-linear`), or why it
    refuses. A Linear whose last name part is `t` — except, in a family PEFT converts (PEFT_FUSED,
    with routed experts), for the v4 expert names: these go to the fused 3-D parameters and the
    router instead (the Linears of that name, dense MLPs and shared experts, are then not
    adapted). `gate_up_proj` needs both of its two names (PEFT raises otherwise) and is adapted at
    rank 2r; each of the two names is given half of it here, r·E·(h + 2I)."""
    moe = [spec for spec in reading.layers if spec.ffn == "moe" and spec.experts]
    pattern = peft_fused(config)
    old = _fused_name(pattern, t) if pattern and moe else None
    if pattern is None or old is None:
        return [m for m in modules if m[0] == t or m[0].endswith(f".{t}")]
    names = FUSED_NAMES[pattern]
    role = names[old]
    h = reading.hidden
    if role == "gate_up":
        pair = sorted(n for n, r in names.items() if r == "gate_up")
        given = {_fused_name(pattern, x) for x in targets}
        if not set(pair) <= given:
            missing = ", ".join(n for n in pair if n not in given)
            return (
                f"PEFT cannot adapt {old} without also targeting {missing}: they are fused into "
                "the experts' gate_up_proj"
            )
    out: list[Module] = []
    for spec in moe:
        e, i = spec.experts, spec.moe_width
        if role == "router":
            out.append(("gate", "mlp.router", h, e))
        elif role == "down":
            out.append(("experts.down_proj", "mlp.experts", e * i, e * h))
        elif spec.gated:  # half of gate_up_proj at rank 2r: r·(E·h + 2E·I)
            out.append(("experts.gate_up_proj", "mlp.experts", e * h, 2 * e * i))
        else:
            out.append(("experts.up_proj", "mlp.experts", e * h, e * i))
    return out


def all_linear_params(
    reading: Reading, config: Mapping[str, Any], rank: int
) -> tuple[int, str | None] | None:
    """(LoRA adapter parameters at `rank` on `all-linear`, whether the experts are adapted), or
    None where the family's module tree is not known (the estimate then counts every linear of
    its layers, experts included)."""
    modules = derive_modules(reading, config)
    if isinstance(modules, str):
        return None
    adapted, experts = all_linear(reading, config, modules)
    return sum(rank * (i + o) for _, _, i, o in adapted), experts
