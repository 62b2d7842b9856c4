"""EstimateSettings: every constant of ESTIMATES.md §2–3 with its default, overridable from
watchlist.yaml's `estimate:` mapping (all problems reported at once as ConfigError).

The mapping's schema (`EstimateBlock`, pydantic, generated from EstimateSettings' fields) is built
on first use, so that a one-off `tracker estimate` never imports pydantic.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import TYPE_CHECKING, Any, Literal, get_origin, get_type_hints

Precision = Literal["bf16-mixed", "fp16-mixed", "bf16", "fp32"]
Optimizer = Literal["adamw", "adamw-8bit", "paged-adamw", "paged-adamw-8bit"]
BaseWeights = Literal["shipped", "bf16", "nf4", "int4", "int8", "fp8"]
Sharding = Literal["none", "zero1", "zero2", "zero3", "fsdp"]
MAX_INT = 10**12
MAX_FLOAT = 1e6
"""The largest integer and number the `estimate:` block accepts (past them the arithmetic of the
estimate leaves float range: a 10**400 `serve_seq_len` raised OverflowError in analysis)."""

if TYPE_CHECKING:
    from pydantic import BaseModel

    class CardBlock(BaseModel):
        """A card in the watchlist's `estimate:` block."""

        def card(self) -> Card: ...

    class EstimateBlock(BaseModel):
        """The watchlist's `estimate:` block: any EstimateSettings field, each optional."""

        def settings(self) -> EstimateSettings: ...


@dataclass(frozen=True)
class Card:
    """A GPU model: name, memory in decimal GB, hourly price in USD, dense bf16 peak TFLOPS."""

    name: str
    vram_gb: float
    price_per_hour: float = 0.0
    bf16_tflops: float = 0.0


DEFAULT_CARDS: tuple[Card, ...] = (
    Card("T4 16 GB", 16.0, 0.35, 65.0),
    Card("L4 24 GB", 24.0, 0.80, 121.0),
    Card("A100 40 GB", 40.0, 1.80, 312.0),
    Card("A100/H100 80 GB", 80.0, 2.50, 312.0),
    Card("H200 141 GB", 141.0, 4.00, 989.0),
)


@dataclass(frozen=True)
class EstimateSettings:
    """Reference settings of the estimate (ESTIMATES.md §2–3); every field has its default.

    Settings users train and serve with (issue 9 item 5), each changing the derivation:
    `precision`: "bf16-mixed" (the reference: fp32 weights, gradients and AdamW state, bf16
    autocast; `full_ft_bytes_per_param` = 16 and `full_ft_overhead` 1.2 for autocast's copies),
    "fp16-mixed" (the same bytes), "bf16" (pure bf16: weights, gradients and optimizer state in
    bf16, 8 B/param with AdamW, no overhead) or "fp32" (fp32 weights and activations).
    `optimizer`: "adamw", "adamw-8bit" (two 1-byte states), "paged-adamw", "paged-adamw-8bit"
    (the same bytes; pages may move to the CPU under pressure, so the estimate is an upper
    bound). `optimizer_in_backward`: each parameter is stepped as its gradient arrives, so only
    one layer's gradients are held. `grad_checkpointing`: each layer keeps only its input; one
    layer's activations are recomputed at a time. `chunked_loss`: the loss upcasts the logits
    chunk by chunk (no full fp32 copy besides the saved one). `lora_base`: the frozen base of
    LoRA: "shipped" (the default: a quantized checkpoint as shipped, QLoRA-style, any other in
    bf16; `tracker.estimate.shipped`), "bf16" (a quantized checkpoint upcast) or quantized
    (QLoRA: "nf4" with double-quantized constants, "int4" GPTQ with group-128 scales and zeros,
    "int8", "fp8"; embeddings and head stay bf16).
    `lora_trainable_embeddings`: embeddings and head trained besides the adapters. `sharding`
    across `shards` cards: "zero1" shards optimizer state, "zero2" also gradients, "zero3" /
    "fsdp" also weights (plus two unsharded layers in flight); `shards` is training's only.
    `serve_shards`: serving splits weights, KV cache and prefill over that many cards (tensor
    parallel; ZeRO and FSDP are training schemes and leave serving weights whole).
    `serve_weights`: "shipped" (the default: the checkpoint as shipped, its bytes, else its
    config's `quantization_config`, else bf16; `tracker.estimate.shipped`) or a serving weight
    dtype our count is re-quantized to (quantized linears, bf16 embeddings and head). `serve_prefill`: add the prefill working set
    of a `serve_prompt_tokens`-token prompt (0: the whole `serve_seq_len`).
    `cost_card`: the card training is priced on; None (the default) prices each job on the
    cheapest listed card (`all_cards`, by USD for the job: price / bf16 peak) that holds a full
    fine-tune at batch 1, on one card or split over two (`tracker.estimate.cost`).
    """

    train_seq_len: int = 2048
    serve_seq_len: int = 4096
    full_ft_bytes_per_param: float = 16.0
    full_ft_overhead: float = 1.2
    lora_rank: int = 16
    lora_base_bytes_per_param: float = 2.0
    lora_adapter_bytes_per_param: float = 16.0
    lora_targets: str = "all-linear"  # "all-linear" or a comma list of q,k,v,o,gate,up,down
    serve_bytes_per_param: float = 2.0
    kv_bytes_per_value: float = 2.0
    headroom: float = 1.15
    borderline_factor: float = 1.43
    activation_bytes: float = 2.0  # bf16 activations
    cards: tuple[Card, ...] = DEFAULT_CARDS
    extra_cards: tuple[Card, ...] = ()
    cost_epochs: int = 10
    cost_samples: int = 50_000
    cost_seq_len: int = 2048
    cost_batch: int = 32
    cost_card: Card | None = None
    cost_utilization: float = 0.35
    huge_linear_threshold: int = 1_000_000_000
    precision: Precision = "bf16-mixed"
    optimizer: Optimizer = "adamw"
    optimizer_in_backward: bool = False
    grad_checkpointing: bool = False
    chunked_loss: bool = False
    lora_base: BaseWeights = "shipped"
    lora_trainable_embeddings: bool = False
    sharding: Sharding = "none"
    shards: int = 1
    serve_shards: int = 1
    serve_weights: BaseWeights = "shipped"
    serve_prefill: bool = True
    serve_prompt_tokens: int = 0

    @property
    def all_cards(self) -> tuple[Card, ...]:
        """`cards` followed by `extra_cards` (extend the default list without restating it)."""
        return self.cards + self.extra_cards

    def to_json(self) -> dict[str, Any]:
        """Every setting by name (cards as objects): the `settings` part of the report.

        A new dict each call, its card objects new too (callers may change what they get); the
        rest are numbers, words and booleans, shared with `_json_template`."""
        template, card_fields = self._json_template
        out = dict(template)
        for name in card_fields:
            value = template[name]
            out[name] = dict(value) if isinstance(value, dict) else [dict(c) for c in value]
        return out

    @functools.cached_property
    def _json_template(self) -> tuple[dict[str, Any], tuple[str, ...]]:
        """(every setting by name, cards as objects; the names holding cards), built once per
        instance: the settings are frozen, so it never goes stale. Private: `to_json` hands out
        copies, never this dict."""
        out: dict[str, Any] = {}
        card_fields: list[str] = []
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Card):
                value = asdict(value)
                card_fields.append(f.name)
            elif isinstance(value, tuple):
                value = [asdict(v) for v in value]
                card_fields.append(f.name)
            out[f.name] = value
        return out, tuple(card_fields)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> EstimateSettings:
        """Defaults overridden by `data` (validated by `EstimateBlock`); ConfigError listing every
        unknown key or bad value."""
        if not data:
            return cls()
        from tracker.shared.problems import validate

        block = validate(
            _schema()["EstimateBlock"], data, where="estimate", message="invalid estimate settings"
        )
        settings: EstimateSettings = block.settings()
        return settings


DEFAULT_SETTINGS = EstimateSettings()
"""The reference settings, one shared (frozen) instance: an estimate without settings uses it,
so its `to_json` is built once per process rather than once per estimate."""


def __getattr__(name: str) -> Any:
    """`CardBlock` and `EstimateBlock`, built on first use."""
    if name in ("CardBlock", "EstimateBlock"):
        return _schema()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _schema() -> dict[str, Any]:
    """The pydantic models of the `estimate:` block: CardBlock and EstimateBlock."""
    from typing import Annotated

    from pydantic import BaseModel, ConfigDict, Field, create_model

    class CardBlock(BaseModel):
        """A card in the watchlist's `estimate:` block (`cards:` or `cost_card:`)."""

        model_config = ConfigDict(extra="forbid", frozen=True)

        name: str = Field(description="the card's 'name'")
        vram_gb: Annotated[float, Field(strict=True, gt=0, le=MAX_FLOAT, allow_inf_nan=False)] = (
            Field(description="'vram_gb' (decimal GB)")
        )
        price_per_hour: Annotated[
            float, Field(strict=True, ge=0, le=MAX_FLOAT, allow_inf_nan=False)
        ] = 0.0
        bf16_tflops: Annotated[
            float, Field(strict=True, ge=0, le=MAX_FLOAT, allow_inf_nan=False)
        ] = 0.0

        def card(self) -> Card:
            return Card(self.name, self.vram_gb, self.price_per_hour, self.bf16_tflops)

    def _block_type(annotation: Any, default: Any) -> Any:
        """The schema type of an EstimateSettings field: numbers strictly positive and finite
        (an int whose default is 0 may be 0), one of the listed words, a boolean; a list of cards
        not empty when its default is not (`cards`; `extra_cards` may be)."""
        if annotation is bool:
            return Annotated[bool, Field(strict=True)]
        if annotation is int:
            return Annotated[int, Field(strict=True, ge=0 if default == 0 else 1, le=MAX_INT)]
        if get_origin(annotation) is Literal:
            return annotation
        if annotation is float:
            return Annotated[float, Field(strict=True, gt=0, le=MAX_FLOAT, allow_inf_nan=False)]
        if annotation is str:
            return Annotated[str, Field(strict=True)]
        if annotation is Card or annotation == Card | None:
            return CardBlock
        if annotation == tuple[Card, ...]:
            return Annotated[list[CardBlock], Field(min_length=1 if default else 0)]
        raise TypeError(
            f"EstimateSettings field type {annotation!r} has no schema"
        )  # pragma: no cover

    class _EstimateBlockBase(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)

        def settings(self) -> EstimateSettings:
            """The defaults with every key this block sets."""
            values: dict[str, Any] = {}
            for name in self.model_fields_set:
                value = getattr(self, name)
                if isinstance(value, CardBlock):
                    value = value.card()
                elif isinstance(value, list):
                    value = tuple(v.card() for v in value)
                values[name] = value
            return replace(EstimateSettings(), **values)

    hints = get_type_hints(EstimateSettings)
    definitions: dict[str, Any] = {
        f.name: (_block_type(hints[f.name], f.default) | None, None)
        for f in fields(EstimateSettings)
    }
    EstimateBlock = create_model(
        "EstimateBlock",
        __base__=_EstimateBlockBase,
        __doc__="The watchlist's `estimate:` block: any EstimateSettings field, each optional.",
        **definitions,
    )

    return {"CardBlock": CardBlock, "EstimateBlock": EstimateBlock}
