"""Segment Anything's image encoder built alone (no vocabulary): SAM's and SAM-HQ's.

transformers 5.24.0's layout, sized by `hidden_size`, `num_hidden_layers`, `mlp_dim`,
`patch_size`, `image_size`, `window_size`, `global_attn_indexes` and `output_channels`: a
biased patch convolution and a learned position grid (under `use_abs_pos`); ViT blocks (a fused
biased qkv per `qkv_bias`, a biased projection, two LayerNorms, a biased two-matrix MLP) whose
attention carries decomposed relative positions (under `use_rel_pos`: two tables of
2 × span − 1 rows by the head width, the span the window, or the whole grid in the global
layers); a neck of a 1×1 and a 3×3 bias-free convolution to `output_channels`, each with a
LayerNorm.
"""

from __future__ import annotations

from collections.abc import Callable

from tracker.errors import EstimateError
from tracker.estimate.irregular import Result, dims_of
from tracker.estimate.reading import MAX_LAYERS, ConfigView, LayerSpec, Notes, Tally


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
        specs.append(
            LayerSpec(
                "mha",
                "gelu",
                per,
                per,
                0,
                kind="encoder",
                lora_dims=6 * h + 2 * (h + inter),
                ffn_width=inter,
                q_width=h,
                k_width=h,
                v_width=h,
                heads=heads,
                gated=False,
                layer_norm=True,
            )
        )
    t.add("embeddings", emb)
    t.add("vision_tower", h * out + 2 * out + out * out * 9 + 2 * out)
    return specs, dims_of(h, 0, heads, heads, hd, inter, True, emb, None)


READERS: dict[str, Callable[[ConfigView, Tally, Notes], Result]] = dict.fromkeys(
    ("sam_vision_model", "sam_hq_vision_model"), read_sam_vision
)
"""The reader of each SAM image-encoder model_type."""
