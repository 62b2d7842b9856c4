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
    "seggpt": read_seggpt,
}
"""The reader of each SAM image-encoder model_type."""
