"""Family readers for layouts no general rule describes, each saying what is irregular.

- DeciLM / Nemotron-NAS: `block_configs` give every layer its own attention (or none, or a single
  linear) and its own FFN width (`ffn_mult`, rounded up to a multiple of 256).
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
from collections.abc import Callable, Sequence
from typing import Any

from tracker.estimate.decoder import BF16
from tracker.estimate.general import task_head_params
from tracker.estimate.reading import MAX_LAYERS, ConfigView, LayerSpec, Notes, Tally
from tracker.shared.errors import EstimateError

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


def _bert(c: ConfigView, t: Tally, n: Notes) -> Result:
    h = c.int("hidden_size")
    heads = c.int("num_attention_heads")
    layers = c.int("num_hidden_layers", maximum=MAX_LAYERS)
    v = c.int("vocab_size")
    inter = c.int("intermediate_size", default=4 * h)
    pos = c.int("max_position_embeddings", default=512)
    if c.str("model_type") == "yoso":  # YOSO's table holds two more positions
        pos += 2
        # the LSH attention's hashing settings shape the forward pass only
        c.mark("num_hash", "hash_code_len", "lsh_backward", "use_expectation", "use_fast_hash")
        if c.has("conv_window"):
            n.unknown("conv_window (YOSO's convolution over the values)")
    mt = c.str("model_type")
    if mt == "tapas":  # TAPAS: one token-type table per entry of type_vocab_sizes
        sizes = c.list("type_vocab_sizes") or [3, 256, 256, 2, 256, 256, 10]
        if not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in sizes):
            raise EstimateError("config type_vocab_sizes must hold positive integers")
        types = sum(sizes)
        # table bounds and cell handling shape the forward pass only
        c.mark("max_num_columns", "max_num_rows", "reset_position_index_per_cell")
    else:
        types = c.int("type_vocab_size", default=2)
    if c.str("position_embedding_type", "absolute") != "absolute":
        n.unknown(f"position_embedding_type {c.str('position_embedding_type')!r}")
    if c.bool("add_cross_attention", False):
        n.unknown("add_cross_attention (cross-attention layers in the decoder)")
    if c.str("model_type") == "ernie" and c.bool("use_task_id", False):
        types += c.int("task_type_vocab_size", default=3)  # ERNIE's task-type table
    c.mark("task_type_vocab_size")
    # ELECTRA (`embedding_size`) and RemBERT (`input_embedding_size`) embed narrower than the
    # encoder and project up (a biased linear); their MLM transform narrows to `embedding_size` /
    # `output_embedding_size` before the decoder.
    e_in = c.int("embedding_size", "input_embedding_size", default=h)
    emb = t.add("embeddings", (v + pos + types) * e_in)
    t.add("norms", 2 * e_in)
    if e_in != h:
        t.add("embeddings", lin(e_in, h))
    e_out = c.opt_int("output_embedding_size", "embedding_size")
    if mt == "layoutlm":  # x, y, height and width tables of the boxes
        t.add("embeddings", 4 * c.int("max_2d_position_embeddings", default=1024) * h)
    if mt == "visual_bert":  # token-type and position tables of the visual tokens, a projection
        t.add("embeddings", (types + pos) * h + lin(c.int("visual_embedding_dim"), h))
        c.mark("bypass_transformer", "special_visual_initialize")
        if c.bool("bypass_transformer", False):
            n.unknown("bypass_transformer (VisualBERT's extra text-only layer)")
    if mt == "roc_bert":
        # RoCBERT: pronunciation and shape tables (always built), and where concat_input is set
        # a linear from the concatenated enabled embeddings back to hidden
        pdim, sdim = c.int("pronunciation_embed_dim"), c.int("shape_embed_dim")
        t.add("embeddings", c.int("pronunciation_vocab_size") * pdim)
        t.add("embeddings", c.int("shape_vocab_size") * sdim)
        if c.bool("concat_input", True):
            width = h + (pdim if c.bool("enable_pronunciation", True) else 0)
            width += sdim if c.bool("enable_shape", True) else 0
            t.add("embeddings", lin(width, h))
    adapters = 0
    if mt == "xmod":
        # X-MOD: per layer, one bottleneck adapter (h → h / factor → h, biased) per language,
        # and an adapter LayerNorm where adapter_layer_norm is set
        langs = len(c.list("languages") or [])
        bottleneck = h // c.int("adapter_reduction_factor", default=2, minimum=1)
        adapters = langs * (lin(h, bottleneck) + lin(bottleneck, h))
        adapters += 2 * h if c.bool("adapter_layer_norm", False) else 0
        c.mark("adapter_reuse_layer_norm", "ln_before_adapter")
    # every layer is the same: count one and multiply
    a = 4 * lin(h, h)
    m = lin(h, inter) + lin(inter, h) + adapters
    nn = 4 * h
    spec = LayerSpec(
        "mha",
        "gelu",
        a + m + nn,
        a + m + nn,
        0,
        kind="encoder",
        lora_dims=8 * h + 2 * (h + inter),
        ffn_width=inter,
        q_width=h,
        k_width=h,
        v_width=h,
        heads=heads,
        gated=False,
        layer_norm=True,
        post_norms=1,  # post-norm: the second LayerNorm's output leaves the layer
    )
    # ALBERT shares its layers: num_hidden_groups groups of inner_group_num layers hold all the
    # parameters, whatever num_hidden_layers runs through them
    built = layers
    if mt == "albert":
        built = c.int("num_hidden_groups", default=1, minimum=1) * c.int(
            "inner_group_num", default=1, minimum=1
        )
    t.add("attention", built * a)
    t.add("dense_mlp", built * m)
    t.add("norms", built * nn)
    specs = [spec] * layers
    c.mark("tie_word_embeddings")  # read by the head where it has a decoder
    pooled = c.str("model_type") not in ("electra", "yoso")
    head = task_head_params(c, h, v, e_out, pooler=pooled, embed_width=e_in)
    if c.str("model_type") == "big_bird":
        # BigBird's LM heads sit on a BigBirdModel built with its pooler; block-sparse attention
        # (attention_type, block_size, num_random_blocks) adds no parameters
        c.mark("attention_type", "block_size", "num_random_blocks", "use_bias")
        if head and not c.bool("use_bias", True):
            n.unknown("use_bias false (BigBird's q/k/v without bias)")
        archs = c.list("architectures") or []
        if archs and str(archs[0]).endswith(("ForCausalLM", "ForMaskedLM")):
            head += h * h + h
    if head:
        t.add("head", head)
    return specs, dims_of(
        h, v, heads, heads, h // heads, inter, True, emb, pos, encoder_layers=layers
    )


def _rwkv(c: ConfigView, t: Tally, n: Notes) -> Result:
    """RWKV (v4): no attention heads; each block a time-mixing layer (key, value, receptance at
    `attention_hidden_size`, output back to hidden; per-channel decay, bonus and three mixing
    vectors) and a channel-mixing layer (key h→intermediate, value back, receptance h→h; two
    mixing vectors), two LayerNorms per block and one more before the first; a final LayerNorm
    and the head (untied unless the config ties it). The state is fixed per sequence."""
    h = c.int("hidden_size")
    layers = c.int("num_hidden_layers", maximum=MAX_LAYERS)
    v = c.int("vocab_size")
    a = c.int("attention_hidden_size", default=h)
    inter = c.int("intermediate_size", default=4 * h)
    c.mark("context_length", "rescale_every")  # a context size and an inference rescaling
    emb = t.add("embeddings", v * h)
    t.add("norms", 2 * h)  # pre_ln of the first block
    mix = 3 * h * a + a * h + 2 * a + 3 * h
    ffn = h * inter + inter * h + h * h + 2 * h
    norms = 4 * h
    t.add("linear_attention", layers * mix)
    t.add("dense_mlp", layers * ffn)
    t.add("norms", layers * norms)
    t.add("norms", 2 * h)
    tied = c.bool("tie_word_embeddings", False)
    if not tied:
        t.add("head", v * h)
    # state per sequence: the time-mixing numerator, denominator and max (fp32, attention width)
    # and the shifted inputs of both mixing layers (fp32, hidden width)
    spec = LayerSpec(
        "linear",
        "gelu",
        mix + ffn + norms,
        mix + ffn + norms,
        0,
        state_bytes=3 * a * 4 + 2 * h * 4,
        lora_dims=3 * (h + a) + (a + h) + 2 * (h + inter) + 2 * h,
        ffn_width=inter,
        q_width=a,
        k_width=a,
        v_width=a,
        gated=False,
        layer_norm=True,
    )
    dims = dims_of(h, v, 1, 1, a, inter, tied, emb, c.opt_int("context_length"))
    return [spec] * layers, dims


def _jetmoe(c: ConfigView, t: Tally, n: Notes) -> Result:
    """JetMoE: mixture-of-attention (each of E experts a query-in and an output linear of the
    KV width `kv_channels × num_key_value_heads`, top-k per token, a shared kv_proj, a bias and a
    router) and a MoE MLP (E experts of gated width `intermediate_size`, a bias and a router),
    RMSNorms, the head tied unless the config says otherwise."""
    h = c.int("hidden_size")
    layers = c.int("num_hidden_layers", maximum=MAX_LAYERS)
    v = c.int("vocab_size")
    heads = c.int("num_attention_heads")
    kvh = c.int("num_key_value_heads", default=heads)
    hd = c.int("kv_channels", default=h // heads)
    e = c.int("num_local_experts", default=8, minimum=1, maximum=1 << 16)
    k = c.int("num_experts_per_tok", default=2, minimum=1, maximum=e)
    inter = c.int("intermediate_size")
    kvw = kvh * hd
    emb = t.add("embeddings", v * h)
    moa_expert = 2 * h * kvw
    attn = 2 * h * kvw + e * moa_expert + h + h * e
    attn_active = 2 * h * kvw + k * moa_expert + h + h * e
    mlp_expert = 3 * h * inter
    t.add("attention", layers * attn, layers * attn_active)
    t.add("routed_experts", layers * e * mlp_expert, layers * k * mlp_expert)
    t.add("router", layers * (h * e + h))
    t.add("norms", layers * 2 * h + h)
    tied = c.bool("tie_word_embeddings", True)
    if not tied:
        t.add("head", v * h)
    total = attn + e * mlp_expert + h * e + h + 2 * h
    active = attn_active + k * mlp_expert + h * e + h + 2 * h
    spec = LayerSpec(
        "gqa",
        "moe",
        total,
        active,
        2 * kvw * BF16,
        lora_dims=(h + 2 * kvw) + e * 2 * (h + kvw) + e * 3 * (h + inter),
        experts=e,
        top_k=k,
        ffn_width=k * inter,
        q_width=k * kvw,
        k_width=kvw,
        v_width=kvw,
        heads=heads,
        moe_width=inter,
    )
    dims = dims_of(h, v, heads, kvh, hd, inter, tied, emb, c.opt_int("max_position_embeddings"))
    return [spec] * layers, dims


def _zamba(c: ConfigView, t: Tally, n: Notes) -> Result:
    """Zamba (v1): Mamba layers (one mixer and its RMSNorm each), and "hybrid" layers that run one
    shared attention + MLP block (its parameters counted once: attention reads the hidden state
    concatenated with the input embeddings, `attention_hidden_size` = 2·hidden, into heads of
    `attention_head_dim`) through a layer-own h×h linear, then a Mamba layer of their own.
    Mamba mixers are Mamba (v1) of width `mamba_expand`·hidden split into `n_mamba_heads`, which
    changes no count. The head is tied unless the config unties it."""
    h = c.int("hidden_size")
    v = c.int("vocab_size")
    layers = c.int("num_hidden_layers", maximum=MAX_LAYERS)
    heads = c.int("num_attention_heads")
    kvh = c.int("num_key_value_heads", default=heads)
    ah = c.int("attention_hidden_size", default=2 * h)
    hd = c.int("attention_head_dim", default=2 * h // heads)
    inter = c.int("intermediate_size")
    di = c.int("mamba_expand", default=2) * h
    state = c.int("mamba_d_state", default=16)
    conv = c.int("mamba_d_conv", default=4)
    rank_raw = c.raw("mamba_dt_rank", "auto")
    rank = -(-h // 16) if rank_raw == "auto" else c.int("mamba_dt_rank")
    conv_bias = c.bool("mamba_conv_bias", True)
    proj_bias = c.bool("mamba_proj_bias", False)
    c.mark("n_mamba_heads")
    listed = c.list("layers_block_type")
    if listed is None:  # ZambaConfig's own list: two Mamba layers, a hybrid, then the period
        period = c.int("attn_layer_period", default=6, minimum=1)
        offset = c.int("attn_layer_offset", default=4, minimum=0)
        listed = ["mamba", "mamba", "hybrid"] + [
            "hybrid" if i % period == offset else "mamba" for i in range(layers - 3)
        ]
    c.mark("attn_layer_period", "attn_layer_offset")
    kinds = [str(x) for x in listed]
    if len(kinds) != layers:
        raise EstimateError(
            f"config layers_block_type has {len(kinds)} entries for {layers} layers"
        )
    odd = sorted(set(kinds) - {"hybrid", "mamba", "linear_attention"})
    if odd:
        n.unknown(f"layers_block_type values {', '.join(odd)}")
    hybrid = sum(k == "hybrid" for k in kinds)
    emb = t.add("embeddings", v * h)
    mamba = lin(h, 2 * di, proj_bias) + di * conv + (di if conv_bias else 0)
    mamba += di * (rank + 2 * state) + lin(rank, di) + di * state + di + lin(di, h, proj_bias)
    t.add("ssm", layers * mamba)
    t.add("norms", layers * h + h)
    attn = ah * heads * hd + 2 * ah * kvh * hd + heads * hd * h
    mlp = 3 * h * inter
    tied = c.bool("tie_word_embeddings", True)
    # transformers 5.24 builds the block in every hybrid layer and ties the copies to the first
    # through _tied_weights_keys, which tie_word_embeddings=false switches off: one copy when
    # tied, one per hybrid layer when not
    copies = 1 if tied else hybrid
    if hybrid:  # the shared block, each hybrid layer's own linear
        t.add("attention", copies * attn)
        t.add("dense_mlp", copies * mlp)
        t.add("norms", copies * (ah + h))
        t.add("attention", hybrid * h * h)
    if not tied:
        t.add("head", v * h)
    ssm_state = di * state * 4 + di * (conv - 1) * BF16
    mamba_spec = LayerSpec(
        "ssm",
        "none",
        mamba + h,
        mamba + h,
        0,
        state_bytes=ssm_state,
        lora_dims=(h + 2 * di) + (di + rank + 2 * state) + (rank + di) + (di + h),
        q_width=di,
        k_width=di,
        v_width=di,
        norms=1,
    )
    shared = copies * (attn + mlp + ah + h) // max(hybrid, 1)
    return _zamba_layers(
        c, kinds, mamba_spec, mamba, shared, ssm_state,
        (h, v, heads, kvh, hd, ah, inter), tied, emb,
    )  # fmt: skip


def _zamba2(c: ConfigView, t: Tally, n: Notes) -> Result:
    """Zamba2: Mamba2 layers (mixer and RMSNorm), and hybrid layers that run one of
    `num_mem_blocks` shared attention + MLP blocks (attention over 2·hidden in heads of
    2·hidden / heads; a gated MLP with a LoRA-like adapter h→`adapter_rank`→2·intermediate per
    hybrid layer, and q/k/v adapters where `use_shared_attention_adapter`) through a layer-own
    h×h linear, then a Mamba2 layer of their own. Zamba2Config fixes the attention sizes and
    `mamba_headdim` from hidden_size whatever the file says. transformers 5.24 ties the blocks
    through _tied_weights_keys; with tie_word_embeddings=false they would untie, which is not
    modelled (named as not understood)."""
    h = c.int("hidden_size")
    v = c.int("vocab_size")
    layers = c.int("num_hidden_layers", maximum=MAX_LAYERS)
    heads = c.int("num_attention_heads")
    kvh = c.int("num_key_value_heads", default=heads)
    inter = c.int("intermediate_size", default=4 * h)
    # Zamba2Config derives these from hidden_size, but a config file's own values are what
    # from_pretrained builds
    ah = c.int("attention_hidden_size", default=2 * h)
    hd = c.int("attention_head_dim", default=2 * h // heads)
    di = int(c.float("mamba_expand", 2.0) * h)
    m_heads = c.int("n_mamba_heads", default=8, minimum=1)
    groups = c.int("mamba_ngroups", default=1, minimum=1)
    state = c.int("mamba_d_state", default=64)
    conv = c.int("mamba_d_conv", default=4)
    bias = c.bool("add_bias_linear", False)
    conv_bias = c.bool("use_conv_bias", True)
    rank = c.int("adapter_rank", default=128, minimum=0)
    blocks = c.int("num_mem_blocks", default=1, minimum=1)
    qkv_adapters = c.bool("use_shared_attention_adapter", False)
    # sizes Zamba2Config derives itself, and switches without parameters
    c.mark("mamba_headdim", "kv_channels", "num_query_groups", "use_mem_rope", "use_long_context")
    listed = c.list("layers_block_type")
    if listed is None:  # Zamba2Config's default layout
        listed = (
            ["mamba"]
            + (["mamba"] * 5 + ["hybrid"]) * 7
            + ["mamba"] * 4
            + ["hybrid"]
            + ["mamba"] * 3
            + ["hybrid"]
            + ["mamba"] * 2
        )
    kinds = [str(x) for x in listed]
    if len(kinds) != layers:
        raise EstimateError(
            f"config layers_block_type has {len(kinds)} entries for {layers} layers"
        )
    odd = sorted(set(kinds) - {"hybrid", "mamba", "linear_attention"})
    if odd:
        n.unknown(f"layers_block_type values {', '.join(odd)}")
    hybrid = sum(k == "hybrid" for k in kinds)
    tied = c.bool("tie_word_embeddings", True)
    if hybrid and not tied:
        n.unknown("tie_word_embeddings false (Zamba2's shared blocks would untie)")
    emb = t.add("embeddings", v * h)
    conv_dim = di + 2 * groups * state
    mamba = lin(h, di + conv_dim + m_heads, bias) + conv_dim * conv
    mamba += (conv_dim if conv_bias else 0) + 3 * m_heads + di + lin(di, h, bias)
    t.add("ssm", layers * mamba)
    t.add("norms", layers * h + h)
    attn = ah * heads * hd + 2 * ah * kvh * hd + heads * hd * h
    mlp = lin(h, 2 * inter, bias) + lin(inter, h, bias)
    adapter = h * rank + rank * 2 * inter + (3 * 2 * ah * rank if qkv_adapters else 0)
    unique = min(blocks, hybrid)
    # each block holds an adapter for every forward slot i < len(hybrid_layer_ids) (the config's
    # list, else the hybrid layers) with i % num_mem_blocks equal to its block id
    ids = c.list("hybrid_layer_ids")
    slots = len(ids) if ids is not None else hybrid
    adapters = sum(len(range(b, slots, blocks)) for b in range(unique))
    if hybrid:
        t.add("attention", unique * attn + hybrid * h * h)
        t.add("dense_mlp", unique * mlp + adapters * adapter)
        t.add("norms", unique * (ah + h))
    if not tied:
        t.add("head", v * h)
    heads_dim = di // m_heads
    ssm_state = m_heads * heads_dim * state * 4 + conv_dim * (conv - 1) * BF16
    mamba_spec = LayerSpec(
        "ssm",
        "none",
        mamba + h,
        mamba + h,
        0,
        state_bytes=ssm_state,
        lora_dims=(h + di + conv_dim + m_heads) + (di + h),
        q_width=di,
        k_width=di,
        v_width=di,
        norms=1,
    )
    shared = (unique * (attn + mlp + ah + h) + adapters * adapter) // max(hybrid, 1)
    return _zamba_layers(
        c, kinds, mamba_spec, mamba, shared, ssm_state,
        (h, v, heads, kvh, hd, ah, inter), tied, emb,
    )  # fmt: skip


def _zamba_layers(
    c: ConfigView,
    kinds: Sequence[str],
    mamba_spec: LayerSpec,
    mamba: int,
    shared: int,
    ssm_state: int,
    sizes: tuple[int, int, int, int, int, int, int],
    tied: bool,
    emb: int,
) -> Result:
    """Zamba and Zamba2's layers: each `hybrid` layer is its Mamba layer, the input projection
    of the shared block's output (h·h and a norm) and its share of the shared blocks (`shared`);
    every other layer the Mamba layer alone. `sizes`: hidden, vocabulary, heads, KV heads, head
    width, the attention's input width and the MLP's."""
    h, v, heads, kvh, hd, ah, inter = sizes
    hybrid_spec = LayerSpec(
        "gqa" if kvh != heads else "mha",
        "swiglu",
        mamba + h + h * h + shared,
        mamba + h + h * h + shared,
        2 * kvh * hd * BF16,
        state_bytes=ssm_state,
        lora_dims=mamba_spec.lora_dims + 2 * h + (ah + heads * hd) + 2 * (ah + kvh * hd),
        ffn_width=inter,
        q_width=heads * hd,
        k_width=kvh * hd,
        v_width=kvh * hd,
        heads=heads,
        norms=3,
    )
    specs = [hybrid_spec if k == "hybrid" else mamba_spec for k in kinds]
    dims = dims_of(h, v, heads, kvh, hd, inter, tied, emb, c.opt_int("max_position_embeddings"))
    return specs, dims


def _xlnet(c: ConfigView, t: Tally, n: Notes) -> Result:
    """XLNet: two-stream relative attention (q, k, v, o and the position projection r, each
    d_model × n_head·d_head without bias; three bias vectors and a 2-row segment embedding per
    head), a biased two-matrix FFN of `d_inner`, two LayerNorms per layer, a mask embedding; the
    LM head is tied to the word embedding with a bias of its own (XLNetLMHeadModel's lm_loss)."""
    h = c.int("d_model")
    layers = c.int("n_layer", maximum=MAX_LAYERS)
    heads = c.int("n_head")
    hd = c.int("d_head", default=h // heads)
    inner = c.int("d_inner", default=4 * h)
    v = c.int("vocab_size")
    c.mark("attn_type", "mem_len", "clamp_len", "reuse_len", "same_length", "bi_data")
    q = heads * hd
    emb = t.add("embeddings", v * h + h)  # word embedding and mask_emb
    attn = 5 * h * q + 3 * q + 2 * q
    mlp = lin(h, inner) + lin(inner, h)
    t.add("attention", layers * attn)
    t.add("dense_mlp", layers * mlp)
    t.add("norms", layers * 4 * h)
    archs = c.list("architectures") or []
    arch = str(archs[0]) if archs else "XLNetLMHeadModel"
    tied = c.bool("tie_word_embeddings", True)
    head = 0
    if arch.endswith("LMHeadModel"):
        head = v + (0 if tied else v * h)
        t.add("head", head)
    spec = LayerSpec(
        "mha",
        "gelu",
        attn + mlp + 4 * h,
        attn + mlp + 4 * h,
        2 * q * BF16,
        lora_dims=5 * (h + q) + 2 * (h + inner),
        ffn_width=inner,
        q_width=q,
        k_width=q,
        v_width=q,
        heads=heads,
        gated=False,
        layer_norm=True,
    )
    dims = dims_of(h, v, heads, heads, hd, inner, tied, emb, None)
    dims["head_params"] = head
    return [spec] * layers, dims


def _round_up(x: float, multiple: int) -> int:
    return int(((x + multiple - 1) // multiple) * multiple)


def _xlstm(c: ConfigView, t: Tally, n: Notes) -> Result:
    """xLSTM (7B-style mLSTM blocks): per block a pre-norm, q/k to `qk_dim_factor`·h and v and the
    output gate to `v_dim_factor`·h (truncated to integers), input and forget gates
    h→heads with biases, a per-head norm over v, out_proj, then a gated FFN of
    `ffn_proj_factor`·h rounded up to `ffn_round_up_to_multiple_of`, and its pre-norm; an output
    norm and an untied head (transformers 5.24 builds both whatever the config says). Fused and single weight modes hold the
    same parameters. The recurrent state is fixed per sequence."""
    h = c.int("hidden_size", "embedding_dim")
    c.mark("embedding_dim")
    layers = c.int("num_hidden_layers", "num_blocks", maximum=MAX_LAYERS)
    c.mark("num_blocks")
    v = c.int("vocab_size")
    heads = c.int("num_heads")
    # the layer truncates h × factor (the config's rounded qk_dim / v_dim are not what it builds)
    qk = int(h * c.float("qk_dim_factor", 0.5))
    vd = int(h * c.float("v_dim_factor", 1.0))
    ffn = _round_up(
        h * c.float("ffn_proj_factor", 2.667), c.int("ffn_round_up_to_multiple_of", default=64)
    )
    if c.bool("use_bias", False):
        n.unknown("use_bias (xLSTM's biased projections and norms)")
    c.mark("weight_mode", "gate_soft_cap", "chunkwise_kernel", "sequence_kernel", "step_kernel")
    c.mark("max_inference_chunksize", "return_last_states", "chunk_size")
    emb = t.add("embeddings", v * h)
    mixer = 2 * h * qk + 2 * h * vd + 2 * (h * heads + heads) + vd + vd * h
    mlp = 3 * h * ffn
    t.add("linear_attention", layers * mixer)
    t.add("dense_mlp", layers * mlp)
    t.add("norms", layers * 2 * h)
    t.add("norms", h)  # out_norm is built whatever add_out_norm says
    c.mark("add_out_norm", "tie_word_embeddings")
    tied = False  # xLSTMForCausalLM declares no tied weights: its lm_head is its own
    t.add("head", v * h)
    state = (heads * (qk // heads) * (vd // heads) + qk + heads) * 4  # C, n and m in fp32
    spec = LayerSpec(
        "linear",
        "swiglu",
        mixer + mlp + 2 * h,
        mixer + mlp + 2 * h,
        0,
        state_bytes=state,
        lora_dims=2 * (h + qk) + 2 * (h + vd) + 2 * (h + heads) + (vd + h) + 3 * (h + ffn),
        ffn_width=ffn,
        q_width=qk,
        k_width=qk,
        v_width=vd,
        heads=heads,
    )
    dims = dims_of(h, v, heads, heads, qk // heads, ffn, tied, emb, None)
    return [spec] * layers, dims


BERT_LINEAGE = (
    "roberta",
    "camembert",
    "xlm-roberta",
    "data2vec-text",
    "ernie",
    "electra",
    "rembert",
    "big_bird",
    "roc_bert",
    "xmod",
    "albert",
    "layoutlm",
    "visual_bert",
    "tapas",
    "yoso",
)
"""Model types whose modelling code is BERT's (post-norm encoder, learned positions, token types,
the same heads by class name): RoBERTa's position table of max_position_embeddings rows and its
LM head (dense, LayerNorm, tied decoder, bias) match BERT's count; ERNIE adds a task-type table
where `use_task_id` is set; ELECTRA and RemBERT embed narrower; BigBird keeps its pooler under
its LM heads; RoCBERT adds pronunciation and shape embeddings, X-MOD per-language adapters;
ALBERT embeds narrower and shares its layers across groups."""


def _t5(c: ConfigView, t: Tally, n: Notes) -> Result:
    d = c.int("d_model")
    dkv = c.int("d_kv", default=64)
    heads = c.int("num_heads")
    dff = c.int("d_ff")
    enc = c.int("num_layers", maximum=MAX_LAYERS)
    dec = c.int("num_decoder_layers", default=enc, maximum=MAX_LAYERS)
    v = c.int("vocab_size")
    buckets = c.int("relative_attention_num_buckets", default=32)
    proj = c.str("feed_forward_proj", "relu")
    gated = proj.startswith("gated")
    # Tensors the FFN keeps at width d_ff (T5Config: "gated-gelu" is the Python tanh GELU,
    # NewGELUActivation: x, tanh, 1 + tanh, x/2 and its output; ReLU keeps only its output; a
    # fused GELU its input and output); a gated FFN adds the up projection and the product.
    act = {"relu": 1, "gelu_new": 5}.get("gelu_new" if proj == "gated-gelu" else proj, 2)
    act_tensors = act + 2 if gated else act
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
                    ffn_width=dff,
                    q_width=inner,
                    k_width=inner,
                    v_width=inner,
                    heads=heads,
                    gated=gated,
                    norms=3 if stack == "decoder" else 2,
                    cross_kv_width=2 * inner if stack == "decoder" else 0,
                    act_tensors=act_tensors,
                    norm_keeps_input=True,
                    bias_math=True,
                    bias_indices=i == 0,
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
    "bert": _bert,
    **dict.fromkeys(BERT_LINEAGE, _bert),
    "t5": _t5,
    "rwkv": _rwkv,
    "jetmoe": _jetmoe,
    "zamba": _zamba,
    "xlstm": _xlstm,
    "zamba2": _zamba2,
    "xlnet": _xlnet,
}
