"""EstimateSettings: every constant of ESTIMATES.md §2–3 with its default, overridable from
watchlist.yaml's `estimate:` mapping (all problems reported at once as ConfigError).

The mapping's schema (`EstimateBlock`, pydantic, generated from EstimateSettings' fields) is built
on first use, so that a one-off `tracker estimate` never imports pydantic.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import TYPE_CHECKING, Any, get_type_hints

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
    """Reference settings of the estimate (ESTIMATES.md §2–3); every field has its default."""

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
    cost_card: Card = Card("A10G 24 GB", 24.0, 1.006, 125.0)
    cost_utilization: float = 0.35
    huge_linear_threshold: int = 1_000_000_000

    @property
    def all_cards(self) -> tuple[Card, ...]:
        """`cards` followed by `extra_cards` (extend the default list without restating it)."""
        return self.cards + self.extra_cards

    def to_json(self) -> dict[str, Any]:
        """Every setting by name (cards as objects): the `settings` part of the report."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Card):
                value = asdict(value)
            elif isinstance(value, tuple):
                value = [asdict(v) for v in value]
            out[f.name] = value
        return out

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> EstimateSettings:
        """Defaults overridden by `data` (validated by `EstimateBlock`); ConfigError listing every
        unknown key or bad value."""
        if not data:
            return cls()
        from tracker.problems import validate

        block = validate(
            _schema()["EstimateBlock"], data, where="estimate", message="invalid estimate settings"
        )
        settings: EstimateSettings = block.settings()
        return settings


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
        vram_gb: Annotated[float, Field(strict=True, gt=0, allow_inf_nan=False)] = Field(
            description="'vram_gb' (decimal GB)"
        )
        price_per_hour: Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)] = 0.0
        bf16_tflops: Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)] = 0.0

        def card(self) -> Card:
            return Card(self.name, self.vram_gb, self.price_per_hour, self.bf16_tflops)

    def _block_type(annotation: Any, default: Any) -> Any:
        """The schema type of an EstimateSettings field: numbers strictly positive and finite; a
        list of cards not empty when its default is not (`cards`; `extra_cards` may be)."""
        if annotation is int:
            return Annotated[int, Field(strict=True, gt=0)]
        if annotation is float:
            return Annotated[float, Field(strict=True, gt=0, allow_inf_nan=False)]
        if annotation is str:
            return Annotated[str, Field(strict=True)]
        if annotation is Card:
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
