"""Mix Transformer encoders built alone (no vocabulary): SegFormer's, GLPN's, PVT v2's, and
PVT v1's.

transformers 5.24.0's layout, per stage i of `num_encoder_blocks` (lists `depths`,
`hidden_sizes`, `num_attention_heads`, `patch_sizes`, `sr_ratios`, `mlp_ratios`): an overlapping
patch embedding (a biased `patch_sizes[i]` convolution from the previous width, a LayerNorm);
`depths[i]` blocks of a LayerNorm, efficient self-attention (biased q/k/v/out and, where
`sr_ratios[i]` > 1, a biased strided convolution with a LayerNorm that shortens the keys), a
LayerNorm and a Mix-FFN (biased linear to `mlp_ratios[i]` × the width, a biased 3×3 depthwise
convolution, a biased linear back); a LayerNorm closing the stage. PVT v2 is the same
(q/k/v biased per `qkv_bias`). PVT v1 learns a position table per stage (the stage's patch
grid of `image_size` over the strides so far, plus the [CLS] token of the last stage), has no
depthwise convolution in its MLP and no stage norms but one final LayerNorm; its reduction
ratios are `sequence_reduction_ratios`.
"""

from __future__ import annotations

from collections.abc import Callable

from tracker.estimate.irregular import Result, dims_of
from tracker.estimate.reading import ConfigView, LayerSpec, Notes, Tally, int_list
from tracker.shared.errors import EstimateError


def _lin(i: int, o: int, bias: bool = True) -> int:
    return i * o + (o if bias else 0)


def read_mit(c: ConfigView, t: Tally, n: Notes) -> Result:
    """Count a Mix Transformer encoder (see the module docstring)."""
    v1 = c.str("model_type") == "pvt"
    lists = {
        "depths": int_list(c, "depths", (2, 2, 2, 2)),
        "hidden_sizes": int_list(c, "hidden_sizes", (32, 64, 160, 256)),
        "num_attention_heads": int_list(c, "num_attention_heads", (1, 2, 5, 8)),
        "patch_sizes": int_list(c, "patch_sizes", (7, 3, 3, 3)),
        "sr_ratios": int_list(c, "sequence_reduction_ratios" if v1 else "sr_ratios", (8, 4, 2, 1)),
        "strides": int_list(c, "strides", (4, 2, 2, 2)),
        "mlp_ratios": int_list(c, "mlp_ratios", (4, 4, 4, 4)),
    }
    stages = c.int("num_encoder_blocks", default=4)
    if any(len(v) != stages for v in lists.values()):
        lengths = ", ".join(f"{k} {len(v)}" for k, v in lists.items())
        raise EstimateError(f"config num_encoder_blocks is {stages} but the lists hold {lengths}")
    # the decode heads (decoder_hidden_size, max_depth) are not in the base class
    c.mark("decoder_hidden_size", "reshape_last_stage", "head_in_index", "max_depth")
    c.mark("out_features", "out_indices", "stage_names", "image_size", "num_labels")
    if c.bool("linear_attention", False):
        n.unknown("linear_attention (PVT v2's pooled linear attention is not modelled)")
    biased = c.bool("qkv_bias", True)
    channels = c.int("num_channels", default=3)
    side = c.int("image_size", default=224) if not isinstance(c.raw("image_size"), list) else 0
    if v1 and not side:
        raise EstimateError("config image_size must be one number for PVT")
    specs: list[LayerSpec] = []
    prev = channels
    emb = 0
    for i in range(stages):
        h = lists["hidden_sizes"][i]
        k = lists["patch_sizes"][i]
        sr = lists["sr_ratios"][i]
        inter = lists["mlp_ratios"][i] * h
        emb += prev * k * k * h + h + 2 * h
        if v1:
            side //= lists["strides"][i]
            emb += (side * side + (1 if i == stages - 1 else 0)) * h
            emb += h if i == stages - 1 else 0  # the [CLS] token
        attn = 3 * _lin(h, h, biased) + _lin(h, h) + (h * h * sr * sr + h + 2 * h if sr > 1 else 0)
        mlp = _lin(h, inter) + _lin(inter, h) + (0 if v1 else 9 * inter + inter)
        per = attn + mlp + 4 * h
        depth = lists["depths"][i]
        t.add("attention", depth * attn)
        t.add("dense_mlp", depth * mlp)
        t.add("norms", depth * 4 * h + (0 if v1 else 2 * h))
        specs += [
            LayerSpec(
                "mha",
                "gelu",
                per,
                per,
                0,
                kind="encoder",
                lora_dims=8 * h + 2 * (h + inter),
                ffn_width=inter,
                q_width=h,
                k_width=h,
                v_width=h,
                heads=lists["num_attention_heads"][i],
                gated=False,
                layer_norm=True,
            )
        ] * depth
        prev = h
    t.add("embeddings", emb)
    if v1:
        t.add("norms", 2 * prev)
    heads = lists["num_attention_heads"][-1]
    return specs, dims_of(prev, 0, heads, heads, prev // heads, 4 * prev, True, emb, None)


READERS: dict[str, Callable[[ConfigView, Tally, Notes], Result]] = dict.fromkeys(
    ("segformer", "glpn", "pvt", "pvt_v2"), read_mit
)
"""The reader of each Mix Transformer model_type."""
