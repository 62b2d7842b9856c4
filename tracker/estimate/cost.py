"""Roofline training cost (ESTIMATES.md §3): FLOPs / (peak × utilization) × hourly price.

FLOPs ≈ 6 × active parameters × tokens + the attention term 12 × Σ_layers (heads·head_dim ×
attended tokens) per token (QKᵀ and AV, forward and backward), attended = min(seq, window)/2
on average for causal attention; linear-attention and SSM layers add no quadratic term.
"""

from __future__ import annotations

import functools
import operator

from tracker.estimate.reading import LayerSpec, Reading
from tracker.estimate.settings import EstimateSettings
from tracker.shared.estimate_values import CostEstimate


def training_cost(r: Reading, s: EstimateSettings) -> CostEstimate:
    """The §5 `cost` object: FLOPs, hours and USD with every assumption stated beside them."""
    seq = s.cost_seq_len
    tokens = s.cost_epochs * s.cost_samples * seq

    def attention(spec: LayerSpec) -> float:
        if spec.attention in ("linear", "ssm", "none"):
            return 0.0
        attended = seq if spec.window is None else min(seq, spec.window)
        width = spec.q_width or r.num_heads * r.head_dim
        return 12.0 * width * attended / 2

    # each kind's term worked out once, added layer by layer in order (a float sum's rounding
    # depends on its order; adding 0.0 for a layer without attention changes nothing)
    attn_per_token = functools.reduce(operator.add, r.per_layer(attention), 0.0)
    flops = 6.0 * r.active * tokens + attn_per_token * tokens
    card = s.cost_card
    peak = card.bf16_tflops * 1e12 * s.cost_utilization
    hours = flops / peak / 3600 if peak > 0 else None
    usd = hours * card.price_per_hour if hours is not None else None
    return CostEstimate(
        flops=flops,
        tokens=tokens,
        hours=None if hours is None else round(hours, 2),
        usd=None if usd is None else round(usd, 2),
        assumptions={
            "epochs": s.cost_epochs,
            "samples": s.cost_samples,
            "seq_len": seq,
            "batch": s.cost_batch,
            "gpu": card.name,
            "bf16_peak_tflops": card.bf16_tflops,
            "utilization": s.cost_utilization,
            "usd_per_hour": card.price_per_hour,
            "formula": "6 x active params x tokens + 12 x attention width x attended tokens "
            "per layer per token; hours = FLOPs / (peak x utilization)",
        },
    )
