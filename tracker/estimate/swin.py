"""Swin transformers built alone (no vocabulary): Swin, Swin V2, Donut's and MaskFormer's Swin.

transformers 5.24.0's layout, sized by `embed_dim`, `depths`, `num_heads`, `window_size`,
`mlp_ratio`, `patch_size` and `num_channels`: a patchifying convolution and a LayerNorm (and a
learned position table under `use_absolute_embeddings`, a mask token under `use_mask_token`);
stage i works at embed_dim × 2^i with `depths[i]` blocks of windowed attention (q/k/v/out; Swin
keeps a (2w − 1)² × heads relative-bias table, Swin V2 a continuous position-bias MLP, a
logit scale and no k bias), two LayerNorms and a two-matrix MLP; between stages a patch merging
(a bias-free linear from 4 × to 2 × the width and a LayerNorm, before it in Swin, after it in
V2); a final LayerNorm (not in Donut's Swin).
"""

from __future__ import annotations

from collections.abc import Callable

from tracker.estimate.irregular import Result, dims_of
from tracker.estimate.reading import ConfigView, LayerSpec, Notes, Tally, encoder_layer, int_list
from tracker.shared.errors import EstimateError

CPB_HIDDEN = 512
"""The width of Swin V2's continuous position-bias MLP (fixed in transformers)."""


def read_swin(c: ConfigView, t: Tally, n: Notes) -> Result:
    """Count a Swin of a model_type in READERS (see the module docstring)."""
    model_type = c.str("model_type")
    v2 = model_type == "swinv2"
    e = c.int("embed_dim", default=96)
    depths = int_list(c, "depths", (2, 2, 6, 2))
    heads = int_list(c, "num_heads", (3, 6, 12, 24))
    stages = c.int("num_layers", default=len(depths))
    if not len(depths) == len(heads) == stages:
        raise EstimateError(
            f"config depths has {len(depths)} stages, num_heads {len(heads)}, num_layers {stages}"
        )
    w = c.int("window_size", default=7)
    ratio = c.float("mlp_ratio", 4.0)
    if not 0 < ratio <= 64:
        raise EstimateError(f"config mlp_ratio must be in (0, 64], got {ratio}")
    patch = c.int("patch_size", default=4)
    channels = c.int("num_channels", default=3)
    biased = c.bool("qkv_bias", True)
    c.mark("image_size", "hidden_size", "encoder_stride", "out_features", "out_indices")
    c.mark("stage_names", "pretrained_window_sizes")
    emb = channels * patch * patch * e + e + 2 * e
    if c.bool("use_absolute_embeddings", False):
        size = c.int("image_size", default=224)
        emb += ((size // patch) ** 2 + 1) * e
    if c.bool("use_mask_token", False):
        emb += e
    t.add("embeddings", emb)
    specs: list[LayerSpec] = []
    dim = e
    for i, (depth, h) in enumerate(zip(depths, heads, strict=True)):
        dim = e * 2**i
        inter = int(dim * ratio)
        attn = 4 * dim * dim + dim + (2 if v2 else 3) * (dim if biased else 0)
        if v2:
            attn += 3 * CPB_HIDDEN + CPB_HIDDEN * h + h
        else:
            attn += (2 * w - 1) ** 2 * h
        mlp = dim * inter + inter + inter * dim + dim
        per = attn + mlp + 4 * dim
        t.add("attention", depth * attn)
        t.add("dense_mlp", depth * mlp)
        t.add("norms", depth * 4 * dim)
        specs += [encoder_layer(per, dim, h, inter, lora_dims=8 * dim + 2 * (dim + inter))] * depth
        if i < len(depths) - 1:  # patch merging
            t.add("embeddings", 4 * dim * 2 * dim + 2 * (2 * dim if v2 else 4 * dim))
    if model_type != "donut-swin":
        t.add("norms", 2 * dim)
    return specs, dims_of(dim, 0, heads[-1], heads[-1], dim // heads[-1], 4 * dim, True, emb, None)


READERS: dict[str, Callable[[ConfigView, Tally, Notes], Result]] = dict.fromkeys(
    ("swin", "swinv2", "donut-swin", "maskformer-swin"), read_swin
)
"""The reader of each Swin model_type."""
