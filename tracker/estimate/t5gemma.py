"""T5Gemma: an encoder-decoder of two Gemma 2 stacks, each sized by its own sub-config.

transformers 5.24.0's layout (`T5GemmaModel`, `T5GemmaForConditionalGeneration`): `encoder`
and `decoder` are Gemma 2 configs. The encoder is a Gemma 2 model (its own token table, layers of
grouped-query self-attention between a pre- and a post-norm, a gated MLP between a pre- and a
post-norm, a final norm) with bidirectional attention; the decoder is the same stack with its
own token table and, per layer, a cross-attention (q and o at the decoder's width, k and v from
`cross_attention_hidden_size`, biased per `attention_bias`) between a pre- and a post-norm. The
LM head of the ForConditionalGeneration class is tied to the decoder's table under the root's
`tie_word_embeddings`; the base model has none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from tracker.estimate.decoder import build_decoder
from tracker.estimate.general import read_decoder
from tracker.estimate.irregular import Result, dims_of
from tracker.estimate.reading import ConfigView, LayerSpec, Notes, Tally
from tracker.estimate.traits import TRAITS
from tracker.shared.errors import EstimateError


def read_t5gemma(c: ConfigView, t: Tally, n: Notes) -> Result:
    """Count a T5Gemma (see the module docstring)."""
    enc, dec = c.sub("encoder"), c.sub("decoder")
    if enc is None or dec is None:
        raise EstimateError("config lacks encoder / decoder (T5Gemma's two Gemma 2 stacks)")
    traits = TRAITS["gemma2"]
    tied = c.bool("tie_word_embeddings", True)
    c.mark("vocab_size", "is_encoder_decoder", "dropout_rate", "classifier_dropout_rate")
    e = read_decoder(enc, traits, n)
    e.tied = True  # the encoder has no head
    encoders: dict[int, LayerSpec] = {}
    specs = [
        encoders.setdefault(id(s), replace(s, kind="encoder", kv_bytes_per_token=0))
        for s in build_decoder(e, t)
    ]
    d = read_decoder(dec, traits, n)
    d.tied = tied
    dec.mark("is_decoder", "tie_word_embeddings")
    enc.mark("is_decoder", "tie_word_embeddings", "cross_attention_hidden_size")
    enc.mark("max_position_embeddings")  # rotary: no table
    cross_in = dec.int("cross_attention_hidden_size", default=e.hidden)
    bias = dec.bool("attention_bias", False)
    q, kv = d.heads * d.head_dim, d.kv_heads * d.head_dim
    cross = d.hidden * q + 2 * cross_in * kv + q * d.hidden
    if bias:
        cross += q + 2 * kv + d.hidden
    norms = 2 * d.hidden
    t.add("attention", d.n_layers * cross)
    t.add("norms", d.n_layers * norms)
    extra = cross + norms
    lora = d.hidden + q + 2 * (cross_in + kv) + q + d.hidden
    decoders: dict[int, LayerSpec] = {}
    specs += [
        decoders.setdefault(
            id(s),
            replace(
                s,
                params=s.params + extra,
                active_params=s.active_params + extra,
                cross_kv_width=2 * kv,
                lora_dims=s.lora_dims + lora,
            ),
        )
        for s in build_decoder(d, t)
    ]
    emb = e.vocab * e.hidden + d.vocab * d.hidden
    return specs, dims_of(
        d.hidden,
        d.vocab,
        d.heads,
        d.kv_heads,
        d.head_dim,
        d.intermediate,
        tied,
        emb,
        dec.opt_int("max_position_embeddings"),
        encoder_layers=e.n_layers,
    )


READERS: dict[str, Callable[[ConfigView, Tally, Notes], Result]] = {"t5gemma": read_t5gemma}
"""The reader of T5Gemma's model_type."""
