"""Convolutional vision backbones built alone (no vocabulary): ConvNeXt, ResNet, BiT,
PoolFormer, MobileNet V1 and V2, and RegNet.

Sizes come from the config's stage lists (`depths`, `hidden_sizes`) and widths
(`embedding_size`, `num_channels`, `patch_size`); the layouts are transformers 5.24.0's:

- ConvNeXt (V1, V2, DINOv3's): a patchifying convolution and a LayerNorm; per stage after the
  first a LayerNorm and a 2×2 strided convolution; blocks of a 7×7 depthwise convolution, a
  LayerNorm, two pointwise linears (×4 expansion) and either a layer scale (V1, when
  `layer_scale_init_value` > 0) or global response normalisation (V2); a final LayerNorm.
- ResNet: a 7×7 stem convolution with BatchNorm; stages of bottleneck (1×1, 3×3, 1×1 at a
  quarter of the width) or basic (two 3×3) layers, bias-free convolutions each with a BatchNorm
  (weight and bias; running statistics are buffers), a 1×1 shortcut where width or stride
  changes.
- BiT (ResNet V2, `layer_type` "preactivation"): the stem convolution alone; bottleneck layers
  with a GroupNorm (weight and bias) before each of their three convolutions, a bias-free 1×1
  shortcut convolution where width or stride changes; a final GroupNorm.
- PoolFormer: per stage a biased `patch_sizes[i]` convolution from the previous width; blocks
  of two GroupNorms (weight and bias), parameter-free pooling, two biased 1×1 convolutions
  (`mlp_ratio` × the width) and, under `use_layer_scale`, two layer scales.
- MobileNet V1: a 3×3 stem to 32 × `depth_multiplier` channels, then thirteen depthwise
  separable blocks (a 3×3 depthwise and a 1×1 pointwise convolution, bias-free, each with a
  BatchNorm) to MobileNet's fixed channel plan (64 … 1024, scaled by `depth_multiplier`, at least
  `min_depth`).
- MobileNet V2: a 3×3 stem to 32 channels, a 3×3 depthwise and a 1×1 reduction to 16, then
  sixteen inverted residuals (a 1×1 expansion by `expand_ratio`, a 3×3 depthwise, a 1×1
  reduction; bias-free, each with a BatchNorm) to MobileNet V2's channel plan, and a 1×1
  convolution to 1280; widths scaled by `depth_multiplier` rounded to `depth_divisible_by`
  (at least `min_depth`), the last kept at 1280 under `finegrained_output`.
- RegNet (X and Y, `layer_type`): a 3×3 stem with a BatchNorm; stages of layers of a 1×1, a
  grouped 3×3 (groups of `groups_width` channels) and a 1×1 bias-free convolution, each with a
  BatchNorm, Y adding squeeze-and-excitation (two biased 1×1 convolutions through a quarter of
  the layer's input width); a 1×1 shortcut where width or stride changes.
"""

from __future__ import annotations

from collections.abc import Callable

from tracker.estimate.irregular import Result, dims_of
from tracker.estimate.reading import ConfigView, LayerSpec, Notes, Tally, int_list
from tracker.shared.errors import EstimateError


def _stages(
    c: ConfigView, depths: tuple[int, ...], sizes: tuple[int, ...]
) -> list[tuple[int, int]]:
    """(depth, width) per stage from `depths` and `hidden_sizes`, which must be as long."""
    d = int_list(c, "depths", depths)
    w = int_list(c, "hidden_sizes", sizes)
    if len(d) != len(w) or c.int("num_stages", default=len(d)) != len(d):
        raise EstimateError(
            f"config depths has {len(d)} stages, hidden_sizes {len(w)}, num_stages "
            f"{c.int('num_stages', default=len(d))}"
        )
    return list(zip(d, w, strict=True))


def _block(params: int, width: int, inter: int) -> LayerSpec:
    return LayerSpec(
        "none",
        "gelu",
        params,
        params,
        0,
        kind="encoder",
        lora_dims=2 * (width + inter),
        ffn_width=inter,
        gated=False,
        layer_norm=True,
    )


def _result(specs: list[LayerSpec], width: int, emb: int) -> Result:
    return specs, dims_of(width, 0, 1, 1, width, 4 * width, True, emb, None)


def read_convnext(c: ConfigView, t: Tally, n: Notes) -> Result:
    """Count a ConvNeXt (see the module docstring)."""
    v2 = c.str("model_type") == "convnextv2"
    stages = _stages(c, (3, 3, 9, 3), (96, 192, 384, 768))
    channels = c.int("num_channels", default=3)
    patch = c.int("patch_size", default=4)
    c.mark("image_size", "out_features", "out_indices", "stage_names", "drop_path_rate")
    scale = not v2 and c.float("layer_scale_init_value", 1e-6) > 0
    first = stages[0][1]
    emb = channels * patch * patch * first + first + 2 * first
    t.add("embeddings", emb)
    specs: list[LayerSpec] = []
    prev = first
    for i, (depth, w) in enumerate(stages):
        if i > 0:
            t.add("norms", 2 * prev)
            t.add("embeddings", prev * w * 4 + w)
        per = w * 49 + w + 2 * w + 2 * 4 * w * w + 4 * w + w
        per += 2 * 4 * w if v2 else (w if scale else 0)
        t.add("dense_mlp", depth * per)
        specs += [_block(per, w, 4 * w)] * depth
        prev = w
    t.add("norms", 2 * prev)
    return _result(specs, prev, emb)


def _conv_bn(i: int, o: int, k: int) -> int:
    """A bias-free k×k convolution and its BatchNorm's weight and bias."""
    return i * o * k * k + 2 * o


def read_resnet(c: ConfigView, t: Tally, n: Notes) -> Result:
    """Count a ResNet (see the module docstring)."""
    stages = _stages(c, (3, 4, 6, 3), (256, 512, 1024, 2048))
    channels = c.int("num_channels", default=3)
    e = c.int("embedding_size", default=64)
    bit = c.str("model_type") == "bit"
    kind = c.str("layer_type", "preactivation" if bit else "bottleneck")
    if kind not in (("preactivation",) if bit else ("bottleneck", "basic")):
        raise EstimateError(f"config layer_type {kind!r} is not read for {c.str('model_type')!r}")
    if bit:  # padding, dilation (output_stride) and norm groups shape the forward pass only
        c.mark("embedding_dynamic_padding", "global_padding", "output_stride", "num_groups")
        if c.int("width_factor", default=1) != 1:
            n.unknown("width_factor (a BiT widened beyond hidden_sizes is not modelled)")
    first_stride = 2 if c.bool("downsample_in_first_stage", False) else 1
    c.mark("out_features", "out_indices", "stage_names", "downsample_in_bottleneck")
    emb = channels * e * 49 if bit else _conv_bn(channels, e, 7)
    t.add("embeddings", emb)
    specs: list[LayerSpec] = []
    prev = e
    for i, (depth, w) in enumerate(stages):
        stride = first_stride if i == 0 else 2
        for j in range(depth):
            inp = prev if j == 0 else w
            r = w // 4
            if kind == "preactivation":  # each norm sits on its convolution's input
                per = 2 * inp + inp * r + 2 * r + r * r * 9 + 2 * r + r * w
            elif kind == "bottleneck":
                per = _conv_bn(inp, r, 1) + _conv_bn(r, r, 3) + _conv_bn(r, w, 1)
            else:
                per = _conv_bn(inp, w, 3) + _conv_bn(w, w, 3)
            if j == 0 and (inp != w or stride != 1):
                per += inp * w if bit else _conv_bn(inp, w, 1)
            t.add("dense_mlp", per)
            specs.append(_block(per, w, w))
        prev = w
    if bit:
        t.add("norms", 2 * prev)
    return _result(specs, prev, emb)


def read_poolformer(c: ConfigView, t: Tally, n: Notes) -> Result:
    """Count a PoolFormer (see the module docstring)."""
    stages = _stages(c, (2, 2, 6, 2), (64, 128, 320, 512))
    patches = int_list(c, "patch_sizes", (7, 3, 3, 3))
    if len(patches) != len(stages) or c.int("num_encoder_blocks", default=4) != len(stages):
        raise EstimateError("config patch_sizes and num_encoder_blocks must match depths")
    ratio = c.float("mlp_ratio", 4.0)
    if not 0 < ratio <= 64:
        raise EstimateError(f"config mlp_ratio must be in (0, 64], got {ratio}")
    scale = c.bool("use_layer_scale", True)
    # strides, padding and the pool size shape the forward pass only
    c.mark("strides", "padding", "pool_size", "patch_size", "stride", "layer_scale_init_value")
    specs: list[LayerSpec] = []
    prev = c.int("num_channels", default=3)
    emb = 0
    for (depth, w), k in zip(stages, patches, strict=True):
        emb += prev * k * k * w + w
        inter = int(w * ratio)
        per = 4 * w + w * inter + inter + inter * w + w + (2 * w if scale else 0)
        t.add("dense_mlp", depth * per)
        specs += [_block(per, w, inter)] * depth
        prev = w
    t.add("embeddings", emb)
    return _result(specs, prev, emb)


MOBILENET_V1 = (64, 128, 128, 256, 256, 512, 512, 512, 512, 512, 512, 1024, 1024)
"""MobileNet V1's pointwise widths (transformers' MobileNetV1Model, before depth_multiplier)."""


def read_mobilenet_v1(c: ConfigView, t: Tally, n: Notes) -> Result:
    """Count a MobileNet V1 (see the module docstring)."""
    mult = c.float("depth_multiplier", 1.0)
    if not 0 < mult <= 16:
        raise EstimateError(f"config depth_multiplier must be in (0, 16], got {mult}")
    floor = c.int("min_depth", default=8)
    c.mark("image_size", "tf_padding", "output_stride")

    def width(x: int) -> int:
        return max(int(x * mult), floor)

    prev = width(32)
    emb = _conv_bn(c.int("num_channels", default=3), prev, 3)
    t.add("embeddings", emb)
    specs: list[LayerSpec] = []
    for x in MOBILENET_V1:
        out = width(x)
        per = prev * 9 + 2 * prev + _conv_bn(prev, out, 1)
        t.add("dense_mlp", per)
        specs.append(_block(per, out, out))
        prev = out
    return _result(specs, prev, emb)


MOBILENET_V2 = (24, 24, 32, 32, 32, 64, 64, 64, 64, 96, 96, 96, 160, 160, 160, 320)
"""MobileNet V2's inverted-residual output widths (before depth_multiplier)."""


def read_mobilenet_v2(c: ConfigView, t: Tally, n: Notes) -> Result:
    """Count a MobileNet V2 (see the module docstring)."""
    mult = c.float("depth_multiplier", 1.0)
    expand = c.float("expand_ratio", 6.0)
    if not (0 < mult <= 16 and 0 < expand <= 64):
        raise EstimateError("config depth_multiplier and expand_ratio must be positive and sane")
    div = c.int("depth_divisible_by", default=8)
    floor = c.int("min_depth", default=8)
    if not c.bool("first_layer_is_expansion", True):
        n.unknown("first_layer_is_expansion (false: a stem without its expansion)")
    c.mark("image_size", "tf_padding", "output_stride", "semantic_loss_ignore_index")

    def width(x: float) -> int:
        new = max(floor, int(x + div / 2) // div * div)
        return new + div if new < 0.9 * x else new

    first = width(32 * mult)
    stem = width(16 * mult)
    emb = _conv_bn(c.int("num_channels", default=3), first, 3)
    emb += first * 9 + 2 * first + _conv_bn(first, stem, 1)
    t.add("embeddings", emb)
    specs: list[LayerSpec] = []
    prev = stem
    for x in MOBILENET_V2:
        out = width(x * mult)
        e = width(prev * expand)
        per = _conv_bn(prev, e, 1) + e * 9 + 2 * e + _conv_bn(e, out, 1)
        t.add("dense_mlp", per)
        specs.append(_block(per, out, e))
        prev = out
    last = 1280 if c.bool("finegrained_output", True) and mult < 1 else width(1280 * mult)
    t.add("dense_mlp", _conv_bn(prev, last, 1))
    return _result(specs, last, emb)


def read_regnet(c: ConfigView, t: Tally, n: Notes) -> Result:
    """Count a RegNet (see the module docstring)."""
    stages = _stages(c, (2, 6, 12, 2), (128, 192, 512, 1088))
    e = c.int("embedding_size", default=32)
    gw = c.int("groups_width", default=64)
    kind = c.str("layer_type", "y")
    if kind not in ("x", "y"):
        raise EstimateError(f"config layer_type {kind!r} is not a RegNet layer type")
    first_stride = 2 if c.bool("downsample_in_first_stage", True) else 1
    emb = _conv_bn(c.int("num_channels", default=3), e, 3)
    t.add("embeddings", emb)
    specs: list[LayerSpec] = []
    prev = e
    for i, (depth, w) in enumerate(stages):
        stride = first_stride if i == 0 else 2
        for j in range(depth):
            inp = prev if j == 0 else w
            groups = max(1, w // gw)
            per = _conv_bn(inp, w, 1) + (w // groups) * w * 9 + 2 * w + _conv_bn(w, w, 1)
            if kind == "y":  # squeeze-and-excitation through round(input / 4) channels
                r = round(inp / 4)
                per += w * r + r + r * w + w
            if j == 0 and (inp != w or stride != 1):
                per += _conv_bn(inp, w, 1)
            t.add("dense_mlp", per)
            specs.append(_block(per, w, w))
        prev = w
    return _result(specs, prev, emb)


READERS: dict[str, Callable[[ConfigView, Tally, Notes], Result]] = {
    "regnet": read_regnet,
    "mobilenet_v2": read_mobilenet_v2,
    "poolformer": read_poolformer,
    "mobilenet_v1": read_mobilenet_v1,
    "convnext": read_convnext,
    "convnextv2": read_convnext,
    "dinov3_convnext": read_convnext,
    "resnet": read_resnet,
    "bit": read_resnet,
}
"""The reader of each convolutional backbone model_type."""
