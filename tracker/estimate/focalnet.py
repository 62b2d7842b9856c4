"""FocalNet built alone (no vocabulary): focal modulation in place of attention.

transformers 5.24.0's layout, sized by `embed_dim`, `depths`, `hidden_sizes`, `focal_levels`,
`focal_windows`, `mlp_ratio`, `patch_size` and `num_channels`: a biased patchifying
convolution and a LayerNorm; stage i at width d (`embed_dim`, then `hidden_sizes[i - 1]`) with
`depths[i]` blocks of a LayerNorm, the modulation (a biased linear to 2d + levels + 1, a
bias-free depthwise convolution per focal level of kernel 2 × level + `focal_windows[i]`, a
biased 1×1 context convolution, a biased output linear, and a LayerNorm inside it under
`use_post_layernorm_in_modulation`), a LayerNorm, a biased two-matrix MLP and, under
`use_layerscale`, two layer scales; between stages a biased 2×2 strided convolution to the next
width and a LayerNorm; a final LayerNorm.
"""

from __future__ import annotations

from collections.abc import Callable

from tracker.estimate.irregular import Result, dims_of
from tracker.estimate.reading import ConfigView, LayerSpec, Notes, Tally, int_list
from tracker.shared.errors import EstimateError


def read_focalnet(c: ConfigView, t: Tally, n: Notes) -> Result:
    """Count a FocalNet (see the module docstring)."""
    e = c.int("embed_dim", default=96)
    depths = int_list(c, "depths", (2, 2, 6, 2))
    sizes = int_list(c, "hidden_sizes", (192, 384, 768, 768))
    levels = int_list(c, "focal_levels", (2, 2, 2, 2))
    windows = int_list(c, "focal_windows", (3, 3, 3, 3))
    if not len(depths) == len(sizes) == len(levels) == len(windows):
        raise EstimateError("config depths, hidden_sizes, focal_levels and focal_windows differ")
    ratio = c.float("mlp_ratio", 4.0)
    if not 0 < ratio <= 64:
        raise EstimateError(f"config mlp_ratio must be in (0, 64], got {ratio}")
    patch = c.int("patch_size", default=4)
    if c.bool("use_conv_embed", False):
        n.unknown("use_conv_embed (FocalNet's overlapping convolutional embedding)")
    scale = c.bool("use_layerscale", False)
    inner_norm = c.bool("use_post_layernorm_in_modulation", False)
    # norm placement, modulator normalisation and the layer-scale value change no count
    c.mark("use_post_layernorm", "normalize_modulator", "layerscale_value", "image_size")
    c.mark("encoder_stride", "out_features", "out_indices", "stage_names")
    emb = c.int("num_channels", default=3) * patch * patch * e + e + 2 * e
    t.add("embeddings", emb)
    widths = [e, *sizes]
    specs: list[LayerSpec] = []
    d = e
    for i, depth in enumerate(depths):
        d = widths[i]
        inter = int(d * ratio)
        lv = levels[i]
        mod = d * (2 * d + lv + 1) + 2 * d + lv + 1 + 2 * (d * d + d)
        mod += sum(d * (2 * k + windows[i]) ** 2 for k in range(lv))
        mod += 2 * d if inner_norm else 0
        mlp = d * inter + inter + inter * d + d
        per = mod + mlp + 4 * d + (2 * d if scale else 0)
        t.add("attention", depth * mod)
        t.add("dense_mlp", depth * mlp)
        t.add("norms", depth * (per - mod - mlp))
        specs += [
            LayerSpec(
                "none",
                "gelu",
                per,
                per,
                0,
                kind="encoder",
                lora_dims=2 * (d + inter),
                ffn_width=inter,
                gated=False,
                layer_norm=True,
            )
        ] * depth
        if i < len(depths) - 1:
            nxt = widths[i + 1]
            t.add("embeddings", d * nxt * 4 + nxt + 2 * nxt)
    t.add("norms", 2 * d)
    return specs, dims_of(d, 0, 1, 1, d, 4 * d, True, emb, None)


READERS: dict[str, Callable[[ConfigView, Tally, Notes], Result]] = {"focalnet": read_focalnet}
"""The reader of the FocalNet model_type."""
