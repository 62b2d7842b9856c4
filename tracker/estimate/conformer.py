"""Conformer speech encoders built alone (no decoder): Parakeet's and Nemotron's streaming
FastConformer, and LASR's.

transformers 5.24.0's layout, sized by `hidden_size`, `intermediate_size`,
`num_hidden_layers`, `num_mel_bins`, `conv_kernel_size` and the subsampling keys: a
depthwise-striding subsampler (a k×k convolution from one channel to `subsampling_conv_channels`,
then per further halving a depthwise k×k and a pointwise 1×1 convolution, all biased; log2 of
`subsampling_factor` halvings in all) and a biased Linear from the channels × the mel bins left
to the hidden width; then blocks of a half-step feed-forward, relative-position attention
(q/k/v/out biased per `attention_bias`, the two position biases u and v, a bias-free position
projection), a convolution module (pointwise to twice the width, depthwise, BatchNorm,
pointwise; biased per `convolution_bias`), a second half-step feed-forward, each behind a
LayerNorm, and a closing LayerNorm. The streaming encoder pads its subsampling causally (one
more frequency row per halving). Parakeet's CTC class adds a 1×1 convolution from the hidden
width to `vocab_size` (biased), as does LASR's.

LASR's encoder: a subsampler of a biased linear from the mel bins to the width, two biased
strided convolutions of `subsampling_conv_kernel_size` (to the width, then to
`subsampling_conv_channels`) and a biased linear back; rotary attention, so no position
parameters; blocks as above with weight-only norms, and linears and convolutions biased per
`attention_bias` / `convolution_bias` (the feed-forwards never); a final weight-only norm.
"""

from __future__ import annotations

from collections.abc import Callable

from tracker.estimate.irregular import Result, dims_of
from tracker.estimate.reading import MAX_LAYERS, ConfigView, Notes, Tally, encoder_layer
from tracker.shared.errors import EstimateError

ENCODERS = frozenset({"parakeet_encoder", "nemotron_asr_streaming_encoder", "lasr_encoder"})
"""Config types of the encoder itself (the CTC class nests one as `encoder_config`)."""


def _lin(i: int, o: int, bias: bool = True) -> int:
    return i * o + (o if bias else 0)


def _lasr(e: ConfigView, t: Tally) -> Result:
    h = e.int("hidden_size")
    inter = e.int("intermediate_size", default=4 * h)
    layers = e.int("num_hidden_layers", maximum=MAX_LAYERS)
    heads = e.int("num_attention_heads")
    if e.int("num_key_value_heads", default=heads) != heads:
        raise EstimateError("config num_key_value_heads must equal num_attention_heads here")
    mel = e.int("num_mel_bins", default=128)
    ch = e.int("subsampling_conv_channels", default=256)
    k = e.int("subsampling_conv_kernel_size", default=5)
    ck = e.int("conv_kernel_size", default=32)
    attn_bias = e.bool("attention_bias", False)
    conv_bias = e.bool("convolution_bias", False)
    # the stride sets the frame rate; residual weights and momentum are numerics
    e.mark("subsampling_conv_stride", "conv_residual_weights", "feed_forward_residual_weights")
    e.mark("batch_norm_momentum", "max_position_embeddings", "layerdrop")
    sub = _lin(mel, h) + _lin(h * k, h) + _lin(h * k, ch) + _lin(ch, h)
    ffn = 2 * h * inter
    attn = 4 * _lin(h, h, attn_bias)
    conv = _lin(h, 2 * h, conv_bias) + _lin(ck, h, conv_bias) + 2 * h + _lin(h, h, conv_bias)
    norms = 5 * h
    return _stack(t, h, inter, heads, layers, sub, ffn, attn, conv, norms, h)


def _stack(
    t: Tally,
    h: int,
    inter: int,
    heads: int,
    layers: int,
    sub: int,
    ffn: int,
    attn: int,
    conv: int,
    norms: int,
    final: int,
) -> Result:
    """Tally `layers` Conformer blocks (two feed-forwards, attention, convolution, norms) after
    the subsampler `sub`, and a final norm of `final` parameters."""
    per = 2 * ffn + attn + conv + norms
    t.add("embeddings", sub)
    t.add("attention", layers * attn)
    t.add("dense_mlp", layers * (2 * ffn + conv))
    t.add("norms", layers * norms + final)
    spec = encoder_layer(per, h, heads, inter, lora_dims=10 * h + 4 * (h + inter))
    return [spec] * layers, dims_of(h, 0, heads, heads, h // heads, inter, True, sub, None)


def _encoder(e: ConfigView, streaming: bool, t: Tally) -> Result:
    h = e.int("hidden_size")
    inter = e.int("intermediate_size", default=4 * h)
    layers = e.int("num_hidden_layers", maximum=MAX_LAYERS)
    heads = e.int("num_attention_heads")
    if e.int("num_key_value_heads", default=heads) != heads:
        raise EstimateError("config num_key_value_heads must equal num_attention_heads here")
    mel = e.int("num_mel_bins", default=80)
    ch = e.int("subsampling_conv_channels", default=256)
    k = e.int("subsampling_conv_kernel_size", default=3)
    if e.int("subsampling_conv_stride", default=2) != 2:
        raise EstimateError("config subsampling_conv_stride other than 2 is not read")
    factor = e.int("subsampling_factor", default=8)
    halvings = factor.bit_length() - 1
    if 1 << halvings != factor:
        raise EstimateError(f"config subsampling_factor must be a power of two, got {factor}")
    ck = e.int("conv_kernel_size", default=9)
    attn_bias = e.bool("attention_bias", True)
    conv_bias = e.bool("convolution_bias", True)
    # positions are relative (a length cap), heads split the width, the rest is numerics
    e.mark("max_position_embeddings", "scale_input", "layerdrop", "sliding_window")
    e.mark("default_num_lookahead_tokens")
    freq = mel
    for _ in range(halvings):
        freq = freq // 2 + 1 if streaming else (freq - 1) // 2 + 1
    sub = _lin(k * k, ch) + (halvings - 1) * (_lin(k * k, ch) + _lin(ch, ch))
    sub += _lin(ch * freq, h)
    ffn = _lin(h, inter) + _lin(inter, h)
    attn = 4 * _lin(h, h, attn_bias) + 2 * h + h * h
    # pointwise to 2h (a GLU halves it), depthwise (one k-tap filter a channel), BatchNorm
    # (weight and bias), pointwise back
    conv = _lin(h, 2 * h, conv_bias) + _lin(ck, h, conv_bias) + 2 * h + _lin(h, h, conv_bias)
    return _stack(t, h, inter, heads, layers, sub, ffn, attn, conv, 5 * 2 * h, 0)


def _read(e: ConfigView, t: Tally) -> Result:
    model_type = e.str("model_type")
    if model_type == "lasr_encoder":
        return _lasr(e, t)
    return _encoder(e, model_type == "nemotron_asr_streaming_encoder", t)


def read_conformer(c: ConfigView, t: Tally, n: Notes) -> Result:
    """Count a FastConformer encoder, alone or under Parakeet's CTC head."""
    model_type = c.str("model_type")
    if model_type in ENCODERS:
        return _read(c, t)
    e = c.sub("encoder_config")
    if e is None:
        raise EstimateError("config lacks encoder_config")
    if e.str("model_type") not in ENCODERS:
        raise EstimateError(f"config encoder_config.model_type {e.str('model_type')!r} is not read")
    specs, dims = _read(e, t)
    vocab = c.int("vocab_size")
    c.mark("ctc_loss_reduction", "ctc_zero_infinity")
    t.add("head", _lin(int(dims["hidden"]), vocab))
    dims["vocab"] = vocab
    return specs, dims


READERS: dict[str, Callable[[ConfigView, Tally, Notes], Result]] = dict.fromkeys(
    (*ENCODERS, "parakeet_ctc", "lasr_ctc"), read_conformer
)
"""The reader of each FastConformer model_type."""
