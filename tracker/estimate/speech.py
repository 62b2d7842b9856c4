"""Speech encoders built alone (no vocabulary): the wav2vec 2.0 lineage, and the audio towers
vision.py counts inside their wrappers (Whisper-style, GLM-ASR, Qwen3-ASR, OmniASR encoders).

`read_wav2vec2(c, t, n)` counts the base class transformers 5.24.0 builds for a wav2vec 2.0,
HuBERT, WavLM, UniSpeech(-SAT), data2vec-audio or wav2vec2-conformer config: 1-D convolutions
over the waveform (`conv_dim`, `conv_kernel`, `conv_bias`; a GroupNorm on the first under
`feat_extract_norm` "group", a LayerNorm on each under "layer"), a LayerNorm and a Linear to the
hidden width, a grouped convolutional position embedding (weight-normed: its direction plus one
magnitude per tap; data2vec-audio stacks `num_conv_pos_embeddings` plain ones instead), a
LayerNorm, the blocks, and the learned mask vector when SpecAugment can mask. Blocks are
post- or pre-norm transformer layers (q/k/v/out and a two-matrix feed-forward, all biased, two
LayerNorms), WavLM's gated relative position bias, or Conformer blocks (two half-step
feed-forwards, relative-position attention, a convolution module). What a pretraining, CTC or
classification head would add is not in the base class; the keys that size those heads are
consulted and left out.
"""

from __future__ import annotations

from collections.abc import Callable

from tracker.estimate import vision
from tracker.estimate.irregular import Result, dims_of
from tracker.estimate.reading import (
    MAX_LAYERS,
    ConfigView,
    LayerSpec,
    Notes,
    Tally,
    encoder_layer,
    int_list,
)
from tracker.shared.errors import EstimateError

WAV2VEC2 = frozenset(
    {
        "wav2vec2",
        "hubert",
        "wavlm",
        "unispeech",
        "unispeech-sat",
        "data2vec-audio",
        "wav2vec2-conformer",
    }
)
"""The model_types read by `read_wav2vec2`."""

HEAD_KEYS = (
    # pretraining (quantizer, contrastive loss), CTC, classification, x-vector heads and the
    # optional adapter, none of them in the base class
    "vocab_size",
    "codevector_dim",
    "proj_codevector_dim",
    "num_codevector_groups",
    "num_codevectors_per_group",
    "num_negatives",
    "classifier_proj_size",
    "tdnn_dim",
    "tdnn_kernel",
    "tdnn_dilation",
    "xvector_output_dim",
    "num_clusters",
    "num_ctc_classes",
    "output_hidden_size",
    "adapter_kernel_size",
    "adapter_stride",
    "num_adapter_layers",
    "adapter_attn_dim",
    "use_weighted_layer_sum",
    # strides and masks shape the forward pass only
    "conv_stride",
    "num_feat_extract_layers",
    "mask_time_length",
    "mask_time_min_masks",
    "mask_feature_length",
    "mask_feature_min_masks",
    "layerdrop",
    "do_stable_layer_norm",
    "num_attention_heads",
    "max_source_positions",
    "rotary_embedding_base",
    "max_bucket_distance",
)


def _lin(i: int, o: int, bias: bool = True) -> int:
    return i * o + (o if bias else 0)


def _front(c: ConfigView, h: int, model_type: str) -> int:
    """The feature encoder, its projection, the position convolution and the encoder's
    LayerNorm."""
    dims = int_list(c, "conv_dim", (512,) * 7)
    kernels = int_list(c, "conv_kernel", (10, 3, 3, 3, 3, 2, 2))
    if len(kernels) != len(dims):
        raise EstimateError(f"config conv_kernel has {len(kernels)} entries, conv_dim {len(dims)}")
    bias = c.bool("conv_bias", False)
    norm = "layer" if model_type == "data2vec-audio" else c.str("feat_extract_norm", "group")
    total = 0
    channels = 1
    for i, (out, k) in enumerate(zip(dims, kernels, strict=True)):
        total += _lin(channels * k, out, bias)
        if norm == "layer" or i == 0:
            total += 2 * out
        channels = out
    if c.bool("feat_proj_layer_norm", True):
        total += 2 * channels
    total += _lin(channels, h)
    groups = c.int("num_conv_pos_embedding_groups", default=16)
    if model_type == "data2vec-audio":
        k = c.int("conv_pos_kernel_size", default=19)
        total += c.int("num_conv_pos_embeddings", default=5) * (h * (h // groups) * k + h)
    else:
        k = c.int("num_conv_pos_embeddings", default=128)
        total += h * (h // groups) * k + k + h
    if c.bool("conv_pos_batch_norm", False):
        total += 2 * h
    total += 2 * h  # the encoder's LayerNorm
    if c.float("mask_time_prob", 0.05) > 0 or c.float("mask_feature_prob", 0.0) > 0:
        total += h  # masked_spec_embed
    c.mark("feat_extract_activation", "apply_spec_augment")
    return total


def read_wav2vec2(c: ConfigView, t: Tally, n: Notes) -> Result:
    """Count a wav2vec 2.0-lineage base model (see the module docstring)."""
    model_type = c.str("model_type")
    h = c.int("hidden_size")
    inter = c.int("intermediate_size", default=4 * h)
    layers = c.int("num_hidden_layers", maximum=MAX_LAYERS)
    heads = c.int("num_attention_heads")
    c.mark(*HEAD_KEYS)
    if c.bool("add_adapter", False):
        n.unknown("add_adapter (the adapter after the encoder is not modelled)")
    front = _front(c, h, model_type)
    attn = 4 * _lin(h, h)
    ffn = _lin(h, inter) + _lin(inter, h)
    if model_type == "wav2vec2-conformer":
        if c.str("position_embeddings_type", "relative") == "relative":
            attn += 2 * h + h * h  # pos_bias_u, pos_bias_v, linear_pos
        k = c.int("conv_depthwise_kernel_size", default=31)
        conv = 2 * h + h * 2 * h + h * k + 2 * h + h * h
        per = attn + 2 * ffn + conv + 4 * 2 * h
        mlp = 2 * ffn
    else:
        per = attn + ffn + 4 * h
        mlp = ffn
        if model_type == "wavlm":  # the gated relative bias; the bucket table in layer 0
            attn += heads + _lin(h // heads, 8)
            per += heads + _lin(h // heads, 8)
            t.add("attention", c.int("num_buckets", default=320) * heads)
    t.add("embeddings", front)
    t.add("attention", layers * attn)
    t.add("dense_mlp", layers * mlp)
    t.add("norms", layers * (per - attn - mlp))
    return [_spec(h, inter, heads, per)] * layers, dims_of(
        h, 0, heads, heads, h // heads, inter, True, front, None
    )


def _spec(h: int, inter: int, heads: int, per: int) -> LayerSpec:
    return encoder_layer(per, h, heads, inter, lora_dims=8 * h + 2 * (h + inter))


TOWERS: dict[str, Callable[[ConfigView], int]] = {
    **dict.fromkeys(
        (
            "qwen2_audio_encoder",
            "audioflamingo3_encoder",
            "voxtral_encoder",
            "moss_transcribe_diarize_audio",
        ),
        vision._whisper_encoder,
    ),
    "glmasr_encoder": vision._glmasr_encoder,
    "qwen3_asr_encoder": vision._qwen3_asr_encoder,
    "omniasr_audio": vision._omniasr_encoder,
}
"""Audio encoders transformers 5.24.0 builds alone that vision.py counts as the audio tower of
their wrapper (transformers' WhisperEncoder layout for the first four)."""


def read_audio_tower(c: ConfigView, t: Tally, n: Notes) -> Result:
    """Count a standalone audio encoder of TOWERS with vision.py's reader of the same tower."""
    total = TOWERS[c.str("model_type")](c)
    h = c.int("d_model", "hidden_size")
    inter = c.int("encoder_ffn_dim", "intermediate_size")
    heads = c.int("encoder_attention_heads", "num_attention_heads")
    layers = c.int("encoder_layers", "num_hidden_layers", maximum=MAX_LAYERS)
    # Whisper-style configs carry the decoder's and the text model's sizes too: the encoder
    # class builds neither
    c.mark("vocab_size", "decoder_layers", "decoder_attention_heads", "decoder_ffn_dim")
    c.mark("max_target_positions", "num_hidden_layers", "encoder_layerdrop", "decoder_layerdrop")
    t.add("audio_tower", total)
    per = 4 * _lin(h, h) + _lin(h, inter) + _lin(inter, h) + 4 * h
    return [_spec(h, inter, heads, per)] * layers, dims_of(
        h, 0, heads, heads, h // heads, inter, True, 0, None
    )


def read_word_timestamp(c: ConfigView, t: Tally, n: Notes) -> Result:
    """Nemotron 3.5 Transcribe's word-timestamp model (transformers 5.24.0): no token embedding
    (it reads the encoder's frames; `vocab_size` sizes the labels it aligns, outside the class),
    a biased transposed convolution upsampling by `upsampling_factor`, a LayerNorm, pre-norm
    blocks (bias-free q/k/v, a biased output, LayerNorms over each head's q and k, two
    LayerNorms, a biased two-matrix MLP of `intermediate_size`) and a final LayerNorm."""
    h = c.int("hidden_size")
    inter = c.int("intermediate_size")
    layers = c.int("num_hidden_layers", maximum=MAX_LAYERS)
    heads = c.int("num_attention_heads")
    if c.int("num_key_value_heads", default=heads) != heads:
        raise EstimateError("config num_key_value_heads must equal num_attention_heads here")
    k = c.int("upsampling_factor", default=2)
    hd = h // heads
    # the label count, blank id, residual scale and rotary length leave the class's parameters
    c.mark("vocab_size", "blank_token_id", "residual_scale", "max_position_embeddings")
    front = h * h * k + h + 2 * h
    attn = 4 * h * h + h + 4 * hd
    mlp = _lin(h, inter) + _lin(inter, h)
    t.add("embeddings", front)
    t.add("attention", layers * attn)
    t.add("dense_mlp", layers * mlp)
    t.add("norms", layers * 4 * h + 2 * h)
    per = attn + mlp + 4 * h
    return [_spec(h, inter, heads, per)] * layers, dims_of(
        h, 0, heads, heads, hd, inter, True, front, None
    )


READERS: dict[str, Callable[[ConfigView, Tally, Notes], Result]] = {
    "nemotron3_5_transcribe_word_timestamp": read_word_timestamp,
    **dict.fromkeys(WAV2VEC2, read_wav2vec2),
    **dict.fromkeys(TOWERS, read_audio_tower),
}
"""The reader of each standalone speech-encoder model_type."""
