"""Vision and audio towers of multimodal configs, counted into `vision_tower` / `audio_tower`.

Covered vision towers: SigLIP (Gemma 3, Idefics3), Qwen3-VL / Qwen3.5 ViT with mergers, Llama 4
ViT with its pixel-shuffle adapter, Gemma 4 ViT. Covered audio towers: Whisper-style encoders
(two 3-wide convolutions over the mel bins, learned positions, pre-norm blocks with q/v/out
biases, a final LayerNorm) with the projectors of Qwen2-Audio and Voxtral, GLM-ASR's
(the same without learned positions, grouped k/v heads, a two-layer projector), Qwen3-ASR's (three
strided 2-D convolutions and a bias-free linear in place of Whisper's 1-D pair, sinusoidal
positions held as a buffer, a two-layer projector to `output_dim`) and OmniASR's (a wav2vec 2.0
encoder: a stack of 1-D convolutions over the waveform, each with a LayerNorm, a grouped
convolutional position embedding, pre-norm blocks, one linear projector). A tower or projector
not covered is flagged `*-not-counted`, which makes the estimate unverified (verify.py): its
parameters are missing from the count.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tracker.estimate import merger_vit
from tracker.estimate.reading import MAX_LAYERS, ConfigView, Notes, Tally, int_list
from tracker.shared.errors import EstimateError


def _lin(i: int, o: int, bias: bool = True) -> int:
    return i * o + (o if bias else 0)


def _siglip(v: ConfigView) -> int:
    hv = v.int("hidden_size")
    iv = v.int("intermediate_size")
    p = v.int("patch_size")
    ch = v.int("num_channels", default=3)
    size = v.int("image_size")
    layers = v.int("num_hidden_layers", maximum=MAX_LAYERS)
    total = ch * p * p * hv + hv + (size // p) ** 2 * hv
    total += layers * (4 * _lin(hv, hv) + _lin(hv, iv) + _lin(iv, hv) + 4 * hv)
    total += 2 * hv
    if v.bool("vision_use_head", False):
        total += hv + 4 * _lin(hv, hv) + 2 * hv + _lin(hv, iv) + _lin(iv, hv)
    return total


def _qwen_vit(v: ConfigView) -> int:
    hv = v.int("hidden_size")
    iv = v.int("intermediate_size")
    p = v.int("patch_size")
    tp = v.int("temporal_patch_size", default=2)
    ch = v.int("in_channels", default=3)
    depth = v.int("depth", maximum=MAX_LAYERS)
    m = v.int("spatial_merge_size", default=2)
    out = v.int("out_hidden_size")
    total = ch * tp * p * p * hv + hv
    total += v.int("num_position_embeddings", default=0, minimum=0) * hv
    total += depth * (4 * hv + _lin(hv, 3 * hv) + _lin(hv, hv) + _lin(hv, iv) + _lin(iv, hv))
    merged = hv * m * m
    total += 2 * hv + _lin(merged, merged) + _lin(merged, out)
    deep = v.list("deepstack_visual_indexes") or []
    total += len(deep) * (2 * merged + _lin(merged, merged) + _lin(merged, out))
    return total


def _llama4_vit(v: ConfigView, text_hidden: int) -> int:
    hv = v.int("hidden_size")
    iv = v.int("intermediate_size")
    p = v.int("patch_size")
    ch = v.int("num_channels", default=3)
    size = v.int("image_size")
    layers = v.int("num_hidden_layers", maximum=MAX_LAYERS)
    ratio = v.float("pixel_shuffle_ratio", 0.5)
    if not 0 < ratio <= 1:
        ratio = 0.5
    total = hv + ((size // p) ** 2 + 1) * hv + ch * p * p * hv + 4 * hv
    total += layers * (4 * _lin(hv, hv) + _lin(hv, iv) + _lin(iv, hv) + 4 * hv)
    adapter_in = int(hv / (ratio * ratio))
    pin = v.int("projector_input_dim")
    pout = v.int("projector_output_dim")
    total += adapter_in * pin + pin * pout
    total += _lin(
        v.int("vision_output_dim"), text_hidden, v.bool("multi_modal_projector_bias", False)
    )
    return total


def _gemma4_vit(v: ConfigView, text_hidden: int) -> int:
    hv = v.int("hidden_size")
    iv = v.int("intermediate_size")
    p = v.int("patch_size")
    heads = v.int("num_attention_heads")
    kv = v.int("num_key_value_heads", default=heads)
    hd = v.int("head_dim", default=hv // heads)
    layers = v.int("num_hidden_layers", maximum=MAX_LAYERS)
    total = 2 * v.int("position_embedding_size") * hv + 3 * p * p * hv
    per = 2 * hv * heads * hd + 2 * hv * kv * hd + 2 * hd + 3 * hv * iv + 4 * hv
    total += layers * per
    total += hv * text_hidden
    return total


def _moonvit(v: ConfigView, text_hidden: int) -> int:
    """MoonViT (Kimi-K2.5 / K3) in transformers' Kimi-K2.5 layout: patch conv, a learned 2-D
    position grid, LayerNorm blocks with q/k/v/proj and a two-matrix MLP, then a projector that
    merges `merge_kernel_size` patches (pre-norm, in_proj, out_proj to the text width). Switches
    K2.5 does not have (`attn_bias`, `linear_bias`, `norm_type`, `qkv_hidden_size`) are applied
    where they name a size or a bias."""
    hv = v.int("vt_hidden_size")
    iv = v.int("vt_intermediate_size", default=4 * hv)
    layers = v.int("vt_num_hidden_layers", maximum=MAX_LAYERS)
    p = v.int("patch_size", default=14)
    qkv = v.int("qkv_hidden_size", default=hv)
    attn_bias = v.bool("attn_bias", True)
    lin_bias = v.bool("linear_bias", True)
    norm = hv if v.str("norm_type", "layernorm") == "rmsnorm" else 2 * hv
    merge = v.list("merge_kernel_size") or [2, 2]
    m = 1
    for x in merge[:2]:
        m *= int(x) if isinstance(x, int) and not isinstance(x, bool) and 0 < x < 64 else 1
    grid = v.int("init_pos_emb_height", default=64) * v.int("init_pos_emb_width", default=64)
    total = 3 * p * p * hv + (hv if v.bool("patch_embed_proj_bias", True) else 0) + grid * hv
    per = 3 * _lin(hv, qkv, attn_bias) + _lin(qkv, hv, attn_bias)
    per += _lin(hv, iv, lin_bias) + _lin(iv, hv, lin_bias) + 2 * norm
    total += layers * per + norm
    merged = hv * m
    mm = v.int("mm_hidden_size", default=hv)
    total += 2 * mm + _lin(merged, merged, True) + _lin(merged, text_hidden, True)
    v.mark("vt_num_attention_heads", "text_hidden_size", "init_pos_emb_time", "mm_projector_type")
    return total


def _video_llama3_vit(v: ConfigView, text_hidden: int) -> int:
    """VideoLlama3VisionModel (transformers 5.24) and its projector: a patch Conv2d (biased, no
    position table: axial rotary), SigLIP-style pre-norm blocks (biased q/k/v/out and fc1/fc2, two
    LayerNorms), a final LayerNorm; VideoLlama3Projector is two biased linears (vision → text →
    text width) around a GELU."""
    hv = v.int("hidden_size")
    layers = v.int("num_hidden_layers", maximum=MAX_LAYERS)
    iv = v.int("intermediate_size")
    p = v.int("patch_size")
    ch = v.int("num_channels", default=3)
    v.mark("num_attention_heads", "rope_parameters", "layer_norm_eps")
    total = ch * p * p * hv + hv
    total += layers * (4 * _lin(hv, hv) + _lin(hv, iv) + _lin(iv, hv) + 4 * hv) + 2 * hv
    return total + _lin(hv, text_hidden) + _lin(text_hidden, text_hidden)


def _generic_vit(v: ConfigView, text_hidden: int) -> int:
    """A ViT read from its sizes alone (patch conv, pre-norm blocks, a linear projector)."""
    hv = v.int("hidden_size", "embed_dim", "width", "d_model")
    layers = v.int("num_hidden_layers", "depth", "num_layers", maximum=MAX_LAYERS)
    iv = v.int("intermediate_size", "mlp_dim", default=4 * hv)
    p = v.int("patch_size", default=14)
    ch = v.int("num_channels", "in_channels", "in_chans", default=3)
    total = ch * p * p * hv + hv
    total += layers * (4 * _lin(hv, hv) + _lin(hv, iv) + _lin(iv, hv) + 4 * hv) + 2 * hv
    total += _lin(v.int("out_hidden_size", "projection_dim", default=hv), text_hidden)
    return total


WrappedTower = Callable[[ConfigView, ConfigView, int, Notes], int]
"""Counts a vision tower with its projector: (root config, vision_config, text width, notes)."""


def count_towers(
    root: ConfigView,
    model_type: str,
    t: Tally,
    n: Notes,
    dims: dict[str, Any],
    wrapped: Mapping[tuple[str, str], WrappedTower] | None = None,
) -> int:
    """Add the vision and audio towers and projectors of a multimodal config to `t`; return
    their count. `wrapped` holds the standalone readers that count a tower inside its wrapper, by
    (the wrapper's model_type, vision_config.model_type)."""
    vision = _count_vision(root, model_type, t, n, dims, wrapped or {})
    return vision + _count_audio(root, model_type, t, n, dims)


WHISPER_ENCODERS = frozenset(
    {"whisper", "qwen2_audio_encoder", "voxtral_encoder", "audioflamingo3_encoder"}
)
"""Audio sub-config types built as transformers' WhisperEncoder (same parameters)."""


def _whisper_encoder(a: ConfigView) -> int:
    """WhisperEncoder: conv1 (mel→d, k=3), conv2 (d→d, k=3), learned positions, pre-norm blocks
    (q/k/v/out with biases except k, LayerNorms, fc1/fc2 with biases) and a final LayerNorm."""
    d = a.int("d_model", "hidden_size")
    f = a.int("encoder_ffn_dim", "intermediate_size")
    layers = a.int("encoder_layers", "num_hidden_layers", maximum=MAX_LAYERS)
    mel = a.int("num_mel_bins", default=80)
    positions = a.int("max_source_positions", default=1500)
    a.mark("encoder_attention_heads", "num_attention_heads", "vocab_size")
    total = mel * d * 3 + d + d * d * 3 + d + positions * d
    total += layers * (4 * d * d + 3 * d + _lin(d, f) + _lin(f, d) + 4 * d)
    return total + 2 * d


def _glmasr_encoder(a: ConfigView) -> int:
    """GlmAsrEncoder: Whisper's two convolutions without learned positions (rotary instead),
    pre-norm blocks with q/v/o biases and grouped k/v heads, LayerNorms, a final LayerNorm."""
    d = a.int("hidden_size")
    f = a.int("intermediate_size")
    layers = a.int("num_hidden_layers", maximum=MAX_LAYERS)
    heads = a.int("num_attention_heads")
    kv = a.int("num_key_value_heads", default=heads)
    kvw = kv * (d // heads)
    mel = a.int("num_mel_bins", default=128)
    a.mark("max_position_embeddings", "partial_rotary_factor")
    total = mel * d * 3 + d + d * d * 3 + d
    attn = _lin(d, d) + d * kvw + _lin(d, kvw) + _lin(d, d)
    total += layers * (attn + _lin(d, f) + _lin(f, d) + 4 * d)
    return total + 2 * d


def _qwen3_asr_encoder(a: ConfigView) -> int:
    """Qwen3ASREncoder (transformers 5.24): three 3×3 stride-2 Conv2d (1→c→c→c, biased, c =
    `downsample_hidden_size`) over the mel × time plane, then a bias-free Linear from c × the mel
    bins left after three halvings to d; sinusoidal positions (a non-persistent buffer, no
    parameters); pre-norm blocks with q/k/v/out all biased (unlike Whisper's bias-free k),
    LayerNorms, fc1/fc2 biased; a final LayerNorm (`ln_post`)."""
    d = a.int("d_model", "hidden_size")
    f = a.int("encoder_ffn_dim", "intermediate_size")
    layers = a.int("encoder_layers", "num_hidden_layers", maximum=MAX_LAYERS)
    mel = a.int("num_mel_bins", default=128)
    c = a.int("downsample_hidden_size", default=480)
    # heads split d without parameters; the windows and the position table's length (a buffer)
    # shape the forward pass only
    a.mark("encoder_attention_heads", "num_attention_heads", "n_window", "n_window_infer")
    a.mark("max_position_embeddings", "scale_embedding", "output_dim")
    freq = mel
    for _ in range(3):  # kernel 3, stride 2, padding 1: ceil(freq / 2)
        freq = (freq + 1) // 2
    total = _lin(9, c) + 2 * _lin(9 * c, c) + c * freq * d
    total += layers * (4 * _lin(d, d) + _lin(d, f) + _lin(f, d) + 4 * d)
    return total + 2 * d


def _omniasr_encoder(a: ConfigView) -> int:
    """OmniASRAudioModel (transformers 5.24), a wav2vec 2.0 encoder: 1-D convolutions over the raw
    waveform (1→conv_dim[0]→…, kernel conv_kernel[i], biased per `conv_bias`), each followed by
    an affine LayerNorm; a LayerNorm and a biased Linear from conv_dim[-1] to d; a grouped Conv1d
    position embedding (d → d, kernel `num_conv_pos_embeddings`, biased, no weight norm);
    pre-norm blocks with biased q/k/v/out, LayerNorms, a biased two-matrix feed-forward; a final
    LayerNorm."""
    d = a.int("hidden_size")
    f = a.int("intermediate_size")
    layers = a.int("num_hidden_layers", maximum=MAX_LAYERS)
    dims = int_list(a, "conv_dim", (512,) * 7)
    kernels = int_list(a, "conv_kernel", (10, 3, 3, 3, 3, 2, 2))
    if len(kernels) != len(dims):
        raise EstimateError(
            f"config {a.path}.conv_kernel has {len(kernels)} entries, conv_dim {len(dims)}"
        )
    bias = a.bool("conv_bias", True)
    pos_kernel = a.int("num_conv_pos_embeddings", default=128)
    groups = a.int("num_conv_pos_embedding_groups", default=16)
    if d % groups:
        raise EstimateError(
            f"config {a.path}.hidden_size {d} is not divisible by "
            f"num_conv_pos_embedding_groups {groups}"
        )
    # strides set the frame rate, heads split d, layerdrop skips layers in training: no parameters
    a.mark("conv_stride", "num_attention_heads", "layerdrop")
    total = 0
    channels = 1
    for out, k in zip(dims, kernels, strict=True):
        total += _lin(channels * k, out, bias) + 2 * out
        channels = out
    total += 2 * channels + _lin(channels, d)
    total += d * (d // groups) * pos_kernel + d
    total += layers * (4 * _lin(d, d) + _lin(d, f) + _lin(f, d) + 4 * d)
    return total + 2 * d


def _count_audio(
    root: ConfigView, model_type: str, t: Tally, n: Notes, dims: dict[str, Any]
) -> int:
    a = root.sub("audio_config")
    if a is None:
        return 0
    atype = a.str("model_type")
    text_hidden = int(dims["hidden"])
    if atype == "glmasr_encoder" and model_type == "glmasr":
        total = _glmasr_encoder(a)
        # GlmAsrMultiModalProjector: intermediate → 2 × text hidden → text hidden, biased
        f = a.int("intermediate_size")
        total += _lin(f, 2 * text_hidden) + _lin(2 * text_hidden, text_hidden)
        root.mark("projector_hidden_act")
        t.add("audio_tower", total, 0)
        return total
    if atype == "qwen3_asr_encoder" and model_type == "qwen3_asr":
        total = _qwen3_asr_encoder(a)
        # Qwen3ASRMultiModalProjector: d → d → output_dim, both biased (not to the text width:
        # transformers' own default config pairs output_dim 3584 with a 2048-wide text model)
        d = a.int("d_model", "hidden_size")
        total += _lin(d, d) + _lin(d, a.int("output_dim", default=3584))
        t.add("audio_tower", total, 0)
        return total
    if atype == "omniasr_audio" and model_type == "omniasr":
        # OmniASRModel's projector: one biased Linear from the encoder width to the text width
        total = _omniasr_encoder(a) + _lin(a.int("hidden_size"), text_hidden)
        t.add("audio_tower", total, 0)
        return total
    if atype == "audioflamingo3_encoder" and model_type in ("audioflamingo3", "musicflamingo"):
        # AudioFlamingo3MultiModalProjector: encoder width → text width → text width, both
        # biased per `projector_bias`
        bias = root.bool("projector_bias", True)
        d = a.int("d_model", "hidden_size")
        total = (
            _whisper_encoder(a) + _lin(d, text_hidden, bias) + _lin(text_hidden, text_hidden, bias)
        )
        root.mark("projector_hidden_act")
        t.add("audio_tower", total, 0)
        return total
    if atype not in WHISPER_ENCODERS or model_type not in ("qwen2_audio", "voxtral"):
        n.flag(
            "audio-tower-not-counted",
            f"audio tower of type {atype or 'unknown'!r} in {model_type!r} is not modelled: "
            "not counted",
        )
        return 0
    total = _whisper_encoder(a)
    if model_type == "qwen2_audio":  # Qwen2AudioMultiModalProjector: one biased linear
        total += _lin(a.int("d_model", "hidden_size"), text_hidden)
    else:  # VoxtralMultiModalProjector: 4 frames stacked (= intermediate_size), two bias-free
        total += a.int("intermediate_size", "encoder_ffn_dim") * text_hidden
        total += text_hidden * text_hidden
        root.mark("projector_hidden_act")
    t.add("audio_tower", total, 0)
    return total


QWEN3_VIT = frozenset(
    {
        "qwen3_vl",
        "qwen3_5",
        "qwen3_5_moe",
        "qwen3_vl_moe",
        "qwen3_vl_vision",
        "qwen3_vl_moe_vision",
        "qwen3_5_vision",
        "qwen3_5_moe_vision",
    }
)
"""Vision sub-config types of the Qwen3-VL ViT (older configs give the wrapper's type)."""


def _count_vision(
    root: ConfigView,
    model_type: str,
    t: Tally,
    n: Notes,
    dims: dict[str, Any],
    wrapped: Mapping[tuple[str, str], WrappedTower],
) -> int:
    v = root.sub("vision_config")
    if v is None:
        return 0
    text_hidden = int(dims["hidden"])
    vtype = v.str("model_type")
    if (model_type, vtype) in wrapped:
        total = wrapped[model_type, vtype](root, v, text_hidden, n)
    elif vtype in ("siglip_vision_model", "idefics3_vision", "siglip"):
        total = _siglip(v)
        if model_type == "idefics3":
            scale = root.int("scale_factor", default=2)
            total += v.int("hidden_size") * scale * scale * text_hidden
        elif model_type == "gemma3":
            total += v.int("hidden_size") * text_hidden + v.int("hidden_size")
        elif model_type == "deepseek_vl":  # DeepseekVLAligner: two biased linears
            total += _lin(v.int("hidden_size"), text_hidden) + _lin(text_hidden, text_hidden)
        else:
            n.flag(
                "vision-projector-not-counted",
                f"projector from the SigLIP tower to the text model of {model_type!r} is not "
                "modelled: not counted",
            )
    elif vtype in QWEN3_VIT:
        total = _qwen_vit(v)
    elif vtype in merger_vit.READERS:  # the tower holds its merger: nothing more to project
        scratch = Tally()
        merger_vit.read_merger_vit(v, scratch, n)
        total = scratch.total
    elif vtype == "llama4_vision_model":
        total = _llama4_vit(v, text_hidden)
    elif vtype == "gemma4_vision":
        total = _gemma4_vit(v, text_hidden)
    elif vtype == "video_llama_3_vision" and model_type == "video_llama_3":
        total = _video_llama3_vit(v, text_hidden)
    elif v.has("vt_hidden_size"):
        total = _moonvit(v, text_hidden)
        if model_type != "kimi_k25":
            n.flag(
                "vision-tower-approximate",
                f"vision_config of {model_type!r} (vt_hidden_size) is not modelled: its tower read "
                "in Kimi-K2.5's MoonViT layout, approximately",
            )
    elif v.first_key("hidden_size", "embed_dim", "width", "d_model") and v.first_key(
        "num_hidden_layers", "depth", "num_layers"
    ):
        total = _generic_vit(v, text_hidden)
        n.flag(
            "vision-tower-approximate",
            f"vision_config.model_type {vtype or 'unknown'!r} is not modelled: its tower read as "
            "a generic ViT, approximately",
        )
    else:
        n.flag(
            "vision-tower-not-counted",
            f"vision tower of type {vtype or 'unknown'!r} has no sizes we can read: not counted",
        )
        return 0
    t.add("vision_tower", total, 0)
    return total
