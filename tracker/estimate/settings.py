"""EstimateSettings: every constant of ESTIMATES.md §2–3 with its default, overridable from
watchlist.yaml's `estimate:` mapping (all problems reported at once as ConfigError)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from tracker.errors import ConfigError


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
        """Defaults overridden by `data`; ConfigError listing every unknown key or bad value."""
        if not data:
            return cls()
        if not isinstance(data, Mapping):
            raise ConfigError("estimate settings must be a mapping")
        problems: list[str] = []
        known = {f.name: f for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, value in data.items():
            if key not in known:
                hint = _did_you_mean(str(key), list(known))
                problems.append(f"estimate.{key}: unknown setting{hint}")
                continue
            default = getattr(cls(), key)
            try:
                values[key] = _coerce(key, value, default)
            except ValueError as exc:
                problems.append(f"estimate.{key}: {exc}")
        if problems:
            raise ConfigError("invalid estimate settings", tuple(problems))
        return replace(cls(), **values)


def _did_you_mean(key: str, known: list[str]) -> str:
    import difflib

    close = difflib.get_close_matches(key, known, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _number(value: Any, *, integer: bool, positive: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"must be a number, got {value!r}")
    if not math.isfinite(float(value)):
        raise ValueError(f"must be finite, got {value!r}")
    if integer and float(value) != int(value):
        raise ValueError(f"must be an integer, got {value!r}")
    if positive and value <= 0:
        raise ValueError(f"must be > 0, got {value!r}")
    return value


def _card(value: Any) -> Card:
    if not isinstance(value, Mapping) or "name" not in value or "vram_gb" not in value:
        raise ValueError("each card needs at least name and vram_gb")
    return Card(
        name=str(value["name"]),
        vram_gb=float(_number(value["vram_gb"], integer=False)),
        price_per_hour=float(
            _number(value.get("price_per_hour", 0.0), integer=False, positive=False)
        ),
        bf16_tflops=float(_number(value.get("bf16_tflops", 0.0), integer=False, positive=False)),
    )


def _coerce(key: str, value: Any, default: Any) -> Any:
    if key in ("cards", "extra_cards"):
        if not isinstance(value, list) or (key == "cards" and not value):
            raise ValueError("must be a non-empty list of cards")
        return tuple(_card(v) for v in value)
    if key == "cost_card":
        return _card(value)
    if isinstance(default, str):
        if not isinstance(value, str):
            raise ValueError(f"must be a string, got {value!r}")
        return value
    if isinstance(default, int):
        return int(_number(value, integer=True))
    return float(_number(value, integer=False))
