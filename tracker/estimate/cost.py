"""Roofline training cost (ESTIMATES.md §3): FLOPs / (peak × utilization) × hourly price.

FLOPs ≈ 6 × active parameters × tokens + the attention term 12 × Σ_layers (heads·head_dim ×
attended tokens) per token (QKᵀ and AV, forward and backward), attended = min(seq, window)/2
on average for causal attention; linear-attention and SSM layers add no quadratic term.

The priced card (`pick_card`): the settings' `cost_card` where one is set; else the cheapest
listed card for the job (USD = FLOPs / (peak × utilization) × price, so the least price per
peak TFLOPS) among those the fit table says hold a full fine-tune at batch 1, on one card or
split over two; where none does, the cheapest per FLOP as a rate only, and `gpu_cards` null says
that no listed card runs the job.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence

from tracker.estimate.reading import LayerSpec, Reading
from tracker.estimate.settings import Card, EstimateSettings
from tracker.shared.estimate_values import CardFit, CostEstimate

CHOSEN = "the cheapest listed card that holds a full fine-tune at batch 1"
SET = "the cost_card setting"
NONE_HOLDS = (
    "no listed card holds a full fine-tune at batch 1, on one card or split over two: "
    "the cheapest listed card per FLOP, a rate only"
)
"""The `gpu_choice` assumption: why the priced card is the one named."""


def _runs_on(fit: CardFit, shards: int) -> int | None:
    """The cards a full fine-tune at batch 1 takes on `fit`'s card (1, the training `shards`
    when the settings shard it, or the two-card split's count), None where the fit table says
    it does not fit."""
    full = fit.full_finetune
    if full.batch >= 1:
        return shards
    if full.split is not None:
        return full.split_cards or len(full.split)
    return None


def pick_card(
    s: EstimateSettings, table: Sequence[CardFit], flops: float
) -> tuple[Card | None, int | None, str]:
    """(the priced card, the cards a full fine-tune at batch 1 takes on it, the `gpu_choice`
    words). The settings' `cost_card` where set (its card count from the fit table when the card
    is listed there, else None); else the cheapest listed card (`s.all_cards`, those with a price
    and a peak) by the USD of the job's `flops`, the first listed on a tie, among those `table` says
    hold the job; else the cheapest of all as a rate (count None); (None, None, ...) where no
    listed card has a price and a peak."""
    shards = max(1, s.shards) if s.sharding != "none" else 1
    fits = {f.name: _runs_on(f, shards) for f in table}
    if s.cost_card is not None:
        return s.cost_card, fits.get(s.cost_card.name), SET
    priced = [c for c in s.all_cards if c.price_per_hour > 0 and c.bf16_tflops > 0]

    def usd(card: Card) -> float:
        # the job's USD, computed as `training_cost` computes it
        return flops / (card.bf16_tflops * 1e12 * s.cost_utilization) / 3600 * card.price_per_hour

    holders = [c for c in priced if fits.get(c.name) is not None]
    if holders:
        card = min(holders, key=usd)
        return card, fits[card.name], CHOSEN
    if priced:
        return min(priced, key=usd), None, NONE_HOLDS
    return None, None, NONE_HOLDS


def training_cost(r: Reading, s: EstimateSettings, table: Sequence[CardFit]) -> CostEstimate:
    """The §5 `cost` object: FLOPs, hours and USD with every assumption stated beside them,
    priced on `pick_card`'s card (`table`: the estimate's card fit table). Hours are GPU-hours
    (spread over the cards where the job takes two); no card, or one without a peak, leaves
    hours and USD None."""
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
    card, cards, choice = pick_card(s, table, flops)
    peak = card.bf16_tflops * 1e12 * s.cost_utilization if card is not None else 0.0
    hours = flops / peak / 3600 if peak > 0 else None
    usd = hours * card.price_per_hour if hours is not None and card is not None else None
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
            "gpu": None if card is None else card.name,
            "gpu_cards": cards,
            "gpu_choice": choice,
            "bf16_peak_tflops": None if card is None else card.bf16_tflops,
            "utilization": s.cost_utilization,
            "usd_per_hour": None if card is None else card.price_per_hour,
            "formula": "6 x active params x tokens + 12 x attention width x attended tokens "
            "per layer per token; hours = FLOPs / (peak x utilization)",
        },
    )
