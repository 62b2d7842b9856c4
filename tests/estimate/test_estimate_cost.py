"""The priced card (issue 27): by default each job is priced on the cheapest listed card that
holds a full fine-tune at batch 1 (on one card or split over two), never on a card that cannot
run it; where none can, the report says so (`gpu_cards` null); a `cost_card` the settings name
is priced as set. Hours and USD checked against the roofline formula by hand."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from tracker.estimate import Card, EstimateSettings, estimate
from tracker.estimate.cost import CHOSEN, NONE_HOLDS, SET

CONFIGS = Path(__file__).parents[1] / "data" / "configs"
T4, L4, A100, A80, H200 = EstimateSettings().cards
A10G = Card("A10G 24 GB", 24.0, 1.006, 125.0)


def load(name: str) -> dict[str, Any]:
    return json.loads((CONFIGS / f"{name}.json").read_text())


def hours_usd(flops: float, card: Card) -> tuple[float, float]:
    hours = flops / (card.bf16_tflops * 1e12 * 0.35) / 3600
    return round(hours, 2), round(hours * card.price_per_hour, 2)


def test_a_7b_full_fine_tune_is_priced_on_the_card_that_holds_it() -> None:
    est = estimate(load("meta-llama__Llama-2-7b-hf"))
    a = est.cost.assumptions
    # no listed card holds it alone; two H200s hold it split 16 + 16 (the fit table's)
    assert [c.full_finetune.batch for c in est.cards] == [0, 0, 0, 0, 0]
    assert est.card("H200 141 GB").full_finetune.split == (16, 16)  # type: ignore[union-attr]
    assert (a["gpu"], a["gpu_cards"], a["gpu_choice"]) == ("H200 141 GB", 2, CHOSEN)
    assert (a["bf16_peak_tflops"], a["usd_per_hour"]) == (989.0, 4.0)
    assert est.cost.flops == 4.3050092986368e19
    assert (est.cost.hours, est.cost.usd) == hours_usd(est.cost.flops, H200) == (34.55, 138.19)
    assert est.settings["cost_card"] is None


def test_the_cheapest_holder_by_the_jobs_usd_not_the_hourly_price() -> None:
    config = load("Qwen__Qwen3-0.6B")
    est = estimate(config)
    # every listed card holds it (T4 split over two); per FLOP the H200 is cheapest
    # ($4.00 / 989 TFLOPS against T4's $0.35 / 65)
    a = est.cost.assumptions
    assert (a["gpu"], a["gpu_cards"]) == ("H200 141 GB", 1)
    assert (est.cost.hours, est.cost.usd) == hours_usd(est.cost.flops, H200) == (3.52, 14.07)
    # without the H200 and the A100s: the T4 (split over two) is cheaper per FLOP than the L4
    small = estimate(config, settings=replace(EstimateSettings(), cards=(L4, T4)))
    a = small.cost.assumptions
    assert (a["gpu"], a["gpu_cards"], a["gpu_choice"]) == ("T4 16 GB", 2, CHOSEN)
    assert (small.cost.hours, small.cost.usd) == hours_usd(small.cost.flops, T4) == (53.52, 18.73)
    # a card without a price is never chosen, even where it is the only one to hold the job
    unpriced = replace(EstimateSettings(), cards=(T4, Card("free 200 GB", 200.0)))
    assert estimate(config, settings=unpriced).cost.assumptions["gpu"] == "T4 16 GB"


def test_no_listed_card_runs_it_says_so() -> None:
    est = estimate(load("deepseek-ai__DeepSeek-V3"))
    assert all(c.full_finetune.batch == 0 and c.full_finetune.split is None for c in est.cards)
    a = est.cost.assumptions
    assert (a["gpu"], a["gpu_cards"], a["gpu_choice"]) == ("H200 141 GB", None, NONE_HOLDS)
    assert (est.cost.hours, est.cost.usd) == hours_usd(est.cost.flops, H200) == (200.29, 801.15)
    # no card with a price and a peak: no hours, no USD, no card named
    bare = replace(EstimateSettings(), cards=(Card("x 16 GB", 16.0),))
    cost = estimate(load("Qwen__Qwen3-0.6B"), settings=bare).cost
    assert (cost.hours, cost.usd, cost.assumptions["gpu"]) == (None, None, None)


def test_a_named_cost_card_is_priced_as_set() -> None:
    s = replace(EstimateSettings(), cost_card=A10G)
    est = estimate(load("meta-llama__Llama-2-7b-hf"), settings=s)
    a = est.cost.assumptions
    # the A10G is not a listed card: how many it takes is not known from the table
    assert (a["gpu"], a["gpu_cards"], a["gpu_choice"]) == ("A10G 24 GB", None, SET)
    assert (est.cost.hours, est.cost.usd) == hours_usd(est.cost.flops, A10G) == (273.33, 274.97)
    listed = estimate(load("Qwen__Qwen3-0.6B"), settings=replace(s, cost_card=L4))
    assert (listed.cost.assumptions["gpu"], listed.cost.assumptions["gpu_cards"]) == (
        "L4 24 GB",
        1,
    )
    # and from the watchlist's block, with null for the default choice
    block = EstimateSettings.from_mapping({"cost_card": {"name": "A10G 24 GB", "vram_gb": 24.0}})
    assert block.cost_card == Card("A10G 24 GB", 24.0)
    assert EstimateSettings.from_mapping({"cost_card": None}).cost_card is None


def test_sharded_training_counts_its_shards() -> None:
    s = replace(EstimateSettings(), sharding="fsdp", shards=4)
    est = estimate(load("meta-llama__Llama-2-7b-hf"), settings=s)
    held = [c.name for c in est.cards if c.full_finetune.batch >= 1]
    a = est.cost.assumptions
    assert held and a["gpu"] in held and a["gpu_cards"] == 4
