"""Vision transformers built alone (no vocabulary): the ViT lineage and the CLIP / SigLIP towers.

`read_vit(c, t, n)` counts the class transformers 5.24.0 builds for a standalone ViT-like config:
a patch convolution, learned tokens and a position table, pre-norm blocks (q/k/v/out, two
LayerNorms, a two-matrix MLP), a final norm and the family's pooler or head. What differs
between families (which tokens, which biases, layer scales, poolers) is their `Form` in FORMS,
keyed per model_type; every size comes from the config.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tracker.estimate import vision
from tracker.estimate.irregular import Result, dims_of
from tracker.estimate.reading import (
    MAX_LAYERS,
    ConfigView,
    Notes,
    Tally,
    encoder_layer,
    int_list,
)
from tracker.shared.errors import EstimateError


@dataclass(frozen=True)
class Form:
    """How one family's standalone ViT is built in transformers 5.24.0."""

    tokens: int = 1  # learned tokens before the patches ([CLS], DeiT's distillation token)
    tokens_key: str = ""  # the key that says how many (Pixio's n_cls_tokens)
    positions: str = "table"  # "table" (patches + tokens), "patches", "num_patches", "none",
    # "pretrain" (ViTDet: the pretraining grid + 1), "half-head" (MLCD: head_dim / 2 for [CLS]),
    # "pos-grid" (pos_emb_height × pos_emb_width), "max-positions" (max_position_embeddings)
    patch_bias: bool = True
    bias_key: str = "qkv_bias"  # the switch of the q/k/v biases
    k_bias: bool = True  # False: q and v biased, k not (BEiT, VideoMAE)
    o_bias: bool = True
    mask: str = ""  # the switch that builds a mask token ("always": built whatever the config)
    mask_default: bool = False
    final_norm: bool = True
    pooler: str = ""  # "dense" (h → h, biased), "norm" (BEiT's mean-pooling LayerNorm)
    pre_norm: bool = False  # CLIP's norm before the blocks
    norm: str = "layer"  # "layer" (weight and bias) or "rms" (weight)
    gated: bool = False  # a gated MLP (gate, up, down) without biases
    video: bool = False  # tubelets: a 3-D patch convolution over `tubelet_size` frames
    mlp_ratio: bool = False  # the MLP width is `mlp_ratio` × hidden (DINOv2, ViTDet)
    layer_scale: str = ""  # the key whose positive value builds two per-channel scales a layer
    head: str = ""  # "aimv2": AIMv2's attention-pooling head (a [CLS], k, v, a biased output);
    # "minicpm": MiniCPM-V's merger (an attention block and a window-merging MLP)
    temporal: bool = False  # TimeSformer: a frame table, and per layer a temporal attention
    frames_key: str = ""  # frames per patch of a linear patch embedding (Muse's patch_temporal)
    more_tokens_key: str = ""  # learned tokens after [CLS] (YOLOS's num_detection_tokens)
    mid_positions: str = ""  # the switch of a position table per layer after the first (YOLOS)


VIT = Form(pooler="dense")
SIGLIP = Form(tokens=0, positions="patches")
CLIP = Form(patch_bias=False, pre_norm=True)
BEIT = Form(positions="none", k_bias=False, final_norm=False, layer_scale="layer_scale_init_value")
INTERNVL = Form(
    bias_key="attention_bias",
    mask="use_mask_token",
    final_norm=False,
    layer_scale="layer_scale_init_value",
)
REGISTERS = Form(mlp_ratio=True, mask="always", layer_scale="layerscale_value")
DINOV2 = Form(
    mlp_ratio=True, mask="use_mask_token", mask_default=True, layer_scale="layerscale_value"
)
FORMS: dict[str, Form] = {
    "vit": VIT,
    "deit": Form(tokens=2, pooler="dense"),
    "dpt": VIT,
    "yolos": Form(
        pooler="dense",
        more_tokens_key="num_detection_tokens",
        mid_positions="use_mid_position_embeddings",
    ),
    "ijepa": Form(tokens=0, positions="patches"),
    "vit_mae": Form(),
    "vit_msn": Form(),
    "vivit": Form(pooler="dense", video=True),
    "videomae": Form(tokens=0, positions="none", bias_key="qv_bias", k_bias=False, video=True),
    "audio-spectrogram-transformer": Form(tokens=2),
    "timesformer": Form(temporal=True),
    "kimi_k25_vision": Form(tokens=0, positions="pos-grid"),
    "muse_glimmer_vision": Form(
        tokens=0,
        positions="max-positions",
        patch_bias=False,
        pre_norm=True,
        frames_key="patch_temporal",
    ),
    "muse_spark_vision": Form(
        tokens=0,
        positions="max-positions",
        patch_bias=False,
        pre_norm=True,
        frames_key="patch_temporal",
    ),
    "minicpm_ocr_vision": Form(tokens=0, positions="patches", head="minicpm"),
    "minicpmv4_7_vision": Form(tokens=0, positions="patches", head="minicpm"),
    "dinov2": DINOV2,
    "dinov2_with_registers": REGISTERS,
    "tipsv2_vision_model": REGISTERS,
    "pixio": Form(tokens_key="n_cls_tokens", mlp_ratio=True),
    "vitdet": Form(tokens=0, positions="pretrain", mlp_ratio=True, final_norm=False),
    "mlcd": Form(patch_bias=False, pre_norm=True, positions="half-head"),
    "mlcd_vision_model": Form(patch_bias=False, pre_norm=True, positions="half-head"),
    "aimv2_vision_model": Form(
        tokens=0,
        positions="patches",
        o_bias=False,
        pre_norm=True,
        norm="rms",
        gated=True,
        head="aimv2",
    ),
    "clip_vision_model": CLIP,
    "chinese_clip_vision_model": CLIP,
    "owlvit_vision_model": CLIP,
    "owlv2_vision_model": CLIP,
    "siglip_vision_model": SIGLIP,
    "siglip2_vision_model": Form(tokens=0, positions="num_patches"),
    "idefics3_vision": SIGLIP,
    "smolvlm_vision": SIGLIP,
    "beit": Form(
        positions="none",
        k_bias=False,
        final_norm=False,
        pooler="norm",
        mask="use_mask_token",
        layer_scale="layer_scale_init_value",
    ),
    "data2vec-vision": BEIT,
    "internvl_vision": INTERNVL,
    "qianfan_ocr_vision": INTERNVL,
    "pixtral": Form(
        tokens=0,
        positions="none",
        patch_bias=False,
        bias_key="",
        o_bias=False,
        final_norm=False,
        pre_norm=True,
        norm="rms",
        gated=True,
    ),
}
"""The standalone ViTs read here, per model_type."""


def _lin(i: int, o: int, bias: bool = True) -> int:
    return i * o + (o if bias else 0)


def _sides(c: ConfigView, key: str, default: int, count: int) -> list[int]:
    """`key` as `count` positive sizes: one number stands for all of them (an image_size of 224
    is 224 × 224); EstimateError naming the key otherwise."""
    if isinstance(c.raw(key), list):
        sides = int_list(c, key, (default,) * count)
        if len(sides) != count:
            raise EstimateError(
                f"config {c.path + '.' if c.path else ''}{key} must hold {count} sizes"
            )
        return sides
    return [c.int(key, default=default)] * count


def _grid(c: ConfigView, patch_h: int, patch_w: int) -> int:
    """Patches per image: (image_size // patch_size)², or per side for a [height, width] size."""
    height, width = _sides(c, "image_size", 224, 2)
    return (height // patch_h) * (width // patch_w)


def _ast_grid(c: ConfigView, patch: int) -> int:
    """The Audio Spectrogram Transformer's patches over mel bins × frames, strided per axis."""
    mel = c.int("num_mel_bins", default=128)
    frames = c.int("max_length", default=1024)
    fs = c.int("frequency_stride", default=10)
    ts = c.int("time_stride", default=10)
    return ((mel - patch) // fs + 1) * ((frames - patch) // ts + 1)


def read_vit(c: ConfigView, t: Tally, n: Notes) -> Result:
    """Count a standalone ViT of a family in FORMS (see the module docstring)."""
    model_type = c.str("model_type")
    f = FORMS[model_type]
    h = c.int("hidden_size")
    layers = c.int("num_hidden_layers", maximum=MAX_LAYERS)
    heads = c.int("num_attention_heads")
    if f.mlp_ratio:
        inter = h * c.int("mlp_ratio", default=4)
    else:
        inter = c.int("intermediate_size", default=4 * h)
    patch_h, patch_w = _sides(c, "patch_size", 16, 2)
    ast = model_type == "audio-spectrogram-transformer"
    channels = 1 if ast else c.int("num_channels", default=3)
    _mark_heads(c)
    if f.video:
        if isinstance(c.raw("tubelet_size"), list):  # ViViT: [frames, height, width]
            frames_per, patch_h, patch_w = _sides(c, "tubelet_size", 2, 3)
        else:
            frames_per = c.int("tubelet_size", default=2)
        kernel = channels * frames_per * patch_h * patch_w
        grid = _grid(c, patch_h, patch_w) * (c.int("num_frames", default=16) // frames_per)
    else:
        kernel = channels * patch_h * patch_w
        if f.frames_key:
            kernel *= c.int(f.frames_key, default=2)
        grid = _ast_grid(c, patch_h) if ast else _grid(c, patch_h, patch_w)
    tokens = c.int(f.tokens_key, default=f.tokens) if f.tokens_key else f.tokens
    if f.more_tokens_key:
        tokens += c.int(f.more_tokens_key, default=100, minimum=0)
    emb = _lin(kernel, h, f.patch_bias) + tokens * h
    if f.positions == "table":
        emb += (grid + tokens) * h
    elif f.positions == "patches":
        emb += grid * h
    elif f.positions == "num_patches":
        emb += c.int("num_patches") * h
    elif f.positions == "pretrain" and c.bool("use_absolute_position_embeddings", True):
        side = c.int("pretrain_image_size", default=224)
        emb += ((side // patch_h) * (side // patch_w) + 1) * h
    elif f.positions == "half-head":
        emb += h // heads // 2
    elif f.positions == "pos-grid":
        emb += c.int("pos_emb_height", default=64) * c.int("pos_emb_width", default=64) * h
    elif f.positions == "max-positions":  # Muse: the table restates the grid's sides
        table = c.int("max_position_embeddings")
        side = c.int("pos_emb_height", default=1) * c.int("pos_emb_width", default=table)
        if side != table:
            n.unknown(f"pos_emb_height × pos_emb_width ({side}) differs from {table}")
        c.mark("layer_types")  # windowed or full attention: the same parameters
        emb += table * h
    if f.mask == "always" or (f.mask and c.bool(f.mask, f.mask_default)):
        emb += h
    emb += c.int("num_register_tokens", default=0, minimum=0) * h
    biased = c.bool(f.bias_key, True) if f.bias_key else False
    attn = 4 * h * h + ((3 if f.k_bias else 2) * h if biased else 0) + (h if f.o_bias else 0)
    if f.gated:
        mlp = 3 * h * inter + (2 * inter + h if c.bool("mlp_bias", False) else 0)
    else:
        mlp = _lin(h, inter) + _lin(inter, h)
    norm = 2 * h if f.norm == "layer" else h
    norms = 2 * norm
    if f.layer_scale and c.float(f.layer_scale, 1.0) > 0:
        norms += 2 * h
    if f.temporal:  # divided space-time attention: a LayerNorm, attention, a dense
        if c.str("attention_type", "divided_space_time") != "divided_space_time":
            n.unknown(f"attention_type {c.str('attention_type')!r} (not divided_space_time)")
        emb += c.int("num_frames", default=8) * h
        attn += 3 * h * h + (3 * h if biased else 0) + _lin(h, h) + _lin(h, h)
        norms += 2 * h
    per = attn + mlp + norms
    if f.mid_positions and c.bool(f.mid_positions, False):
        # YOLOS sizes this table by the image's area over the patch's, not by the floored grid
        height, width = _sides(c, "image_size", 224, 2)
        emb += (layers - 1) * (height * width // (patch_h * patch_w) + tokens) * h
    t.add("embeddings", emb)
    t.add("attention", layers * attn)
    t.add("dense_mlp", layers * mlp)
    t.add("norms", layers * norms)
    if f.pre_norm:
        t.add("norms", norm)
    if f.final_norm and not (f.video and c.bool("use_mean_pooling", False)):
        t.add("norms", norm)
    if f.pooler == "dense":
        t.add("head", _lin(h, h))
    elif f.pooler == "norm" and c.bool("use_mean_pooling", True):
        t.add("norms", norm)
    if c.bool("vision_use_head", False):  # SigLIP's attention-pooling head
        probe = h + _lin(h, 3 * h) + _lin(h, h) + 2 * h + _lin(h, inter) + _lin(inter, h)
        t.add("head", probe)
    if f.head == "aimv2" and c.bool("use_head", True):
        t.add("head", h + 2 * _lin(h, h, biased) + _lin(h, h))
    if f.head == "minicpm":  # after layer insert_layer_id: attention, then merged windows
        kh, kw = _sides(c, "window_kernel_size", 2, 2)
        merged = h * kh * kw
        t.add("head", 4 * _lin(h, h) + 2 * h + 2 * merged + _lin(merged, 4 * merged))
        t.add("head", _lin(4 * merged, h))
    return _encoder(h, heads, inter, layers, per, emb, grid + tokens)


def _mark_heads(c: ConfigView) -> None:
    """Keys that leave the base class's parameters alone: backbone outputs, poolers' widths,
    heads and decoders the base class does not build (BEiT's masked-image head, whose codebook is
    `vocab_size`, and segmentation heads; DPT's neck and depth head; the MAE decoders)."""
    c.mark("encoder_stride", "pooler_output_size", "pooler_act", "out_features", "out_indices")
    c.mark("stage_names", "reshape_hidden_states", "apply_layernorm", "projection_dim")
    c.mark("image_size", "use_mean_pooling", "head_dim", "norm_type", "use_qk_norm")
    c.mark("use_absolute_position_embeddings", "use_relative_position_bias")
    c.mark("use_shared_relative_position_bias", "add_fpn")
    c.mark("vocab_size", "auxiliary_channels", "auxiliary_num_convs", "auxiliary_concat_input")
    c.mark("use_auxiliary_head", "pool_scales", "fusion_hidden_size", "head_in_index")
    c.mark("neck_hidden_sizes", "neck_ignore_stages", "reassemble_factors", "readout_type")
    c.mark("decoder_hidden_size", "decoder_intermediate_size", "decoder_num_attention_heads")
    c.mark("decoder_num_hidden_layers", "is_native", "num_key_value_groups")
    # where a merger sits, window and merge sizes of the forward pass, a rotary time table
    c.mark("insert_layer_id", "merge_kernel_size", "merge_size", "pos_emb_time")
    # ViTDet's windowed blocks and residual blocks are off in its default config: read below


def _encoder(
    h: int, heads: int, inter: int, layers: int, per: int, emb: int, ctx: int | None
) -> Result:
    """The layer specs and dims of an encoder of `layers` blocks of `per` parameters each."""
    spec = encoder_layer(per, h, heads, inter, lora_dims=8 * h + 2 * (h + inter))
    return [spec] * layers, dims_of(
        h, 0, heads, heads, h // heads, inter, True, emb, ctx, input_tokens=ctx or 0
    )


def _no_projector(counter: Callable[[ConfigView, int], int]) -> Callable[[ConfigView], int]:
    """A tower counter of vision.py that adds a projector to the text width, for the tower
    alone: a projector to width 0 holds no parameters."""
    return lambda v: counter(v, 0)


TOWERS: dict[str, Callable[[ConfigView], int]] = {
    **dict.fromkeys(
        (
            "qwen3_vl_vision",
            "qwen3_vl_moe_vision",
            "qwen3_5_vision",
            "qwen3_5_moe_vision",
            "qwen4_exp_vision",
            "cohere_compass_vision",
        ),
        vision._qwen_vit,
    ),
    "gemma4_vision": _no_projector(vision._gemma4_vit),
    "video_llama_3_vision": _no_projector(vision._video_llama3_vit),
}
"""Vision models transformers 5.24.0 builds alone whose tower vision.py counts inside their
multimodal wrapper (the Qwen3-VL ViT keeps its patch mergers: they are part of the tower)."""


def _internvl_wrapped(root: ConfigView, v: ConfigView, text_hidden: int, n: Notes) -> int:
    """InternVL's and Qianfan-OCR's tower as built alone, and their projector: a LayerNorm and
    two linears from the pixel-shuffled width (hidden_size × (1 / downsample_ratio)²)."""
    scratch = Tally()
    read_vit(v, scratch, n)
    ratio = root.float("downsample_ratio", 0.5)
    if not 0 < ratio <= 1:
        raise EstimateError(f"config downsample_ratio must be in (0, 1], got {ratio}")
    width = v.int("hidden_size") * int(1 / ratio) ** 2
    # which layer's features feed the projector: every layer is built either way
    root.mark("projector_hidden_act", "vision_feature_layer", "vision_feature_select_strategy")
    return scratch.total + 2 * width + _lin(width, text_hidden) + _lin(text_hidden, text_hidden)


def _siglip2_wrapped(root: ConfigView, v: ConfigView, text_hidden: int, n: Notes) -> int:
    """SigLIP's and SigLIP 2's tower as built alone, in its dual encoder: no projector to the
    text model (the two towers meet in a similarity, through a learned scale and bias)."""
    scratch = Tally()
    read_vit(v, scratch, n)
    return scratch.total + 2  # logit_scale, logit_bias


def _clip_wrapped(root: ConfigView, v: ConfigView, text_hidden: int, n: Notes) -> int:
    """A CLIP-style dual encoder's tower as built alone, and what joins the towers: a bias-free
    projection of each tower's width to `projection_dim` and the learned logit scale."""
    scratch = Tally()
    read_vit(v, scratch, n)
    proj = root.int("projection_dim", default=512)
    return scratch.total + (v.int("hidden_size") + text_hidden) * proj + 1


WRAPPED: dict[tuple[str, str], vision.WrappedTower] = {
    ("internvl", "internvl_vision"): _internvl_wrapped,
    ("qianfan_ocr", "qianfan_ocr_vision"): _internvl_wrapped,
    ("siglip2", "siglip2_vision_model"): _siglip2_wrapped,
    ("siglip", "siglip_vision_model"): _siglip2_wrapped,
    ("clip", "clip_vision_model"): _clip_wrapped,
    ("chinese_clip", "chinese_clip_vision_model"): _clip_wrapped,
    ("owlvit", "owlvit_vision_model"): _clip_wrapped,
    ("owlv2", "owlv2_vision_model"): _clip_wrapped,
}
"""Vision towers of FORMS counted inside their wrapper (by the wrapper's model_type and the
tower's) with the standalone reader; the same tower in another wrapper, with its own projector,
is not among them (Phi-4-reasoning-vision's SigLIP 2 tower stays the generic, approximate
reading)."""


def read_tower(c: ConfigView, t: Tally, n: Notes) -> Result:
    """Count a standalone tower of TOWERS with vision.py's reader of the same tower."""
    total = TOWERS[c.str("model_type")](c)
    # Gemma 4: a rotary position length and a parameter-free average pooling
    c.mark("max_position_embeddings", "pooling_kernel_size")
    h = c.int("hidden_size")
    heads = c.int("num_attention_heads", "num_heads")
    inter = c.int("intermediate_size")
    layers = c.int("num_hidden_layers", "depth", maximum=MAX_LAYERS)
    per = 4 * _lin(h, h) + _lin(h, inter) + _lin(inter, h) + 4 * h
    t.add("vision_tower", total)
    return _encoder(h, heads, inter, layers, per, 0, None)


READERS: dict[str, Callable[[ConfigView, Tally, Notes], Result]] = {
    **dict.fromkeys(FORMS, read_vit),
    **dict.fromkeys(TOWERS, read_tower),
}
"""The reader of each standalone vision model_type."""
