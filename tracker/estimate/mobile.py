"""Compact vision backbones built alone (no vocabulary): EfficientNet, LeViT, CvT and MobileViT.

The layouts are transformers 5.24.0's, sized by the config's per-stage lists:

- EfficientNet: a bias-free 3×3 stem to round_filters(32) channels with a BatchNorm; per stage
  i, ceil(`depth_coefficient` × `num_block_repeats[i]`) MBConv blocks from
  round_filters(`in_channels[i]`) (the stage's later blocks from its output width) to
  round_filters(`out_channels[i]`): a bias-free 1×1 expansion by `expand_ratios[i]` with a
  BatchNorm (absent at ratio 1), a bias-free `kernel_sizes[i]` depthwise convolution with a
  BatchNorm, squeeze-and-excitation through max(1, int(input × `squeeze_expansion_ratio`))
  channels (two biased 1×1 convolutions), a bias-free 1×1 projection with a BatchNorm; then a
  bias-free 1×1 convolution to round_filters(1280) and a BatchNorm of `hidden_dim` channels.
  round_filters scales by `width_coefficient` and rounds to `depth_divisor`, never more than
  10% down.
- LeViT: four bias-free 3×3 convolutions with BatchNorms (to 1/8, 1/4, 1/2 and all of
  `hidden_sizes[0]`); per stage `depths[i]` attention blocks (a bias-free qkv linear of
  heads × key_dim × (2 + `attention_ratio`) with a BatchNorm, a projection back with a
  BatchNorm, a learned bias per head and per distinct offset of the stage's resolution
  grid) each followed, when `mlp_ratio[i]` > 0, by a two-linear MLP with BatchNorms; between
  stages a subsampling attention (`down_ops`: key_dim, heads, ratio, MLP ratio, stride) and
  its MLP. The resolution starts at `image_size` // `patch_size`.
- CvT: per stage a biased patch convolution (`patch_sizes`, from the previous stage's width)
  and a LayerNorm, a class token of the last stage's width where `cls_token[i]`, and
  `depth[i]` blocks of attention (q, k, v each after a depthwise `kernel_qkv` convolution with
  a BatchNorm under "dw_bn", the query's own under any method but "avg"; q/k/v linears biased
  by `qkv_bias[i]`, a biased output linear), two LayerNorms and a two-linear MLP of
  `mlp_ratio[i]` × the width.
- MobileViT: see `read_mobilevit`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

from tracker.estimate.convnets import _block, _conv_bn, _result
from tracker.estimate.irregular import Result, dims_of
from tracker.estimate.reading import (
    MAX_DIM,
    MAX_LAYERS,
    ConfigView,
    LayerSpec,
    Notes,
    Tally,
    encoder_layer,
    int_list,
)
from tracker.shared.errors import EstimateError

MAX_RESOLUTION = 100_000
"""Largest grid side (image_size // patch_size) a LeViT reading accepts."""


def _floats(c: ConfigView, key: str, default: tuple[float, ...]) -> list[float]:
    """`key` as a non-empty list of finite numbers in [0, 64]."""
    value = c.raw(key)
    if value is None:
        return list(default)
    if not isinstance(value, list) or not 0 < len(value) <= MAX_LAYERS:
        raise EstimateError(f"config {key} must be a non-empty list of numbers")
    out = []
    for x in value:
        if isinstance(x, bool) or not isinstance(x, int | float) or not 0 <= x <= 64:
            raise EstimateError(f"config {key} must hold numbers in [0, 64], got {x!r}")
        out.append(float(x))
    return out


def _values(c: ConfigView, key: str, kind: type, default: tuple[Any, ...]) -> list[Any]:
    """`key` as a non-empty list of `kind` (bool or str)."""
    value = c.raw(key)
    if value is None:
        return list(default)
    if not isinstance(value, list) or not value or not all(type(x) is kind for x in value):
        raise EstimateError(f"config {key} must be a non-empty list of {kind.__name__}")
    return value


def _same_length(lists: dict[str, list[Any]], n: int) -> None:
    for key, value in lists.items():
        if len(value) < n:
            raise EstimateError(f"config {key} has {len(value)} entries for {n} stages")


def read_efficientnet(c: ConfigView, t: Tally, n: Notes) -> Result:
    """Count an EfficientNet (see the module docstring)."""
    width_k = c.float("width_coefficient", 2.0)
    depth_k = c.float("depth_coefficient", 3.1)
    if not (0 < width_k <= 64 and 0 < depth_k <= 64):
        raise EstimateError("config width_coefficient and depth_coefficient must be in (0, 64]")
    ratio = c.float("squeeze_expansion_ratio", 0.25)
    if not 0 <= ratio <= 64:
        raise EstimateError(f"config squeeze_expansion_ratio must be in [0, 64], got {ratio}")
    div = c.int("depth_divisor", default=8)
    ins = int_list(c, "in_channels", (32, 16, 24, 40, 80, 112, 192))
    outs = int_list(c, "out_channels", (16, 24, 40, 80, 112, 192, 320))
    kernels = int_list(c, "kernel_sizes", (3, 3, 5, 3, 5, 5, 3))
    expands = int_list(c, "expand_ratios", (1, 6, 6, 6, 6, 6, 6))
    repeats = int_list(c, "num_block_repeats", (1, 2, 2, 3, 3, 4, 1))
    _same_length(
        {"out_channels": outs, "kernel_sizes": kernels, "expand_ratios": expands},
        len(ins),
    )
    _same_length({"num_block_repeats": repeats, "strides": int_list(c, "strides", (1,))}, 1)
    if len(repeats) < len(ins):
        raise EstimateError(f"config num_block_repeats has {len(repeats)} entries for {len(ins)}")
    hidden_dim = c.int("hidden_dim", default=2560)
    # padding, strides, dropout and pooling shape the forward pass only
    c.mark("image_size", "depthwise_padding", "strides", "num_hidden_layers", "pooling_type")

    def filters(x: float) -> int:
        x *= width_k
        new = max(div, int(x + div / 2) // div * div)
        out = new + div if new < 0.9 * x else new
        if out > MAX_DIM:
            raise EstimateError(f"config width_coefficient gives {out} channels")
        return out

    stem = filters(32)
    emb = _conv_bn(c.int("num_channels", default=3), stem, 3)
    t.add("embeddings", emb)
    specs: list[LayerSpec] = []
    out = stem
    for i, inp in enumerate(ins):
        out = filters(outs[i])
        blocks = math.ceil(depth_k * repeats[i])
        if len(specs) + blocks > MAX_LAYERS:
            raise EstimateError(f"config depth_coefficient gives more than {MAX_LAYERS} blocks")
        for j in range(blocks):
            d = filters(inp) if j == 0 else out
            e = d * expands[i]
            se = max(1, int(d * ratio))
            per = _conv_bn(d, e, 1) if expands[i] != 1 else 0
            per += e * kernels[i] ** 2 + 2 * e + e * se + se + se * e + e + _conv_bn(e, out, 1)
            t.add("dense_mlp", per)
            specs.append(_block(per, out, e))
    top = filters(1280)
    t.add("dense_mlp", out * top + 2 * hidden_dim)
    return _result(specs, top, emb)


def _offsets(res_in: int, res_out: int, stride: int) -> int:
    """How many distinct |a × stride − b| there are for a < res_out, b < res_in (one axis of
    LeViT's attention-bias offsets), by merging the intervals each a spans."""
    spans = []
    for a in range(res_out):
        lo, hi = a * stride - (res_in - 1), a * stride
        spans.append((lo, hi) if lo >= 0 else (0, max(-lo, hi)))
    spans.sort()
    total, end = 0, -1
    for lo, hi in spans:
        if hi > end:
            total += hi - max(lo, end + 1) + 1
            end = hi
    return total


def _mlp_bn(i: int, o: int) -> int:
    """LeViT's bias-free linear and its BatchNorm1d."""
    return i * o + 2 * o


def read_levit(c: ConfigView, t: Tally, n: Notes) -> Result:
    """Count a LeViT (see the module docstring)."""
    sizes = int_list(c, "hidden_sizes", (128, 256, 384))
    depths = int_list(c, "depths", (4, 4, 4))
    keys = int_list(c, "key_dim", (16, 16, 16))
    heads = int_list(c, "num_attention_heads", (4, 8, 12))
    ratios = int_list(c, "attention_ratio", (2, 2, 2))
    mlps = _floats(c, "mlp_ratio", (2, 2, 2))
    _same_length(
        {
            "depths": depths,
            "key_dim": keys,
            "num_attention_heads": heads,
            "attention_ratio": ratios,
        },
        len(sizes),
    )
    _same_length({"mlp_ratio": mlps}, len(sizes))
    downs = c.list("down_ops")
    if downs is None:
        downs = [
            ["Subsample", 16, sizes[0] // 16, 4, 2, 2],
            ["Subsample", 16, sizes[1] // 16, 4, 2, 2],
        ]
    side = c.int("image_size", default=224) // c.int("patch_size", default=16)
    if not 0 < side <= MAX_RESOLUTION:
        raise EstimateError("config image_size // patch_size must be a grid side in (0, 100000]")
    k = c.int("kernel_size", default=3)
    c.mark("stride", "padding", "drop_path_rate")
    first = sizes[0]
    widths = (c.int("num_channels", default=3), first // 8, first // 4, first // 2, first)
    emb = sum(_conv_bn(i, o, k) for i, o in itertools.pairwise(widths))
    t.add("embeddings", emb)
    specs: list[LayerSpec] = []
    for i, w in enumerate(sizes):
        hk, r = heads[i] * keys[i], ratios[i]
        attn = _mlp_bn(w, hk * (2 + r)) + _mlp_bn(r * hk, w) + heads[i] * side * side
        t.add("attention", depths[i] * attn)
        spec = encoder_layer(attn, w, heads[i], 0, lora_dims=w + hk * (2 + r) + r * hk + w)
        specs += [spec] * depths[i]
        if mlps[i] > 0:
            inter = int(w * mlps[i])
            mlp = _mlp_bn(w, inter) + _mlp_bn(inter, w)
            t.add("dense_mlp", depths[i] * mlp)
        if i < len(downs) and i + 1 < len(sizes):
            op = downs[i]
            if (
                not isinstance(op, list)
                or len(op) != 6
                or op[0] != "Subsample"
                or not all(
                    isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= MAX_DIM
                    for x in op[1:]
                )
                or op[5] < 1
            ):
                raise EstimateError(f"config down_ops[{i}] must be ['Subsample', 5 sizes]")
            key, h, ratio, mlp_ratio, stride = op[1:]
            out_side = (side - 1) // stride + 1
            nxt = sizes[i + 1]
            down = _mlp_bn(w, h * key * (ratio + 1)) + _mlp_bn(w, h * key)
            down += _mlp_bn(ratio * key * h, nxt) + h * _offsets(side, out_side, stride) ** 2
            t.add("attention", down)
            if mlp_ratio > 0:
                t.add("dense_mlp", _mlp_bn(nxt, nxt * mlp_ratio) + _mlp_bn(nxt * mlp_ratio, nxt))
            side = out_side
    last = sizes[-1]
    return specs, dims_of(last, 0, heads[-1], heads[-1], keys[-1], 2 * last, True, emb, None)


def read_cvt(c: ConfigView, t: Tally, n: Notes) -> Result:
    """Count a CvT (see the module docstring)."""
    depths = int_list(c, "depth", (1, 2, 10))
    widths = int_list(c, "embed_dim", (64, 192, 384))
    heads = int_list(c, "num_heads", (1, 3, 6))
    patches = int_list(c, "patch_sizes", (7, 3, 3))
    kernels = int_list(c, "kernel_qkv", (3, 3, 3))
    mlps = _floats(c, "mlp_ratio", (4.0, 4.0, 4.0))
    bias = _values(c, "qkv_bias", bool, (True, True, True))
    cls = _values(c, "cls_token", bool, (False, False, True))
    methods = _values(c, "qkv_projection_method", str, ("dw_bn", "dw_bn", "dw_bn"))
    _same_length(
        {"embed_dim": widths, "num_heads": heads, "patch_sizes": patches, "kernel_qkv": kernels},
        len(depths),
    )
    _same_length(
        {"mlp_ratio": mlps, "qkv_bias": bias, "cls_token": cls, "qkv_projection_method": methods},
        len(depths),
    )
    for m in methods[: len(depths)]:
        if m not in ("dw_bn", "avg", "linear"):
            raise EstimateError(f"config qkv_projection_method {m!r} is not read")
    # strides, paddings and dropout rates shape the forward pass only
    c.mark("patch_stride", "patch_padding", "stride_kv", "stride_q", "padding_kv", "padding_q")
    c.mark("drop_rate", "drop_path_rate", "attention_drop_rate")
    prev = c.int("num_channels", default=3)
    emb = 0
    specs: list[LayerSpec] = []
    for i, (depth, w) in enumerate(zip(depths, widths, strict=False)):
        emb += prev * patches[i] ** 2 * w + w + 2 * w
        if cls[i]:
            emb += widths[-1]
        conv = w * kernels[i] ** 2 + 2 * w if methods[i] == "dw_bn" else 0
        convs = conv * (2 + (methods[i] != "avg"))
        attn = convs + 3 * (w * w + (w if bias[i] else 0)) + w * w + w
        inter = int(w * mlps[i])
        mlp = w * inter + inter + inter * w + w
        t.add("attention", depth * attn)
        t.add("dense_mlp", depth * mlp)
        t.add("norms", depth * 4 * w)
        spec = encoder_layer(
            attn + mlp + 4 * w, w, heads[i], inter, lora_dims=8 * w + 2 * (w + inter)
        )
        specs += [spec] * depth
        prev = w
    t.add("embeddings", emb)
    last = widths[len(depths) - 1]
    return specs, dims_of(
        last, 0, heads[-1], heads[-1], last // heads[-1], 4 * last, True, emb, None
    )


def _conv(i: int, o: int, k: int, groups: int = 1, norm: bool = True) -> int:
    """A bias-free k×k convolution (grouped) and, with `norm`, its BatchNorm's weight and bias."""
    return i // groups * o * k * k + (2 * o if norm else 0)


def _inverted(i: int, o: int, expand: float) -> int:
    """MobileViT's inverted residual: a 1×1 expansion (to a multiple of 8), a 3×3 depthwise and
    a 1×1 reduction, each bias-free with a BatchNorm."""
    x = i * expand
    e = max(8, int(round(x) + 4) // 8 * 8)
    e = e + 8 if e < 0.9 * round(x) else e
    return _conv(i, e, 1) + _conv(e, e, 3, e) + _conv(e, o, 1)


MOBILEVIT_STAGES = (2, 4, 3)
"""Transformer layers of MobileViT's three MobileViT blocks (fixed in transformers)."""


def read_mobilevit(c: ConfigView, t: Tally, n: Notes) -> Result:
    """Count a MobileViT: a 3×3 stem; two MobileNet stages of 1 and 3 inverted residuals
    (`expand_ratio`); three MobileViT blocks, each a strided inverted residual, a
    `conv_kernel_size` convolution, a bias-free 1×1 to `hidden_sizes[i]`, 2, 4 and 3 ViT layers
    (q/k/v biased per `qkv_bias`, an MLP of `mlp_ratio` × the width), a LayerNorm, a 1×1 back
    and a fusing convolution of both; a final 1×1 to `neck_hidden_sizes[6]` (convolutions
    bias-free, each with a BatchNorm but the 1×1 into the transformer)."""
    neck = int_list(c, "neck_hidden_sizes", (16, 32, 64, 96, 128, 160, 640))
    widths = int_list(c, "hidden_sizes", (144, 192, 240))
    if len(neck) != 7 or len(widths) != 3:
        raise EstimateError("config neck_hidden_sizes must hold 7 sizes and hidden_sizes 3")
    expand = c.float("expand_ratio", 4.0)
    ratio = c.float("mlp_ratio", 2.0)
    if not (0 < expand <= 64 and 0 < ratio <= 64):
        raise EstimateError("config expand_ratio and mlp_ratio must be in (0, 64]")
    k = c.int("conv_kernel_size", default=3)
    heads = c.int("num_attention_heads", default=4)
    biased = c.bool("qkv_bias", True)
    # the image size, patch unfolding, strides and the segmentation head's ASPP: no parameters
    c.mark("image_size", "patch_size", "output_stride", "aspp_out_channels", "atrous_rates")
    c.mark("aspp_dropout_prob", "semantic_loss_ignore_index")
    emb = _conv(c.int("num_channels", default=3), neck[0], 3)
    t.add("embeddings", emb)
    convs = _inverted(neck[0], neck[1], expand) + _inverted(neck[1], neck[2], expand)
    convs += 2 * _inverted(neck[2], neck[2], expand)
    specs: list[LayerSpec] = []
    for i, (h, depth) in enumerate(zip(widths, MOBILEVIT_STAGES, strict=True)):
        ch = neck[i + 3]
        convs += _inverted(neck[i + 2], ch, expand) + _conv(ch, ch, k) + ch * h
        convs += 2 * h + _conv(h, ch, 1) + _conv(2 * ch, ch, k)
        inter = int(h * ratio)
        attn = 3 * (h * h + (h if biased else 0)) + h * h + h
        mlp = h * inter + inter + inter * h + h
        t.add("attention", depth * attn)
        t.add("dense_mlp", depth * mlp)
        t.add("norms", depth * 4 * h)
        specs += [
            encoder_layer(attn + mlp + 4 * h, h, heads, inter, lora_dims=8 * h + 2 * (h + inter))
        ] * depth
    convs += _conv(neck[5], neck[6], 1)
    t.add("dense_mlp", convs)
    last = widths[-1]
    return specs, dims_of(last, 0, heads, heads, last // heads, int(last * ratio), True, emb, None)


def _divisible(x: float, div: int = 8, floor: int = 0) -> int:
    """transformers' make_divisible: `x` rounded to a multiple of `div` (at least `floor`, else
    `div`), never more than 10% down."""
    new = max(floor or div, int(x + div / 2) // div * div)
    return new + div if new < 0.9 * x else new


def read_mobilevitv2(c: ConfigView, t: Tally, n: Notes) -> Result:
    """Count a MobileViT V2: widths 32 (clipped to [16, 64]), 64, 128, 256, 384 and 512 times
    `width_multiplier` (rounded as transformers does); a 3×3 stem, MobileNet stages of 1 and 2
    inverted residuals (`expand_ratio`), three MobileViT V2 blocks: a strided inverted residual,
    a depthwise `conv_kernel_size` convolution, a bias-free 1×1 to the attention width
    (`base_attn_unit_dims[i]` × `width_multiplier`), `n_attn_blocks[i]` layers of separable
    linear attention (GroupNorms, a biased 1×1 to 1 + 2 × width, a biased 1×1 out, a biased
    two-conv FFN of `ffn_multiplier` × width floored to 16), a GroupNorm and a 1×1 back."""
    w = c.float("width_multiplier", 1.0)
    expand = c.float("expand_ratio", 2.0)
    mult = c.float("ffn_multiplier", 2.0)
    if not (0 < w <= 64 and 0 < expand <= 64 and 0 < mult <= 64):
        raise EstimateError(
            "config width_multiplier, expand_ratio and ffn_multiplier must be in (0, 64]"
        )
    units = int_list(c, "base_attn_unit_dims", (128, 192, 256))
    blocks = int_list(c, "n_attn_blocks", (2, 4, 3))
    if len(units) != 3 or len(blocks) != 3:
        raise EstimateError("config base_attn_unit_dims and n_attn_blocks must hold 3 sizes")
    if sum(blocks) > MAX_LAYERS:
        raise EstimateError(f"config n_attn_blocks holds more than {MAX_LAYERS} layers")
    k = c.int("conv_kernel_size", default=3)
    c.mark("image_size", "patch_size", "output_stride", "aspp_out_channels", "atrous_rates")
    c.mark("aspp_dropout_prob", "semantic_loss_ignore_index", "attn_dropout", "ffn_dropout")
    widths = [_divisible(min(64.0, max(16.0, 32 * w)), 8, 16), _divisible(64 * w, 16)]
    widths += [_divisible(x * w) for x in (128, 256, 384, 512)]
    emb = _conv(c.int("num_channels", default=3), widths[0], 3)
    t.add("embeddings", emb)
    convs = _inverted(widths[0], widths[1], expand) + _inverted(widths[1], widths[2], expand)
    convs += _inverted(widths[2], widths[2], expand)
    specs: list[LayerSpec] = []
    d = widths[-1]
    for i in range(3):
        ch, d = widths[i + 3], _divisible(units[i] * w)
        convs += _inverted(widths[i + 2], ch, expand) + _conv(ch, ch, k, ch) + ch * d
        convs += 2 * d + _conv(d, ch, 1)
        ffn = int(mult * d) // 16 * 16
        attn = d * (1 + 2 * d) + 1 + 2 * d + d * d + d
        mlp = d * ffn + ffn + ffn * d + d
        t.add("attention", blocks[i] * attn)
        t.add("dense_mlp", blocks[i] * mlp)
        t.add("norms", blocks[i] * 4 * d)
        spec = encoder_layer(attn + mlp + 4 * d, d, 1, ffn, lora_dims=0)
        specs += [spec] * blocks[i]
    t.add("dense_mlp", convs)
    return specs, dims_of(d, 0, 1, 1, d, 2 * d, True, emb, None)


READERS: dict[str, Callable[[ConfigView, Tally, Notes], Result]] = {
    "mobilevit": read_mobilevit,
    "mobilevitv2": read_mobilevitv2,
    "efficientnet": read_efficientnet,
    "levit": read_levit,
    "cvt": read_cvt,
}
"""The reader of each compact vision backbone model_type."""
