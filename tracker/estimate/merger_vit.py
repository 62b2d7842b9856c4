"""Video-capable ViTs with a patch merger, built alone: Qwen2.5-VL's and GLM-4V's vision models.

Both patchify with a 3-D convolution over `temporal_patch_size` frames, run `depth` pre-norm
blocks (RMSNorms, a fused qkv, an output projection, a gated MLP) and merge
`spatial_merge_size`² neighbouring patches into one token of `out_hidden_size`
(transformers 5.24.0):

- Qwen2.5-VL: a bias-free patch convolution; biased qkv, projection and MLP of
  `intermediate_size`; the merger an RMSNorm and two biased linears (merged width, then
  `out_hidden_size`).
- GLM-4V: a biased patch convolution and a learned position table over the
  (`image_size` / `patch_size`)² grid; qkv biased per `attention_bias`, a bias-free projection and a
  bias-free MLP of `out_hidden_size`; an RMSNorm, a strided convolution to `out_hidden_size`
  (biased), and the merger: a bias-free linear, a LayerNorm and a bias-free gated MLP of
  `intermediate_size`; the final RMSNorm.
"""

from __future__ import annotations

from collections.abc import Callable

from tracker.estimate.irregular import Result, dims_of
from tracker.estimate.reading import MAX_LAYERS, ConfigView, LayerSpec, Notes, Tally


def _lin(i: int, o: int, bias: bool = True) -> int:
    return i * o + (o if bias else 0)


def read_merger_vit(c: ConfigView, t: Tally, n: Notes) -> Result:
    """Count a Qwen2.5-VL or GLM-4V vision model (see the module docstring)."""
    glm = c.str("model_type") != "qwen2_5_vl_vision"
    h = c.int("hidden_size")
    inter = c.int("intermediate_size")
    out = c.int("out_hidden_size")
    depth = c.int("depth", maximum=MAX_LAYERS)
    heads = c.int("num_heads")
    p = c.int("patch_size", default=14)
    tp = c.int("temporal_patch_size", default=2)
    ch = c.int("in_channels", default=3)
    m = c.int("spatial_merge_size", default=2)
    # which blocks attend globally, and the window size, shape the forward pass only
    c.mark("fullatt_block_indexes", "window_size", "tokens_per_second")
    emb = ch * tp * p * p * h
    if glm:
        emb += h + (c.int("image_size", default=336) // p) ** 2 * h
        biased = c.bool("attention_bias", False)
        mlp = 3 * h * out
        attn = _lin(h, 3 * h, biased) + h * h
    else:
        mlp = 3 * h * inter + 2 * inter + h
        attn = _lin(h, 3 * h) + _lin(h, h)
    per = attn + mlp + 2 * h
    merged = h * m * m
    if glm:
        tail = h + _lin(merged, out) + out * out + 2 * out + 3 * out * inter + h
    else:
        tail = h + _lin(merged, merged) + _lin(merged, out)
    t.add("embeddings", emb)
    t.add("attention", depth * attn)
    t.add("dense_mlp", depth * mlp)
    t.add("norms", depth * 2 * h)
    t.add("vision_tower", tail)
    spec = LayerSpec(
        "mha",
        "swiglu",
        per,
        per,
        0,
        kind="encoder",
        lora_dims=6 * h + 3 * (h + (out if glm else inter)),
        ffn_width=out if glm else inter,
        q_width=h,
        k_width=h,
        v_width=h,
        heads=heads,
    )
    return [spec] * depth, dims_of(h, 0, heads, heads, h // heads, inter, True, emb, None)


READERS: dict[str, Callable[[ConfigView, Tally, Notes], Result]] = dict.fromkeys(
    ("qwen2_5_vl_vision", "glm4v_vision", "glm4v_moe_vision"), read_merger_vit
)
"""The reader of each merger-ViT model_type."""
