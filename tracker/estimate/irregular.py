"""Irregular layer layouts read layer by layer: Nemotron-H (Mamba/attention/MoE pattern),
DeciLM / Nemotron-NAS (per-layer block configs) and Gemma 4 text (sliding/full mix, MoE)."""

from __future__ import annotations

import math
from collections.abc import Callable

from tracker.estimate.decoder import BF16, FP32
from tracker.estimate.families import Notes
from tracker.estimate.others import Result, dims_of, lin
from tracker.estimate.reading import MAX_EXPERTS, MAX_LAYERS, ConfigView, LayerSpec, Tally


def _nemotron_h(c: ConfigView, t: Tally, n: Notes) -> Result:
    """Nemotron-H: a per-layer pattern of M (Mamba2), * (attention), - (MLP), E (MoE)."""
    h = c.int("hidden_size")
    v = c.int("vocab_size")
    pattern = c.str("hybrid_override_pattern")
    layers = c.int("num_hidden_layers", default=len(pattern) or 1, maximum=MAX_LAYERS)
    if len(pattern) != layers:
        n.flag(
            "pattern-length",
            f"hybrid_override_pattern has {len(pattern)} entries for {layers} layers",
        )
        pattern = (pattern or "*")[:layers].ljust(layers, "*")
    heads = c.int("num_attention_heads")
    kv = c.int("num_key_value_heads", default=heads)
    hd = c.int("head_dim", default=h // heads)
    abias = c.bool("attention_bias", False)
    mbias = c.bool("mlp_bias", False)
    m_heads = c.int("mamba_num_heads")
    m_hd = c.int("mamba_head_dim")
    groups = c.int("n_groups", default=1)
    state = c.int("ssm_state_size")
    kernel = c.int("conv_kernel", default=4)
    d_inner = m_heads * m_hd
    conv_dim = d_inner + 2 * groups * state
    inter = c.int("intermediate_size")
    e = c.int("n_routed_experts", default=0, minimum=0, maximum=MAX_EXPERTS)
    k = c.int("num_experts_per_tok", default=1)
    moe_i = c.int("moe_intermediate_size", default=inter)
    shared_i = c.int("moe_shared_expert_intermediate_size", default=0, minimum=0)
    latent = c.opt_int("moe_latent_size")
    emb = t.add("embeddings", v * h)
    Adds = list[tuple[str, int, int]]

    def layer(ch: str) -> tuple[LayerSpec, Adds]:
        """One layer of kind `ch` and its (component, params, active) contributions."""
        adds: Adds = [("norms", h, h)]
        norm = h
        if ch == "M":
            p = lin(h, 2 * d_inner + 2 * groups * state + m_heads, c.bool("use_bias", False))
            p += conv_dim * kernel + (conv_dim if c.bool("use_conv_bias", True) else 0)
            p += 3 * m_heads + d_inner + lin(d_inner, h, c.bool("use_bias", False))
            adds.append(("ssm", p, p))
            st = m_heads * m_hd * state * FP32 + conv_dim * (kernel - 1) * BF16
            spec = LayerSpec(
                "ssm",
                "none",
                p + norm,
                p + norm,
                0,
                state_bytes=st,
                lora_dims=(h + 2 * d_inner + 2 * groups * state + m_heads) + d_inner + h,
            )
        elif ch == "*":
            p = lin(h, heads * hd, abias) + 2 * lin(h, kv * hd, abias) + lin(heads * hd, h, abias)
            adds.append(("attention", p, p))
            spec = LayerSpec(
                "gqa" if kv < heads else "mha",
                "none",
                p + norm,
                p + norm,
                2 * kv * hd * BF16,
                lora_dims=(h + heads * hd) + 2 * (h + kv * hd) + heads * hd + h,
            )
        elif ch == "E":
            width = latent or h
            per = 2 * width * moe_i
            routed = e * per
            adds.append(("routed_experts", routed, k * per))
            r = h * e
            adds.append(("router", r, r))
            s = lin(h, shared_i, mbias) + lin(shared_i, h, mbias)
            adds.append(("shared_experts", s, s))
            if latent:
                extra = 2 * h * latent + (2 * latent if c.bool("moe_latent_use_norm", False) else 0)
                adds.append(("shared_experts", extra, extra))
                s += extra
            spec = LayerSpec(
                "none",
                "moe",
                routed + r + s + norm,
                k * per + r + s + norm,
                experts=e,
                top_k=k,
                lora_dims=e * 2 * (width + moe_i) + 2 * (h + shared_i),
            )
        else:
            p = lin(h, inter, mbias) + lin(inter, h, mbias)
            adds.append(("dense_mlp", p, p))
            spec = LayerSpec("none", "relu", p + norm, p + norm, lora_dims=2 * (h + inter))
        return spec, adds

    # Layers of one kind are identical: count each kind once, multiply by its layer count.
    kinds: dict[str, tuple[LayerSpec, Adds]] = {}
    uses: dict[str, int] = {}
    specs = []
    for ch in pattern:
        if ch not in kinds:
            kinds[ch] = layer(ch)
            uses[ch] = 0
        uses[ch] += 1
        specs.append(kinds[ch][0])
    for ch, (_, adds) in kinds.items():
        for component, count, active in adds:
            t.add(component, uses[ch] * count, uses[ch] * active)
    t.add("norms", h)
    tied = c.bool("tie_word_embeddings", False)
    if not tied:
        t.add("head", v * h)
    return specs, dims_of(
        h, v, heads, kv, hd, inter, tied, emb, c.opt_int("max_position_embeddings")
    )


def _ffn_mult_to_intermediate(mult: float, h: int) -> int:
    inter = int(2 * mult * h / 3)
    return inter + (-inter % 256)


def _deci(c: ConfigView, t: Tally, n: Notes) -> Result:
    """DeciLM / Nemotron-NAS: `block_configs` give each layer its own attention and FFN."""
    h = c.int("hidden_size")
    heads = c.int("num_attention_heads")
    hd = h // heads
    v = c.int("vocab_size")
    blocks = c.list("block_configs") or []
    layers = c.int("num_hidden_layers", default=len(blocks) or 1, maximum=MAX_LAYERS)
    emb = t.add("embeddings", v * h)
    specs = []
    for i in range(min(layers, len(blocks))):
        b = ConfigView(blocks[i] if isinstance(blocks[i], dict) else {}, f"block_configs[{i}]")
        att = b.sub("attention") or ConfigView({})
        ffn = b.sub("ffn") or ConfigView({})
        a = m = nn = 0
        kvb = 0
        lora = 0
        atype = "none"
        if not att.bool("no_op", False):
            nn += t.add("norms", h)
            if att.bool("replace_with_linear", False):
                a = t.add("attention", h * h)
                lora += 2 * h
            else:
                kv = heads // att.int("n_heads_in_group", default=1)
                a = t.add("attention", 2 * h * heads * hd + 2 * h * kv * hd)
                kvb = 2 * kv * hd * BF16
                lora += 2 * (h + heads * hd) + 2 * (h + kv * hd)
                atype = "gqa"
        if not ffn.bool("no_op", False):
            nn += t.add("norms", h)
            if ffn.bool("replace_with_linear", False):
                m = t.add("dense_mlp", h * h)
                lora += 2 * h
            else:
                mult = ffn.float("ffn_mult", 4.0)
                if not math.isfinite(mult) or mult <= 0 or mult > 1000:
                    mult = 4.0
                inter = _ffn_mult_to_intermediate(mult, h)
                m = t.add("dense_mlp", 3 * h * inter)
                lora += 3 * (h + inter)
        specs.append(LayerSpec(atype, "swiglu", a + m + nn, a + m + nn, kvb, lora_dims=lora))
    t.add("norms", h)
    tied = c.bool("tie_word_embeddings", False)
    if not tied:
        t.add("head", v * h)
    return specs, dims_of(
        h, v, heads, heads, hd, 4 * h, tied, emb, c.opt_int("max_position_embeddings")
    )


def _gemma4(c: ConfigView, t: Tally, n: Notes) -> Result:
    """Gemma 4 text: sliding/full layers with their own head_dim and KV heads (K=V on full
    layers when attention_k_eq_v), a dense GELU MLP in every layer plus an optional MoE block."""
    h = c.int("hidden_size")
    v = c.int("vocab_size")
    layers = c.int("num_hidden_layers", maximum=MAX_LAYERS)
    heads = c.int("num_attention_heads")
    kv = c.int("num_key_value_heads", default=heads)
    gkv = c.int("num_global_key_value_heads", default=kv)
    hd = c.int("head_dim")
    ghd = c.int("global_head_dim", default=hd)
    inter = c.int("intermediate_size")
    k_eq_v = c.bool("attention_k_eq_v", False)
    moe = c.bool("enable_moe_block", False)
    e = c.int("num_experts", default=1, maximum=MAX_EXPERTS) if moe else 0
    k = c.int("top_k_experts", default=1) if moe else 0
    mi = c.int("moe_intermediate_size", default=inter) if moe else 0
    shared_kv = c.int("num_kv_shared_layers", default=0, minimum=0, maximum=MAX_LAYERS)
    ple = c.int("hidden_size_per_layer_input", default=0, minimum=0)
    window = c.opt_int("sliding_window")
    types = c.list("layer_types") or []
    emb = t.add("embeddings", v * h)
    if ple:
        emb += t.add("embeddings", c.int("vocab_size_per_layer_input", default=v) * layers * ple)
        t.add("embeddings", h * layers * ple + ple)
    specs = []
    for i in range(layers):
        sliding = i < len(types) and types[i] == "sliding_attention"
        dim, kvh = (hd, kv) if sliding else (ghd, gkv)
        reuse = shared_kv and i >= layers - shared_kv
        a = h * heads * dim + dim + heads * dim * h
        if not reuse:
            a += dim + h * kvh * dim + (0 if (k_eq_v and not sliding) else h * kvh * dim)
        t.add("attention", a)
        m = t.add("dense_mlp", 3 * h * inter)
        nn = t.add("norms", 4 * h)
        routed = r = 0
        if moe:
            routed = t.add("routed_experts", e * 3 * h * mi, k * 3 * h * mi)
            r = t.add("router", h * e + h + e)
            nn += t.add("norms", 3 * h)
        if ple:
            nn += t.add("dense_mlp", 2 * h * ple + h)
        total = a + m + nn + routed + r
        kvb = 0 if reuse else (1 if k_eq_v and not sliding else 2) * kvh * dim * BF16
        specs.append(
            LayerSpec(
                "sliding" if sliding else ("gqa" if kvh < heads else "mha"),
                "moe" if moe else "gelu",
                total,
                total - routed + k * 3 * h * mi,
                kvb,
                window=window if sliding else None,
                experts=e,
                top_k=k,
                lora_dims=2 * (h + heads * dim)
                + 2 * (h + kvh * dim)
                + 3 * (h + inter)
                + e * 3 * (h + mi),
                ffn_width=inter + k * mi,
                q_width=heads * dim,
            )
        )
    t.add("norms", h)
    tied = c.bool("tie_word_embeddings", True)
    if not tied:
        t.add("head", v * h)
    return specs, dims_of(
        h, v, heads, kv, hd, inter, tied, emb, c.opt_int("max_position_embeddings")
    )


READERS: dict[str, Callable[[ConfigView, Tally, Notes], Result]] = {
    "nemotron_h": _nemotron_h,
    "nemotron-nas": _deci,
    "gemma4_text": _gemma4,
}
