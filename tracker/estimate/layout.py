"""Attention-layout facts of hybrid models: which layers are full attention, period and ratio.

ESTIMATES.md §4: the period is the *mode* of the gaps between full-attention layers, the
linear:full ratio is a decimal (69:24 is 2.9:1), and a model with no full-attention list is
not hybrid.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tracker.estimate.reading import ConfigView
from tracker.shared.errors import EstimateError


def full_attention_layers(c: ConfigView, n_layers: int) -> frozenset[int]:
    """0-based indices of the full-attention layers of a hybrid config.

    Sources, in order: `layer_types` (Qwen3-Next style, "full_attention" entries),
    `linear_attn_config.full_attn_layers` (Kimi-Linear style, 1-indexed), and
    `full_attention_interval` (every k-th layer, 1-indexed: layer i is full when (i+1) % k == 0).
    No source: every layer is full attention (the model is not hybrid).
    """
    types = c.list("layer_types")
    if types is not None:
        if len(types) != n_layers:
            raise EstimateError(
                f"config layer_types has {len(types)} entries for {n_layers} layers"
            )
        return frozenset(i for i, t in enumerate(types) if t == "full_attention")
    lac = c.sub("linear_attn_config")
    if lac is not None and lac.list("full_attn_layers") is not None:
        listed = lac.list("full_attn_layers") or []
        out = set()
        for x in listed:
            if isinstance(x, bool) or not isinstance(x, int) or not 1 <= x <= n_layers:
                raise EstimateError(
                    f"config full_attn_layers entry {x!r} is not a layer number 1..{n_layers}"
                )
            out.add(x - 1)
        return frozenset(out)
    if c.has("full_attention_interval"):
        k = c.int("full_attention_interval")
        return frozenset(i for i in range(n_layers) if (i + 1) % k == 0)
    return frozenset(range(n_layers))


@dataclass(frozen=True)
class Pattern:
    """Hybrid-layout summary: `hybrid` false means every layer is full attention."""

    hybrid: bool
    full: int
    linear: int
    period: int | None
    ratio: str | None

    def describe(self) -> str:
        if not self.hybrid:
            return "all layers full attention (not hybrid)"
        return (
            f"{self.linear} linear : {self.full} full attention ({self.ratio}:1), "
            f"full attention every {self.period} layers"
        )


def mode_of_gaps(positions: Sequence[int]) -> int | None:
    """The most common gap between consecutive sorted positions (ties: the smaller gap).

    Gaps are counted from a virtual layer before the first (position -1), so a full layer
    every 4th from the start gives 4. None when there are no positions.
    """
    if not positions:
        return None
    ordered = sorted(positions)
    gaps = Counter(b - a for a, b in zip([-1, *ordered[:-1]], ordered, strict=True))
    best = max(gaps.values())
    return min(g for g, n in gaps.items() if n == best)


def decimal_ratio(linear: int, full: int) -> str | None:
    """linear/full rounded to one decimal ("2.9"), None when there are no full layers."""
    if full == 0:
        return None
    return f"{linear / full:.1f}"


def pattern(kinds: Iterable[str]) -> Pattern:
    """Summarize per-layer attention kinds ("linear"/"ssm" vs anything else)."""
    seq = list(kinds)
    linear = seq.count("linear") + seq.count("ssm")
    if linear == 0:
        full = len(seq) - seq.count("none")
        return Pattern(hybrid=False, full=full, linear=0, period=None, ratio=None)
    full_pos = [i for i, k in enumerate(seq) if k not in ("linear", "ssm", "none")]
    return Pattern(
        hybrid=True,
        full=len(full_pos),
        linear=linear,
        period=mode_of_gaps(full_pos),
        ratio=decimal_ratio(linear, len(full_pos)),
    )
