"""The two-card cut of tracker/estimate/cards.py: the bisection (`balanced_cut`) returns exactly
what trying every cut (`_balanced_cut_scan`, the former loop) returns: the same peak, bit for
bit, and the same cut, the smallest on ties. Per-layer figures worked out once per kind of layer
(`Reading.layer_kinds`) are those of a layer-by-layer walk."""

from __future__ import annotations

import copy
import itertools
import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.estimate import Card, EstimateSettings
from tracker.estimate.cards import _balanced_cut_scan, balanced_cut, card_table
from tracker.estimate.memory import compute, layer_activation_bytes, layer_kv_bytes
from tracker.estimate.params import read_config

CONFIGS = Path(__file__).parents[1] / "data" / "configs"


def scan(head: float, need: list[float], post_f: float, post_a: float) -> tuple[float, int]:
    return _balanced_cut_scan(head, list(itertools.accumulate(need, initial=0.0)), post_f, post_a)


def same(a: tuple[float, int], b: tuple[float, int]) -> bool:
    """Equal cut and the peak's bits (so 0.0 and -0.0, or two NaNs, are told apart or matched)."""
    return (
        a[1] == b[1]
        and math.copysign(1.0, a[0]) == math.copysign(1.0, b[0])
        and (a[0] == b[0] or (math.isnan(a[0]) and math.isnan(b[0])))
    )


def test_worked_cut() -> None:
    # layers 5, 1, 1, 1, 5 with 2 before and 3 after: k=2 gives 2+6=8 | 7+3=10, k=3 gives
    # 9 | 6+3=9 (the balanced cut), k=4 gives 10 | 8
    assert balanced_cut(2.0, [5.0, 1.0, 1.0, 1.0, 5.0], 1.0, 2.0) == (9.0, 3)
    # a tie of peaks over several cuts: zero-byte layers in the middle, the smallest cut wins
    assert balanced_cut(0.0, [4.0, 0.0, 0.0, 0.0, 4.0], 0.0, 0.0) == (4.0, 1)
    # the first card always fuller: the first cut; the second always fuller: the last cut
    assert balanced_cut(100.0, [1.0, 1.0, 1.0], 0.0, 0.0) == (101.0, 1)
    assert balanced_cut(0.0, [1.0, 1.0, 1.0], 50.0, 50.0) == (101.0, 2)


def test_every_small_integer_case_matches_the_scan() -> None:
    # every layer list of 2 to 5 layers over {0, 1, 2, 3} with heads and tails over {0, 1, 4}:
    # ties everywhere (small integers are exact in floating point)
    checked = 0
    for n in range(2, 6):
        for need in itertools.product((0.0, 1.0, 2.0, 3.0), repeat=n):
            for head, post_f, post_a in itertools.product((0.0, 1.0, 4.0), repeat=3):
                got = balanced_cut(head, list(need), post_f, post_a)
                assert same(got, scan(head, list(need), post_f, post_a)), (head, need, post_f)
                checked += 1
    assert checked == 27 * (4**2 + 4**3 + 4**4 + 4**5)


sizes = st.floats(min_value=0.0, max_value=1e15, allow_nan=False, allow_infinity=False)
small = st.integers(min_value=0, max_value=6).map(float)


@settings(max_examples=400, deadline=None)
@given(
    head=sizes | small,
    need=st.lists(sizes | small, min_size=2, max_size=80),
    post_f=sizes | small,
    post_a=sizes | small,
)
def test_bisection_matches_the_scan(
    head: float, need: list[float], post_f: float, post_a: float
) -> None:
    assert same(balanced_cut(head, need, post_f, post_a), scan(head, need, post_f, post_a))


@settings(max_examples=200, deadline=None)
@given(
    head=st.floats(),
    need=st.lists(st.floats(), min_size=2, max_size=20),
    post_f=st.floats(),
    post_a=st.floats(),
)
def test_negative_or_non_finite_bytes_fall_back_to_the_scan(
    head: float, need: list[float], post_f: float, post_a: float
) -> None:
    assert same(balanced_cut(head, need, post_f, post_a), scan(head, need, post_f, post_a))


def test_layer_kinds_of_a_reading() -> None:
    r = read_config(json.loads((CONFIGS / "deepseek-ai__DeepSeek-V3.json").read_text()))
    dense, moe = r.layer_kinds
    assert (dense.ffn, moe.ffn) == ("swiglu", "moe")
    assert r.layers == (dense,) * 3 + (moe,) * 58
    assert r.layer_params == 3 * dense.params + 58 * moe.params
    assert r.largest_layer == moe.params
    assert r.lora_dims == 3 * dense.lora_dims + 58 * moe.lora_dims
    assert (
        r.per_layer(lambda spec: float(spec.params))
        == (float(dense.params),) * 3 + (float(moe.params),) * 58
    )


@pytest.mark.parametrize(
    "name", ["deepseek-ai__DeepSeek-V3", "google__gemma-3-1b-it", "Qwen__Qwen3.5-27B"]
)
def test_figures_per_kind_are_those_of_every_layer(name: str) -> None:
    # the same reading with every layer its own object: each figure worked out layer by layer
    shared = read_config(json.loads((CONFIGS / f"{name}.json").read_text()))
    own = replace(shared, layers=tuple(copy.copy(spec) for spec in shared.layers))
    assert len(own.layer_kinds) == len(own.layers) > len(shared.layer_kinds) >= 2
    s = EstimateSettings(
        lora_base="nf4",
        extra_cards=(Card("tiny 2 GB", 2.0), Card("mini 8 GB", 8.0)),
        serve_prompt_tokens=512,
    )
    m, m_own = compute(shared, s), compute(own, s)
    assert m == m_own
    tokens = m.train_tokens
    assert m.layer_act == tuple(
        layer_activation_bytes(spec, shared, 2.0, tokens) * tokens for spec in shared.layers
    )
    assert m.layer_kv == tuple(layer_kv_bytes(spec, m.serve_tokens) for spec in shared.layers)
    assert card_table(shared, m, s) == card_table(own, m_own, s)
