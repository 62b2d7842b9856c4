"""Families whose layout is not the generic decoder: GPT-2, BLOOM, GPT-NeoX, Falcon, ChatGLM,
BERT and T5 (Nemotron-H, DeciLM and Gemma 4 text are in `irregular`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tracker.estimate.decoder import BF16
from tracker.estimate.families import Notes
from tracker.estimate.reading import MAX_LAYERS, ConfigView, LayerSpec, Tally

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


def _classic(c: ConfigView, t: Tally, n: Notes, *, kind: str) -> Result:
    """GPT-2 / BLOOM / GPT-NeoX: fused qkv with bias, 2-matrix GELU MLP, LayerNorms."""
    h = c.int("n_embd", "hidden_size", "n_embed")
    heads = c.int("n_head", "num_attention_heads")
    layers = c.int("n_layer", "num_hidden_layers", maximum=MAX_LAYERS)
    v = c.int("vocab_size")
    inter = c.int("n_inner", "intermediate_size", default=4 * h)
    ctx = c.opt_int("n_positions", "max_position_embeddings", "seq_length")
    emb = t.add("embeddings", v * h)
    if kind == "gpt2":
        emb += t.add("embeddings", c.int("n_positions", default=1024) * h)
        tied = c.bool("tie_word_embeddings", True)
    elif kind == "bloom":
        t.add("norms", 2 * h)
        tied = c.bool("tie_word_embeddings", True)
    else:
        tied = c.bool("tie_word_embeddings", False)
    bias = c.bool("attention_bias", True) if kind == "neox" else True
    # every layer is the same: count one and multiply
    a = lin(h, 3 * h, bias) + lin(h, h, bias)
    m = lin(h, inter) + lin(inter, h)
    nn = 4 * h
    spec = LayerSpec(
        "mha",
        "gelu",
        a + m + nn,
        a + m + nn,
        2 * h * BF16,
        lora_dims=(h + 3 * h) + 2 * h + 2 * (h + inter),
    )
    t.add("attention", layers * a)
    t.add("dense_mlp", layers * m)
    t.add("norms", layers * nn)
    specs = [spec] * layers
    t.add("norms", 2 * h)
    if not tied:
        t.add("head", v * h)
    return specs, dims_of(h, v, heads, heads, h // heads, inter, tied, emb, ctx)


def _falcon(c: ConfigView, t: Tally, n: Notes) -> Result:
    h = c.int("hidden_size")
    heads = c.int("n_head", "num_attention_heads")
    kv = c.int("n_head_kv", "num_kv_heads", default=1)
    layers = c.int("n_layer", "num_hidden_layers", maximum=MAX_LAYERS)
    v = c.int("vocab_size")
    hd = h // heads
    bias = c.bool("bias", False)
    new_arch = c.bool("new_decoder_architecture", c.has("n_head_kv"))
    emb = t.add("embeddings", v * h)
    # every layer is the same: count one and multiply
    qkv = (heads + 2 * kv) * hd if new_arch else h + 2 * hd * (kv if c.has("n_head_kv") else 1)
    a = lin(h, qkv, bias) + lin(h, h, bias)
    m = lin(h, 4 * h, bias) + lin(4 * h, h, bias)
    nn = (4 if new_arch else 2) * h
    spec = LayerSpec(
        "gqa" if kv > 1 else "mqa",
        "gelu",
        a + m + nn,
        a + m + nn,
        2 * kv * hd * BF16,
        lora_dims=(h + qkv) + 2 * h + 2 * 5 * h,
    )
    t.add("attention", layers * a)
    t.add("dense_mlp", layers * m)
    t.add("norms", layers * nn)
    specs = [spec] * layers
    t.add("norms", 2 * h)
    tied = c.bool("tie_word_embeddings", False)
    if not tied:
        t.add("head", v * h)
    return specs, dims_of(
        h, v, heads, kv, hd, 4 * h, tied, emb, c.opt_int("max_position_embeddings")
    )


def _chatglm(c: ConfigView, t: Tally, n: Notes) -> Result:
    h = c.int("hidden_size")
    heads = c.int("num_attention_heads")
    kvc = c.int("kv_channels", default=h // heads)
    groups = (
        c.int("multi_query_group_num", default=heads)
        if c.bool("multi_query_attention", False)
        else heads
    )
    layers = c.int("num_layers", "num_hidden_layers", maximum=MAX_LAYERS)
    v = c.int("padded_vocab_size", "vocab_size")
    ffn = c.int("ffn_hidden_size")
    qkv_bias = c.bool("add_qkv_bias", False)
    lin_bias = c.bool("add_bias_linear", False)
    norm = h if c.bool("rmsnorm", True) else 2 * h
    emb = t.add("embeddings", v * h)
    # every layer is the same: count one and multiply
    qkv = heads * kvc + 2 * groups * kvc
    a = lin(h, qkv, qkv_bias) + lin(heads * kvc, h, lin_bias)
    m = lin(h, 2 * ffn, lin_bias) + lin(ffn, h, lin_bias)
    nn = 2 * norm
    spec = LayerSpec(
        "gqa",
        "swiglu",
        a + m + nn,
        a + m + nn,
        2 * groups * kvc * BF16,
        lora_dims=(h + qkv) + (heads * kvc + h) + (h + 2 * ffn) + (ffn + h),
    )
    t.add("attention", layers * a)
    t.add("dense_mlp", layers * m)
    t.add("norms", layers * nn)
    specs = [spec] * layers
    if c.bool("post_layer_norm", True):
        t.add("norms", norm)
    t.add("head", v * h)
    return specs, dims_of(h, v, heads, groups, kvc, ffn, False, emb, c.opt_int("seq_length"))


def _bert(c: ConfigView, t: Tally, n: Notes) -> Result:
    h = c.int("hidden_size")
    heads = c.int("num_attention_heads")
    layers = c.int("num_hidden_layers", maximum=MAX_LAYERS)
    v = c.int("vocab_size")
    inter = c.int("intermediate_size", default=4 * h)
    pos = c.int("max_position_embeddings", default=512)
    types = c.int("type_vocab_size", default=2)
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
    archs = c.list("architectures") or []
    arch = str(archs[0]) if archs else "BertModel"
    if arch.endswith("ForMaskedLM") or arch.endswith("ForPreTraining"):
        t.add("head", lin(h, h) + 2 * h + v)  # transform dense + LayerNorm; decoder tied + bias
        if arch.endswith("ForPreTraining"):
            t.add("head", lin(h, h) + lin(h, 2))
    elif arch in ("BertModel", "") or "Classification" in arch:
        t.add("head", lin(h, h))  # pooler
        if "Classification" in arch:
            labels = len(c.raw("id2label", {}) or {}) or 2
            t.add("head", lin(h, labels))
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
    "gpt2": lambda c, t, n: _classic(c, t, n, kind="gpt2"),
    "bloom": lambda c, t, n: _classic(c, t, n, kind="bloom"),
    "gpt_neox": lambda c, t, n: _classic(c, t, n, kind="neox"),
    "falcon": _falcon,
    "RefinedWeb": _falcon,
    "RefinedWebModel": _falcon,
    "chatglm": _chatglm,
    "bert": _bert,
    "t5": _t5,
}
