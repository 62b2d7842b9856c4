"""EstimateSettings: every constant of ESTIMATES.md §2–3 with its default, overridable from
watchlist.yaml's `estimate:` mapping through `tracker.estimate.schema.settings_from` (all problems
reported at once as ConfigError)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any


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
