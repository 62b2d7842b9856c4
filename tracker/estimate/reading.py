"""Typed, bounded reading of a config.json mapping, and the per-layer model description it yields.

Every number the estimator uses goes through `ConfigView`, which rejects strings, booleans,
non-finite floats, zero or negative sizes and absurd magnitudes with an EstimateError naming the
key, so a hostile config gives a one-line reason instead of a crash or a hang.
"""

from __future__ import annotations

import builtins
import functools
import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tracker.shared.errors import EstimateError

MAX_LAYERS = 10_000
"""More layers than this is not a real model; loops over layers are bounded by it."""
MAX_DIM = 50_000_000
"""Largest accepted width (hidden, vocab, intermediate, context...)."""
MAX_EXPERTS = 100_000

COMPONENTS = (
    "embeddings",
    "attention",
    "dense_mlp",
    "routed_experts",
    "shared_experts",
    "router",
    "linear_attention",
    "ssm",
    "norms",
    "head",
    "vision_tower",
    "audio_tower",
)
"""Where parameters live, in report order."""


class ConfigView:
    """Read-only typed access to one (sub)config mapping; `path` names it in error messages.

    Every key the reader consults (present or not) is recorded in `used`, shared with the views
    of sub-mappings, so that after reading, the keys of the config that no reader looked at are
    known (`unread_keys`): the estimate names them rather than silently ignoring them.
    """

    def __init__(
        self, data: Mapping[str, Any], path: str = "", used: builtins.set[str] | None = None
    ) -> None:
        self.data = data
        self.path = path
        self.used: builtins.set[str] = used if used is not None else builtins.set()
        self._prefix = f"{path}." if path else ""

    def _name(self, key: str) -> str:
        return self._prefix + key

    # A reading consults a config a few hundred times: the methods below record `_name(key)`
    # spelled out (`_prefix + key`) rather than through calls.

    def mark(self, *keys: str) -> None:
        """Record `keys` as understood without reading them (their meaning is accounted for)."""
        prefix = self._prefix
        self.used.update([prefix + k for k in keys] if prefix else keys)

    def has(self, key: str) -> bool:
        self.used.add(self._prefix + key)
        return self.data.get(key) is not None

    def raw(self, key: str, default: Any = None) -> Any:
        self.used.add(self._prefix + key)
        value = self.data.get(key, default)
        return default if value is None else value

    def first_key(self, *keys: str) -> str | None:
        """The first of `keys` present (an alias set: all of them count as consulted)."""
        prefix = self._prefix
        self.used.update([prefix + k for k in keys] if prefix else keys)
        data = self.data
        for key in keys:
            if data.get(key) is not None:
                return key
        return None

    def int(
        self, *keys: str, default: int | None = None, minimum: int = 1, maximum: int = MAX_DIM
    ) -> int:
        """The first present key among `keys` as an int in [minimum, maximum].

        Absent: `default`, or EstimateError when there is none. Floats with an integral value
        are accepted (1e3 in JSON); strings, booleans and other types are not.
        """
        key = self.first_key(*keys)
        if key is None:
            if default is None:
                raise EstimateError(f"config lacks {' / '.join(self._name(k) for k in keys)}")
            return default
        value = self.data[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)):  # a tuple: faster
            raise EstimateError(
                f"config {self._name(key)} must be a number, got {type(value).__name__} "
                f"{_short(value)}"
            )
        if isinstance(value, float):
            if not math.isfinite(value) or value != int(value):
                raise EstimateError(f"config {self._name(key)} must be an integer, got {value!r}")
            value = int(value)
        if value < minimum:
            raise EstimateError(f"config {self._name(key)} must be >= {minimum}, got {value}")
        if value > maximum:
            raise EstimateError(
                f"config {self._name(key)} = {value} exceeds the sanity cap {maximum}"
            )
        return value

    def opt_int(
        self, *keys: str, minimum: builtins.int = 1, maximum: builtins.int = MAX_DIM
    ) -> builtins.int | None:
        key = self.first_key(*keys)
        if key is None:
            return None
        return self.int(key, minimum=minimum, maximum=maximum)

    def float(self, key: str, default: float) -> float:
        if not self.has(key):
            return default
        value = self.data[key]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise EstimateError(f"config {self._name(key)} must be a number, got {_short(value)}")
        if not math.isfinite(float(value)):
            raise EstimateError(f"config {self._name(key)} must be finite, got {value!r}")
        return float(value)

    def bool(self, key: str, default: bool) -> bool:
        self.used.add(self._prefix + key)
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise EstimateError(f"config {self._name(key)} must be true/false, got {_short(value)}")
        return value

    def str(self, key: str, default: str = "") -> str:
        self.used.add(self._prefix + key)
        value = self.data.get(key)
        return value if isinstance(value, str) else default

    def list(self, key: builtins.str) -> builtins.list[Any] | None:
        self.used.add(self._prefix + key)
        value = self.data.get(key)
        return value if isinstance(value, list) else None

    def sub(self, key: builtins.str) -> ConfigView | None:
        self.used.add(self._name(key))
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise EstimateError(f"config {self._name(key)} must be an object")
        return ConfigView(value, self._name(key), self.used)

    def view(self, data: Mapping[builtins.str, Any], path: builtins.str) -> ConfigView:
        """A view of `data` named `path` that shares this view's record of consulted keys."""
        return ConfigView(data, path, self.used)


def int_list(a: ConfigView, key: str, default: tuple[int, ...]) -> list[int]:
    """`key` as a list of positive ints (absent: transformers' `default`); EstimateError naming
    the key otherwise."""
    value = a.raw(key)
    if value is None:
        return list(default)
    name = f"{a.path}.{key}" if a.path else key
    if not isinstance(value, list | tuple) or not 0 < len(value) <= MAX_LAYERS:
        raise EstimateError(f"config {name} must be a non-empty list of sizes")
    out: list[int] = []
    for x in value:
        if isinstance(x, bool) or not isinstance(x, int) or not 0 < x <= MAX_DIM:
            raise EstimateError(f"config {name} must hold positive integers, got {x!r}")
        out.append(x)
    return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass(frozen=True)
class LayerSpec:
    """One decoder (or encoder) layer as memory, split and structure need it.

    `attention`: "mha" | "gqa" | "mqa" | "mla" | "sliding" | "linear" | "ssm" | "none";
    `ffn`: "swiglu" | "gelu" | "relu" | "moe" | "none"; `params` the layer's parameter count;
    `kv_bytes_per_token` the bf16 cache per token (0 for linear/SSM); `window` the sliding window;
    `state_bytes` the fixed per-sequence state (linear attention / SSM); `lora_dims` the sum of
    in+out over the layer's linears (experts included), so LoRA at rank r adds r × lora_dims.
    Widths for the activation formula: `q_width`, `k_width`, `v_width` (per token, all heads),
    `heads`, `ffn_width` (active FFN width: top-k × expert width + shared), `moe_width` (one
    expert), `gated` (gated FFN), `norms` (norms in the layer), `latent` (latent-MoE width),
    `shared_width` (shared experts' total width), `mla_latent` (MLA's q + kv low ranks), `qk_norm` (per-head q/k norms),
    `mixer_act` (bytes autograd keeps per token in a linear-attention or SSM mixer whose
    transformers torch path was measured; 0: the general approximation).
    """

    attention: str
    ffn: str
    params: int
    active_params: int
    kv_bytes_per_token: int = 0
    window: int | None = None
    state_bytes: int = 0
    lora_dims: int = 0
    experts: int = 0
    top_k: int = 0
    kind: str = "decoder"
    ffn_width: int = 0
    q_width: int = 0
    k_width: int = 0
    v_width: int = 0
    heads: int = 0
    moe_width: int = 0
    gated: bool = True
    norms: int = 2
    latent: int = 0
    shared_width: int = 0
    cross_kv_width: int = 0
    mla_latent: int = 0
    qk_norm: bool = False
    mixer_act: int = 0
    layer_norm: bool = False  # LayerNorm (not RMSNorm): keeps its input and output, no fp32 copy
    fused_qkv_rope: bool = False  # one qkv linear whose output stays whole beside rotated q, k
    act_tensors: int = 2  # tensors a two-matrix FFN keeps at width I (5 for GPT-2's tanh GELU)
    norm_fp32: bool = False  # RMSNorms that apply their weight in fp32 (Gemma, Qwen3-Next, gpt-oss)
    post_norms: int = 0  # of `norms`, those whose output no linear reads (sandwich post-norms)
    router_norm: bool = False  # the router normalises and scales its input (Gemma 4)
    v_norm: bool = False  # a weightless RMSNorm on V (Gemma 4)
    kv_b_width: int = 0  # MLA: kv_b_proj's output, heads × (nope + v head), when V is a view of it
    dense_mask: bool = False  # SDPA gets a T × T mask built in the layer (DSA indexer's top-k)
    eager: bool = False  # the family has no SDPA path in transformers: eager keeps T × T scores
    sinks: bool = False  # eager attention with a sink logit per head (gpt-oss)
    norm_keeps_input: bool = False  # the norm multiplies its bf16 input by the rsqrt (T5)
    bias_math: bool = False  # a learned position bias needing grad: SDPA's fp32 math path (T5)
    bias_indices: bool = False  # the layer computes that bias: int64 T × T bucket indices
    routing: str = "softmax"  # "topk": softmax over top-k logits (gpt-oss); "dense": all experts
    expert_tensors: int = 4  # tensors an expert keeps per routed token at its width (gpt-oss 7)


def encoder_layer(params: int, width: int, heads: int, ffn: int, *, lora_dims: int) -> LayerSpec:
    """A post-LN or pre-LN transformer encoder block with full multi-head attention and a
    two-matrix GELU FFN (ViT, BERT-like towers, wav2vec 2.0, SAM, Swin, V-JEPA 2 ...):
    `params` per block, hidden `width`, `heads`, FFN width `ffn`, `lora_dims` its linears'
    in + out (LayerSpec)."""
    return LayerSpec(
        "mha",
        "gelu",
        params,
        params,
        0,
        kind="encoder",
        lora_dims=lora_dims,
        ffn_width=ffn,
        q_width=width,
        k_width=width,
        v_width=width,
        heads=heads,
        gated=False,
        layer_norm=True,
    )


class Notes:
    """Flags (machine ids), notes (human lines) and things not understood, gathered while reading."""

    def __init__(self) -> None:
        self.flags: list[str] = []
        self.notes: list[str] = []
        self.flag_notes: dict[str, str] = {}
        self.unknowns: list[str] = []

    def flag(self, flag: str, note: str) -> None:
        if flag not in self.flags:
            self.flags.append(flag)
            self.notes.append(note)
            self.flag_notes[flag] = note

    def note(self, note: str) -> None:
        if note not in self.notes:
            self.notes.append(note)

    def unknown(self, what: str) -> None:
        """Something in the config the reader could not interpret (makes the estimate unverified)."""
        if what not in self.unknowns:
            self.unknowns.append(what)


@dataclass
class Tally:
    """Mutable accumulator of parameter counts by component, total and active."""

    by_component: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COMPONENTS, 0))
    active: int = 0

    def add(self, component: str, count: int, active: int | None = None) -> int:
        self.by_component[component] = self.by_component.get(component, 0) + count
        self.active += count if active is None else active
        return count

    @property
    def total(self) -> int:
        return sum(self.by_component.values())


@dataclass(frozen=True)
class Reading:
    """The estimator's reading of a config: counts plus what memory/structure/findings need."""

    architecture: str
    model_type: str
    family: str
    custom_code: bool
    total: int
    active: int
    embedding: int
    by_component: Mapping[str, int]
    layers: tuple[LayerSpec, ...]
    hidden: int
    vocab: int
    max_context: int | None
    num_heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    tied: bool
    head_params: int
    pre_params: int
    flags: tuple[str, ...]
    notes: tuple[str, ...]
    extra_params: int = 0
    encoder_layers: int = 0
    known_family: bool = True
    unknown: tuple[str, ...] = ()
    flag_notes: Mapping[str, str] = field(default_factory=dict)
    input_tokens: int = 0
    """The sequence one input gives an encoder built alone whose reader fixes it (a ViT's
    patches from image_size / patch_size and its learned tokens); 0 where none is fixed."""

    # Cached per reading (the reading is frozen, its layers a tuple of frozen specs): memory and
    # cards each need these several times. Readers hand identical layers one shared LayerSpec
    # (61 layers of two kinds, say, in two runs), so what depends on a layer alone is worked out
    # once per kind, and sums over the layers are taken over runs. Layers equal but not shared
    # are kinds of their own, which costs work, never a different answer.

    @functools.cached_property
    def layer_runs(self) -> tuple[tuple[LayerSpec, int], ...]:
        """The layers as runs of one object: (spec, how many layers in a row are it)."""
        runs: list[tuple[LayerSpec, int]] = []
        for _, group in itertools.groupby(self.layers, id):
            same = list(group)
            runs.append((same[0], len(same)))
        return tuple(runs)

    @functools.cached_property
    def layer_kinds(self) -> tuple[LayerSpec, ...]:
        """The distinct layer objects, in order of first appearance."""
        return tuple({id(spec): spec for spec, _ in self.layer_runs}.values())

    def per_layer(self, figure: Callable[[LayerSpec], float]) -> tuple[float, ...]:
        """`figure` of each layer, in order, worked out once per kind of layer (`layer_kinds`)
        and repeated over its runs: `figure` must depend on the layer alone."""
        once = {id(spec): figure(spec) for spec in self.layer_kinds}
        values: list[float] = []
        for spec, n in self.layer_runs:
            values += [once[id(spec)]] * n
        return tuple(values)

    @functools.cached_property
    def layer_params(self) -> int:
        """The parameters of all layers."""
        return sum(spec.params * n for spec, n in self.layer_runs)

    @functools.cached_property
    def largest_layer(self) -> int:
        """The parameters of the largest layer (0 without layers)."""
        return max((spec.params for spec in self.layer_kinds), default=0)

    @functools.cached_property
    def lora_dims(self) -> int:
        """The sum of in + out over the linears of all layers (LayerSpec.lora_dims)."""
        return sum(spec.lora_dims * n for spec, n in self.layer_runs)
