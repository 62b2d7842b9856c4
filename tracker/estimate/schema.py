"""The schema of watchlist.yaml's `estimate:` block, generated from EstimateSettings' fields.

Kept apart from `settings.py` so that reading settings' defaults (a one-off `tracker estimate`)
does not import pydantic.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, replace
from typing import TYPE_CHECKING, Annotated, Any, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, create_model

from tracker.estimate.settings import Card, EstimateSettings
from tracker.problems import validate


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
    raise TypeError(f"EstimateSettings field type {annotation!r} has no schema")  # pragma: no cover


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


if TYPE_CHECKING:

    class EstimateBlock(_EstimateBlockBase):
        """The watchlist's `estimate:` block (built from EstimateSettings' fields below)."""

else:
    _HINTS = get_type_hints(EstimateSettings)
    EstimateBlock = create_model(
        "EstimateBlock",
        __base__=_EstimateBlockBase,
        __doc__="The watchlist's `estimate:` block: any EstimateSettings field, each optional.",
        **{
            f.name: (_block_type(_HINTS[f.name], f.default) | None, None)
            for f in fields(EstimateSettings)
        },
    )


def settings_from(data: Mapping[str, Any] | None) -> EstimateSettings:
    """The defaults overridden by `data` (a watchlist `estimate:` block, validated by
    EstimateBlock); ConfigError listing every unknown key or bad value."""
    if not data:
        return EstimateSettings()
    block = validate(EstimateBlock, data, where="estimate", message="invalid estimate settings")
    return block.settings()
