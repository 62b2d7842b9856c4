"""V-JEPA 2 built alone (no vocabulary): a video ViT encoder and its predictor.

transformers 5.24.0's VJEPA2Model, sized by `hidden_size`, `num_hidden_layers`, `mlp_ratio`,
`patch_size`, `tubelet_size`, `in_chans` and the predictor's `pred_*` keys: a biased 3-D patch
convolution over `tubelet_size` frames (rotary positions: no table); pre-norm blocks (biased
q/k/v per `qkv_bias`, a biased projection, two LayerNorms, a biased MLP of `mlp_ratio` × the
width); a LayerNorm; then the predictor: `pred_num_mask_tokens` mask tokens, a biased linear
into `pred_hidden_size`, its own blocks (`pred_num_hidden_layers`, `pred_mlp_ratio`), a
LayerNorm and a biased linear back to the encoder's width.
"""

from __future__ import annotations

from collections.abc import Callable

from tracker.estimate.irregular import Result, dims_of
from tracker.estimate.reading import MAX_LAYERS, ConfigView, LayerSpec, Notes, Tally, encoder_layer
from tracker.shared.errors import EstimateError


def _lin(i: int, o: int, bias: bool = True) -> int:
    return i * o + (o if bias else 0)


def _blocks(
    c: ConfigView, t: Tally, h: int, layers: int, ratio_key: str, heads: int
) -> list[LayerSpec]:
    ratio = c.float(ratio_key, 4.0)
    if not 0 < ratio <= 64:
        raise EstimateError(f"config {ratio_key} must be in (0, 64], got {ratio}")
    inter = int(h * ratio)
    attn = 3 * _lin(h, h, c.bool("qkv_bias", True)) + _lin(h, h)
    mlp = _lin(h, inter) + _lin(inter, h)
    per = attn + mlp + 4 * h
    t.add("attention", layers * attn)
    t.add("dense_mlp", layers * mlp)
    t.add("norms", layers * 4 * h + 2 * h)
    spec = encoder_layer(per, h, heads, inter, lora_dims=8 * h + 2 * (h + inter))
    return [spec] * layers


def read_vjepa2(c: ConfigView, t: Tally, n: Notes) -> Result:
    """Count V-JEPA 2's encoder and predictor (see the module docstring)."""
    h = c.int("hidden_size")
    layers = c.int("num_hidden_layers", maximum=MAX_LAYERS)
    heads = c.int("num_attention_heads")
    p = c.int("patch_size", default=16)
    frames = c.int("tubelet_size", default=2)
    ph = c.int("pred_hidden_size")
    pl = c.int("pred_num_hidden_layers", maximum=MAX_LAYERS)
    pheads = c.int("pred_num_attention_heads")
    # clip sizes, the pooler's depth (a classification head's) and initialisation are not counted
    c.mark("crop_size", "frames_per_clip", "num_pooler_layers", "pred_zero_init_mask_tokens")
    c.mark("image_size", "use_sdpa")
    emb = _lin(c.int("in_chans", default=3) * frames * p * p, h)
    t.add("embeddings", emb)
    specs = _blocks(c, t, h, layers, "mlp_ratio", heads)
    pred = c.int("pred_num_mask_tokens", default=10) * ph + _lin(h, ph) + _lin(ph, h)
    t.add("embeddings", pred)
    specs += _blocks(c, t, ph, pl, "pred_mlp_ratio", pheads)
    return specs, dims_of(h, 0, heads, heads, h // heads, 4 * h, True, emb, None)


READERS: dict[str, Callable[[ConfigView, Tally, Notes], Result]] = {"vjepa2": read_vjepa2}
"""The reader of the V-JEPA 2 model_type."""
