"""ViTs with decomposed relative positions built alone (no vocabulary): Segment Anything's
image encoder (SAM's and SAM-HQ's) and SegGPT.

transformers 5.24.0's layout, sized by `hidden_size`, `num_hidden_layers`, `mlp_dim`,
`patch_size`, `image_size`, `window_size`, `global_attn_indexes` and `output_channels`: a
biased patch convolution and a learned position grid (under `use_abs_pos`); ViT blocks (a fused
biased qkv per `qkv_bias`, a biased projection, two LayerNorms, a biased two-matrix MLP) whose
attention carries decomposed relative positions (under `use_rel_pos`: two tables of
2 × span − 1 rows by the head width, the span the window, or the whole grid in the global
layers); a neck of a 1×1 and a 3×3 bias-free convolution to `output_channels`, each with a
LayerNorm.

SegGPT (`image_size` [height, width]): a biased patch convolution, five learned tokens (mask,
two segment and two type tokens), a position table of the `pretrain_image_size` grid plus one;
blocks as SAM's with relative tables over the whole grid's height and width (under
`use_relative_position_embeddings`) and an MLP of `mlp_dim`; a final LayerNorm.
"""

from __future__ import annotations

from collections.abc import Callable

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


def _lin(i: int, o: int, bias: bool = True) -> int:
    return i * o + (o if bias else 0)


def read_sam_vision(c: ConfigView, t: Tally, n: Notes) -> Result:
    """Count SAM's image encoder (see the module docstring)."""
    h = c.int("hidden_size")
    layers = c.int("num_hidden_layers", maximum=MAX_LAYERS)
    heads = c.int("num_attention_heads")
    inter = c.int("mlp_dim", default=4 * h)
    p = c.int("patch_size", default=16)
    grid = c.int("image_size", default=1024) // p
    window = c.int("window_size", default=14)
    out = c.int("output_channels", default=256)
    ch = c.int("num_channels", default=3)
    biased = c.bool("qkv_bias", True)
    raw = c.list("global_attn_indexes") or []
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in raw):
        raise EstimateError("config global_attn_indexes must hold layer numbers")
    global_layers = {i for i in raw if 0 <= i < layers}
    # mlp_ratio restates mlp_dim; the prompt encoder's sizes are not in the image encoder
    c.mark("mlp_ratio", "num_pos_feats", "scale")
    emb = _lin(ch * p * p, h) + (grid * grid * h if c.bool("use_abs_pos", True) else 0)
    rel = c.bool("use_rel_pos", True)
    hd = h // heads
    specs: list[LayerSpec] = []
    for i in range(layers):
        span = grid if (i in global_layers or window == 0) else window
        attn = _lin(h, 3 * h, biased) + _lin(h, h) + (2 * (2 * span - 1) * hd if rel else 0)
        mlp = _lin(h, inter) + _lin(inter, h)
        per = attn + mlp + 4 * h
        t.add("attention", attn)
        t.add("dense_mlp", mlp)
        t.add("norms", 4 * h)
        specs.append(encoder_layer(per, h, heads, inter, lora_dims=6 * h + 2 * (h + inter)))
    t.add("embeddings", emb)
    t.add("vision_tower", h * out + 2 * out + out * out * 9 + 2 * out)
    return specs, dims_of(h, 0, heads, heads, hd, inter, True, emb, None)


def _feed_forward(i: int, hidden: int, o: int, depth: int) -> int:
    """SAM's SamFeedForward: `depth` biased linears, i → hidden … hidden → o."""
    return _lin(i, hidden) + max(0, depth - 2) * _lin(hidden, hidden) + _lin(hidden, o)


def read_sam(c: ConfigView, t: Tally, n: Notes) -> Result:
    """Count SAM's whole model (SamModel): the image encoder as `read_sam_vision`; the prompt
    encoder (a random-Fourier position table of 2 × `vision_config.num_pos_feats`, a mask
    embedding of two strided 2×2 convolutions through `mask_input_channels` / 4 and
    `mask_input_channels` channels with channel LayerNorms and a 1×1 to the width, a no-mask,
    `num_point_embeddings` point and a not-a-point embedding); the mask decoder (an IoU and
    `num_multimask_outputs` + 1 mask tokens; `num_hidden_layers` two-way blocks of a
    self-attention, token-to-image and image-to-token attentions at width /
    `attention_downsample_rate`, a biased MLP of `mlp_dim` and four LayerNorms; a final
    token-to-image attention and LayerNorm; two transposed 2×2 convolutions to width / 4 and
    width / 8 with a channel LayerNorm; per mask token a three-linear hypernetwork MLP to
    width / 8; an IoU head of `iou_head_depth` linears through `iou_head_hidden_dim`)."""
    v, p, m = c.sub("vision_config"), c.sub("prompt_encoder_config"), c.sub("mask_decoder_config")
    if v is None or p is None or m is None:
        raise EstimateError(
            "config lacks vision_config / prompt_encoder_config / mask_decoder_config"
        )
    specs, dims = read_sam_vision(v, t, n)
    c.mark("tie_word_embeddings")  # nothing to tie: no vocabulary
    ph = p.int("hidden_size", default=256)
    mic = p.int("mask_input_channels", default=16)
    quarter = mic // 4
    # the sizes of the image the prompts refer to, and activations: no parameters
    p.mark("image_embedding_size", "image_size", "patch_size", "hidden_act", "layer_norm_eps")
    prompt = 2 * v.int("num_pos_feats", default=128)
    prompt += _lin(4, quarter) + 2 * quarter + _lin(quarter * 4, mic) + 2 * mic + _lin(mic, ph)
    prompt += (2 + p.int("num_point_embeddings", default=4)) * ph
    h = m.int("hidden_size", default=256)
    inter = m.int("mlp_dim", default=2048)
    masks = m.int("num_multimask_outputs", default=3) + 1
    rate = m.int("attention_downsample_rate", default=2)
    blocks = m.int("num_hidden_layers", default=2, maximum=MAX_LAYERS)
    m.int("num_attention_heads", default=8)
    m.mark("hidden_act", "layer_norm_eps")
    # transformers builds the blocks' two cross-attentions at SamTwoWayAttentionBlock's default
    # rate of 2; only the final token-to-image attention takes the config's rate
    small = 3 * _lin(h, h // rate) + _lin(h // rate, h)
    halved = 3 * _lin(h, h // 2) + _lin(h // 2, h)
    block = 4 * _lin(h, h) + 2 * halved + _lin(h, inter) + _lin(inter, h) + 8 * h
    decoder = (1 + masks) * h + blocks * block + small + 2 * h
    decoder += h * (h // 4) * 4 + h // 4 + (h // 4) * (h // 8) * 4 + h // 8 + 2 * (h // 4)
    decoder += masks * _feed_forward(h, h, h // 8, 3)
    decoder += _feed_forward(
        h,
        m.int("iou_head_hidden_dim", default=256),
        masks,
        m.int("iou_head_depth", default=3, maximum=MAX_LAYERS),
    )
    t.add("head", prompt + decoder)
    return specs, dims


def read_seggpt(c: ConfigView, t: Tally, n: Notes) -> Result:
    """Count SegGPT (see the module docstring)."""
    h = c.int("hidden_size")
    layers = c.int("num_hidden_layers", maximum=MAX_LAYERS)
    heads = c.int("num_attention_heads")
    inter = c.int("mlp_dim", default=4 * h)
    p = c.int("patch_size", default=16)
    sides = int_list(c, "image_size", (896, 448))
    if not isinstance(c.raw("image_size", []), list) or len(sides) != 2:
        raise EstimateError("config image_size must be [height, width]")
    height, width = sides
    pre = c.int("pretrain_image_size", default=224) // p
    # which hidden states feed the decoder, the merge point and the loss weight add nothing;
    # the decoder (decoder_hidden_size) is not in SegGptModel
    c.mark("intermediate_hidden_state_indices", "merge_index", "beta", "decoder_hidden_size")
    hd = h // heads
    rel = 0
    if c.bool("use_relative_position_embeddings", True):
        rel = (2 * (height // p) - 1) * hd + (2 * (width // p) - 1) * hd
    emb = _lin(c.int("num_channels", default=3) * p * p, h) + 5 * h + (pre * pre + 1) * h
    attn = _lin(h, 3 * h, c.bool("qkv_bias", True)) + _lin(h, h) + rel
    mlp = _lin(h, inter) + _lin(inter, h)
    per = attn + mlp + 4 * h
    t.add("embeddings", emb)
    t.add("attention", layers * attn)
    t.add("dense_mlp", layers * mlp)
    t.add("norms", layers * 4 * h + 2 * h)
    spec = encoder_layer(per, h, heads, inter, lora_dims=6 * h + 2 * (h + inter))
    return [spec] * layers, dims_of(h, 0, heads, heads, hd, inter, True, emb, None)


READERS: dict[str, Callable[[ConfigView, Tally, Notes], Result]] = {
    "sam_vision_model": read_sam_vision,
    "sam_hq_vision_model": read_sam_vision,
    "sam": read_sam,
    "seggpt": read_seggpt,
}
"""The reader of each SAM image-encoder model_type."""


def _counted_by_read_sam(root: ConfigView, v: ConfigView, text_hidden: int, n: Notes) -> int:
    """SamModel's image encoder: `read_sam` has counted it with the model (nothing more)."""
    return 0


WRAPPED: dict[tuple[str, str], Callable[[ConfigView, ConfigView, int, Notes], int]] = {
    ("sam", "sam_vision_model"): _counted_by_read_sam,
}
"""Vision sub-configs the family reader counts itself (by wrapper and tower model_type), which
the multimodal tower count must not count again."""
