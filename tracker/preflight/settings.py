"""PreflightSettings: the watchlist's `preflight:` block (every key optional, every problem at once).

    preflight:
      transformers: ["4.57.1", "5.1.0", "5.24.0"]   # versions the remote code is checked against
      lora_targets: [q_proj, v_proj, all-linear]     # default: the seven projections + all-linear
      throughput_mb_s: 126                           # download throughput (decimal MB/s)
      provisioning_window_h: 1                       # a download longer than this is flagged
      boxes: [{count: 8, card: "B200 180 GB", vram_gb: 180}]

No `transformers` list (the default): the remote code's imports are listed but checked against no
version, and nothing is fetched from the package index.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from tracker.preflight.capacity import DEFAULT_BOXES, Box
from tracker.shared.problems import validate

DEFAULT_TARGETS: tuple[str, ...] = (
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
    "all-linear",
)
_VERSION = r"^[0-9]+(\.[0-9]+){1,3}([a-z]+[0-9]*)?(\.post[0-9]+|\.dev[0-9]+)?$"


@dataclass(frozen=True)
class PreflightSettings:
    """What preflight checks and assumes (see the module docstring)."""

    transformers: tuple[str, ...] = ()
    lora_targets: tuple[str, ...] = DEFAULT_TARGETS
    throughput_mb_s: float = 126.0
    provisioning_window_h: float = 1.0
    boxes: tuple[Box, ...] = DEFAULT_BOXES

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> PreflightSettings:
        """Defaults overridden by `data`; ConfigError listing every unknown key or bad value."""
        if not data:
            return cls()
        block = validate(
            PreflightBlock, data, where="preflight", message="invalid preflight settings"
        )
        return block.settings()


class BoxBlock(BaseModel):
    """A box: `count` cards named `card` of `vram_gb` decimal GB each."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    count: Annotated[int, Field(strict=True, ge=1, le=4096)] = Field(description="'count' of cards")
    card: Annotated[str, Field(strict=True, min_length=1)] = Field(description="the 'card' name")
    vram_gb: Annotated[float, Field(strict=True, gt=0, le=1e6, allow_inf_nan=False)] = Field(
        description="'vram_gb' (decimal GB)"
    )


class PreflightBlock(BaseModel):
    """The watchlist's `preflight:` block."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    transformers: (
        Annotated[list[Annotated[str, Field(strict=True, pattern=_VERSION)]], Field(max_length=16)]
        | None
    ) = None
    lora_targets: (
        Annotated[
            list[Annotated[str, Field(strict=True, pattern=r"^[A-Za-z_][\w.-]{0,99}$")]],
            Field(min_length=1, max_length=64),
        ]
        | None
    ) = None
    throughput_mb_s: (
        Annotated[float, Field(strict=True, gt=0, le=1e6, allow_inf_nan=False)] | None
    ) = None
    provisioning_window_h: (
        Annotated[float, Field(strict=True, gt=0, le=8760, allow_inf_nan=False)] | None
    ) = None
    boxes: Annotated[list[BoxBlock], Field(max_length=32)] | None = None

    def settings(self) -> PreflightSettings:
        d = PreflightSettings()
        return PreflightSettings(
            transformers=tuple(dict.fromkeys(self.transformers))
            if self.transformers is not None
            else d.transformers,
            lora_targets=tuple(dict.fromkeys(self.lora_targets))
            if self.lora_targets is not None
            else d.lora_targets,
            throughput_mb_s=float(self.throughput_mb_s)
            if self.throughput_mb_s is not None
            else d.throughput_mb_s,
            provisioning_window_h=float(self.provisioning_window_h)
            if self.provisioning_window_h is not None
            else d.provisioning_window_h,
            boxes=tuple(Box(b.count, b.card, b.vram_gb) for b in self.boxes)
            if self.boxes is not None
            else d.boxes,
        )
