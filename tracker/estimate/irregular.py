"""Family readers for layouts no general rule describes, each saying what is irregular.

- DeciLM / Nemotron-NAS: `block_configs` give every layer its own attention (or none, or a single
  linear) and its own FFN width (`ffn_mult`, rounded up to a multiple of 256).
- Gemma 4 text: sliding and full layers have different head sizes and KV head counts, full layers
  may share K and V (`attention_k_eq_v`), the last `num_kv_shared_layers` reuse earlier layers'
  K/V projections, a per-layer input embedding table (`hidden_size_per_layer_input`), and a dense
  MLP next to the MoE block in the same layer.
- BERT: an encoder-only stack (no KV cache, encoder layer specs), which the general decoder
  reading cannot express; its count alone (token types, embedding LayerNorm, task heads by
  architecture name) is also exact from the general reader with the `bert` traits.
- T5: the count is exact from the general encoder-decoder reader with the `t5` traits (checked
  by the leave-one-family-out bench); the reader stays for its per-layer specs (LoRA dims, KV
  width from `d_kv`), which the general reading computes differently and which are not yet
  checked against the activation measurement.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from tracker.estimate.decoder import BF16
from tracker.estimate.general import task_head_params
from tracker.estimate.reading import MAX_EXPERTS, MAX_LAYERS, ConfigView, LayerSpec, Notes, Tally

Dims = dict[str, Any]
Result = tuple[list[LayerSpec], Dims]


def lin(i: int, o: int, bias: bool = True) -> int:
    """Parameters of an nn.Linear(i, o) with or without bias."""
    return i * o + (o if bias else 0)


def dims_of(
    h: int,
    v: int,
    heads: int,
    kv: int,
    hd: int,
    inter: int,
    tied: bool,
    emb: int,
    ctx: int | None,
    **extra: Any,
) -> Dims:
    """The dims mapping `params._finish` reads (hidden, vocab, heads, ..., max_context)."""
    return {
        "hidden": h,
        "vocab": v,
        "heads": heads,
        "kv_heads": kv,
        "head_dim": hd,
        "intermediate": inter,
        "tied": tied,
        "head_params": 0 if tied else v * h,
        "pre_params": emb,
        "embedding": emb,
        "max_context": ctx,
        **extra,
    }


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
    c.mark("vocab_size_per_layer_input")
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


def _bert(c: ConfigView, t: Tally, n: Notes) -> Result:
    h = c.int("hidden_size")
    heads = c.int("num_attention_heads")
    layers = c.int("num_hidden_layers", maximum=MAX_LAYERS)
    v = c.int("vocab_size")
    inter = c.int("intermediate_size", default=4 * h)
    pos = c.int("max_position_embeddings", default=512)
    types = c.int("type_vocab_size", default=2)
    if c.str("position_embedding_type", "absolute") != "absolute":
        n.unknown(f"position_embedding_type {c.str('position_embedding_type')!r}")
    emb = t.add("embeddings", (v + pos + types) * h)
    t.add("norms", 2 * h)
    # every layer is the same: count one and multiply
    a = 4 * lin(h, h)
    m = lin(h, inter) + lin(inter, h)
    nn = 4 * h
    spec = LayerSpec(
        "mha",
        "gelu",
        a + m + nn,
        a + m + nn,
        0,
        kind="encoder",
        lora_dims=8 * h + 2 * (h + inter),
    )
    t.add("attention", layers * a)
    t.add("dense_mlp", layers * m)
    t.add("norms", layers * nn)
    specs = [spec] * layers
    head = task_head_params(c, h, v)
    if head:
        t.add("head", head)
    return specs, dims_of(
        h, v, heads, heads, h // heads, inter, True, emb, pos, encoder_layers=layers
    )


def _t5(c: ConfigView, t: Tally, n: Notes) -> Result:
    d = c.int("d_model")
    dkv = c.int("d_kv", default=64)
    heads = c.int("num_heads")
    dff = c.int("d_ff")
    enc = c.int("num_layers", maximum=MAX_LAYERS)
    dec = c.int("num_decoder_layers", default=enc, maximum=MAX_LAYERS)
    v = c.int("vocab_size")
    buckets = c.int("relative_attention_num_buckets", default=32)
    gated = c.str("feed_forward_proj", "relu").startswith("gated")
    inner = heads * dkv
    emb = t.add("embeddings", v * d)
    ff = (3 if gated else 2) * d * dff
    specs = []
    for stack, count in (("encoder", enc), ("decoder", dec)):
        for i in range(count):
            attn = 4 * d * inner + (buckets * heads if i == 0 else 0)
            norms = 2 * d
            if stack == "decoder":
                attn += 4 * d * inner
                norms += d
            a = t.add("attention", attn)
            m = t.add("dense_mlp", ff)
            nn = t.add("norms", norms)
            kv = 2 * inner * BF16 if stack == "decoder" else 0
            specs.append(
                LayerSpec(
                    "mha",
                    "gelu" if gated else "relu",
                    a + m + nn,
                    a + m + nn,
                    kv,
                    kind=stack,
                    lora_dims=8 * (d + inner) + 3 * (d + dff),
                )
            )
        t.add("norms", d)
    if not c.bool("tie_word_embeddings", True):
        n.flag(
            "t5-head-tied",
            "transformers 5 always ties T5's lm_head to the shared embedding "
            "(tie_word_embeddings=false is read as a decoder-output scaling switch)",
        )
    return specs, dims_of(
        d, v, heads, heads, dkv, dff, True, emb, c.opt_int("n_positions"), encoder_layers=enc
    )


READERS: dict[str, Callable[[ConfigView, Tally, Notes], Result]] = {
    "nemotron-nas": _deci,
    "gemma4_text": _gemma4,
    "bert": _bert,
    "t5": _t5,
}
