"""The general encoder-decoder reading (BART, mBART, Marian, Pegasus, Whisper and their kin).

Sizes from the alias sets (`d_model`, `encoder_layers` / `decoder_layers`,
`encoder_attention_heads`, `encoder_ffn_dim`, ...). Each encoder layer: self-attention (q/k/v/o)
and an FFN, two norms; each decoder layer adds cross-attention and its norm. Token embeddings are
shared by both stacks (and the head, tied unless the config says otherwise); each stack has its
own position table (`max_source_positions` / `max_target_positions` / `max_position_embeddings`,
plus the family's offset). An audio front-end (`num_mel_bins`) is two 3-wide convolutions.
Without a norm key, encoder-decoders are read with LayerNorm and biases (the BART lineage).
"""

from __future__ import annotations

from typing import Any

from tracker.estimate.decoder import BF16
from tracker.estimate.general import (
    HEAD_DIM,
    HEADS,
    HIDDEN,
    INTERMEDIATE,
    LAYERS,
    VOCAB,
    gated_mlp,
    norm_kind,
)
from tracker.estimate.reading import MAX_LAYERS, ConfigView, LayerSpec, Notes, Tally
from tracker.estimate.traits import Traits


def is_encoder_decoder(c: ConfigView) -> bool:
    """True when the config describes two stacks (flag, or both layer counts)."""
    return c.bool("is_encoder_decoder", False) or (
        c.has("encoder_layers") and c.has("decoder_layers")
    )


def _lin(i: int, o: int, bias: bool) -> int:
    return i * o + (o if bias else 0)


def read_encdec(
    c: ConfigView, tr: Traits, t: Tally, n: Notes, *, decoder_only: bool = False
) -> tuple[list[LayerSpec], dict[str, Any]]:
    """Count both stacks into `t` (`decoder_only`: the family's `…ForCausalLM`, the decoder alone
    with its token embeddings, position table and LM head; no encoder, no audio front-end);
    return the layer specs and the dims memory needs."""
    d = c.int(*HIDDEN)
    enc_keys = ("encoder_layers", "num_encoder_layers", *LAYERS)
    alone = decoder_only and c.first_key(*enc_keys) is None  # a decoder-only config (TrOCR)
    enc = 0 if alone else c.int(*enc_keys, maximum=MAX_LAYERS)
    dec = c.int("decoder_layers", "num_decoder_layers", default=enc, maximum=MAX_LAYERS)
    eh = c.int(
        "encoder_attention_heads",
        "num_encoder_attention_heads",
        *HEADS,
        default=c.opt_int("decoder_attention_heads", "num_decoder_attention_heads"),
    )
    dh = c.int("decoder_attention_heads", "num_decoder_attention_heads", default=eh)
    ef = c.int("encoder_ffn_dim", *INTERMEDIATE, default=4 * d)
    df = c.int("decoder_ffn_dim", default=ef)
    v = c.int(*VOCAB)
    inner = dh * c.int(*HEAD_DIM, default=d // dh)
    buckets = c.int("relative_attention_num_buckets", default=0, minimum=0)
    eps = ("rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "layernorm_epsilon")
    has_eps = any(c.has(k) for k in eps) or c.has("rmsnorm") or tr.norm is not None
    norm = norm_kind(c, tr) if has_eps else "layer"
    gated = gated_mlp(c, tr, norm)
    bias = c.bool("attention_bias", c.bool("bias", True if tr.qkv_bias is None else tr.qkv_bias))
    k_bias = bias and tr.k_bias
    norm_p = 2 * d if norm == "layer" else d
    emb = t.add("embeddings", v * d)
    if not c.bool("share_encoder_decoder_embeddings", True):
        emb += t.add("embeddings", c.int("decoder_vocab_size", default=v) * d)
    c.mark("decoder_vocab_size")
    if c.has("num_mel_bins") and not decoder_only:
        mel = c.int("num_mel_bins")
        emb += t.add("embeddings", mel * d * 3 + d + d * d * 3 + d)
    enc_pos = c.int("max_source_positions", "max_position_embeddings", default=0, minimum=0)
    dec_pos = c.int("max_target_positions", "max_position_embeddings", default=0, minimum=0)
    if not c.bool("use_learned_position_embeddings", True):  # sinusoidal: no table
        dec_pos = 0
    if buckets:  # relative positions: no absolute table (n_positions is only a context size)
        enc_pos = dec_pos = 0
        c.mark("n_positions")
    c.mark("num_mel_bins")
    for rows in ((0 if decoder_only else enc_pos), dec_pos):
        if rows:
            emb += t.add("embeddings", (rows + tr.position_offset) * d)
    rel_buckets = 0
    if tr.ngram:  # ProphetNet: n-gram stream embeddings and, per decoder self-attention, a
        # relative-position linear h → num_buckets × heads
        emb += t.add("embeddings", c.int("ngram", default=2, minimum=1) * d)
        rel_buckets = c.int("num_buckets", default=32, minimum=1)
        c.mark("relative_max_distance")
    c.mark("scale_embedding", "encoder_layerdrop", "decoder_layerdrop", "decoder_start_token_id")
    specs: list[LayerSpec] = []
    stacks = (("encoder", enc, eh, ef), ("decoder", dec, dh, df))
    for stack, count, heads, ffn in stacks[1:] if decoder_only else stacks:
        attn = 2 * _lin(d, inner, bias) + _lin(inner, d, bias) + _lin(d, inner, k_bias)
        rel = buckets * heads  # a relative position bias table in the stack's first layer
        if stack == "decoder":
            attn *= 2
            if rel_buckets:
                attn += _lin(d, rel_buckets * heads, True)
        mlp = (3 if gated else 2) * d * ffn + ((2 if gated else 1) * ffn + d if bias else 0)
        norms = (3 if stack == "decoder" else 2) * norm_p
        t.add("attention", count * attn + (rel if count else 0))
        t.add("dense_mlp", count * mlp)
        t.add("norms", count * norms)
        kv = 2 * d * BF16 if stack == "decoder" else 0
        spec = LayerSpec(
            "mha",
            "swiglu" if gated else "gelu",
            attn + mlp + norms,
            attn + mlp + norms,
            kv,
            kind=stack,
            lora_dims=(8 if stack == "encoder" else 16) * d + (3 if gated else 2) * (d + ffn),
            ffn_width=ffn,
            q_width=d,
            k_width=d,
            v_width=d,
            heads=heads,
            gated=gated,
            norms=norms // norm_p,
            cross_kv_width=2 * d if stack == "decoder" else 0,
        )
        specs += [spec] * count
        if c.bool("layernorm_embedding", tr.embed_norm):
            t.add("norms", norm_p)
        if tr.final_norm and c.bool("normalize_before", True):
            t.add("norms", norm_p)
    tied = c.bool("tie_word_embeddings", True)
    if tr.tie_fixed and not tied:
        tied = True
        n.flag(
            "t5-head-tied",
            "transformers 5 always ties T5's lm_head to the shared embedding "
            "(tie_word_embeddings=false is read as a decoder-output scaling switch)",
        )
    if not tied:
        t.add("head", v * d)
    dims = {
        "hidden": d,
        "vocab": v,
        "heads": dh,
        "kv_heads": dh,
        "head_dim": d // dh,
        "intermediate": df,
        "tied": tied,
        "head_params": 0 if tied else v * d,
        "pre_params": emb,
        "embedding": emb,
        "max_context": dec_pos or None,
        "encoder_layers": 0 if decoder_only else enc,
    }
    return specs, dims
