"""Per-card fit (ESTIMATES.md §2): largest batch at VRAM/headroom, borderline, two-card split.

For each card and setup (full fine-tune, LoRA, serving): batch = floor((VRAM/1.15 − fixed) /
per-sample), "does not fit at batch 1" as batch 0; borderline when batch ≥ 1 but the
conservative peak (batch-1 estimate × 1.43) exceeds the card; where batch 1 does not fit, the
most balanced contiguous cut of the layers over two cards such that each holds its part at
batch 1 (embeddings and towers on the first card, head and logits on the second).
"""

from __future__ import annotations

import bisect
import itertools
import math
import operator

from tracker.estimate.memory import GB, Memory, overhead, state_bytes
from tracker.estimate.reading import Reading
from tracker.estimate.settings import Card, EstimateSettings
from tracker.shared.estimate_values import CardFit, Fit

SETUPS = ("full_finetune", "lora", "serve")
SETUP_WORDS = {"full_finetune": "full fine-tune", "lora": "LoRA", "serve": "serving"}


def _fit(
    batch: int,
    borderline: bool = False,
    split: tuple[int, int] | None = None,
    shards: int = 1,
    needs: int = 0,
) -> Fit:
    """One setup on one card, with its summary in words. `split`: layers per card when two cards
    are needed; `shards`: the cards the setup is sharded over (settings `sharding` / `shards`);
    `needs`: where no two-card split works, the fewest cards sharded (FSDP / TP) at batch 1."""
    on = f" per card on {shards} cards" if shards > 1 else ""
    if batch >= 1:
        words = f"batch {batch}{on}"
        if borderline:
            words += " (borderline: measure one step first)"
    elif split is not None:
        words = f"2 cards at batch 1 ({split[0]} + {split[1]} layers)"
    elif shards > 1:
        words = f"does not fit{on} at batch 1"
    elif needs:
        how = "tensor parallel" if needs < 0 else "FSDP"
        words = f"does not fit on 2 cards; {abs(needs)} cards with {how} at batch 1"
    else:
        words = "does not fit on 2 cards"
    return Fit(batch, borderline, split, words, len(split or ()))


def _parts(
    r: Reading, m: Memory, s: EstimateSettings, setup: str
) -> tuple[float, tuple[float, ...], float, float, tuple[float, ...], float]:
    """(pre fixed, per-layer fixed, post fixed, pre per-sample, per-layer per-sample, post per-sample)."""
    pre_params = r.total - r.layer_params - r.head_params
    if setup == "full_finetune":
        k = m.full_bytes_per_param
        fixed = r.per_layer(lambda spec: spec.params * k)
        return pre_params * k, fixed, r.head_params * k, 0.0, m.layer_act, m.logits_act
    if setup == "lora":
        k = m.lora_bytes_per_param
        total_dims = r.lora_dims or 1
        adapter, per_adapter = m.lora_adapter_params, s.lora_adapter_bytes_per_param
        fixed = r.per_layer(
            lambda spec: spec.params * k + adapter * (spec.lora_dims / total_dims) * per_adapter
        )
        rest = m.lora_rest_bytes_per_param
        return pre_params * rest, fixed, r.head_params * rest, 0.0, m.layer_act, m.logits_act
    k = m.serve_bytes_per_param
    fixed = r.per_layer(lambda spec: spec.params * k)
    rest = m.serve_rest_bytes_per_param
    return pre_params * rest, fixed, r.head_params * rest, 0.0, m.layer_kv, 0.0


def _totals(m: Memory, setup: str) -> tuple[float, float]:
    if setup == "full_finetune":
        return m.full_fixed, m.act_per_sample
    if setup == "lora":
        return m.lora_fixed, m.act_per_sample
    return m.serve_fixed, m.serve_per_sequence


def fit(
    r: Reading,
    m: Memory,
    s: EstimateSettings,
    card: Card,
    setup: str,
    best_cuts: dict[str, tuple[float, int] | None] | None = None,
) -> Fit:
    """The fit of `setup` on `card`, as the report's Fit (with its summary in words);
    `best_cuts` caches `best_cut` per setup across cards."""
    budget = card.vram_gb * GB / s.headroom
    fixed, per_sample = _totals(m, setup)
    if per_sample <= 0:
        batch = 1_000_000 if fixed <= budget else 0
    else:
        batch = max(0, math.floor((budget - fixed) / per_sample)) if fixed < budget else 0
    batch = min(batch, 1_000_000)
    training = m.shards if s.sharding != "none" else 1
    shards = m.serve_shards if setup == "serve" else training
    if batch >= 1:
        borderline = (fixed + per_sample) * s.borderline_factor > card.vram_gb * GB
        return _fit(batch, borderline, shards=shards)
    if shards > 1:
        return _fit(0, shards=shards)
    if best_cuts is None:
        best_cuts = {}
    if setup not in best_cuts:
        best_cuts[setup] = best_cut(r, m, s, setup)
    best = best_cuts[setup]
    if best is None or best[0] > budget:
        return _fit(0, needs=min_cards(r, m, s, budget, setup))
    n = len(r.layers)
    return _fit(0, split=(best[1], n - best[1]))


MAX_CARDS = 1024


def min_cards(r: Reading, m: Memory, s: EstimateSettings, budget: float, setup: str) -> int:
    """The fewest cards of `budget` bytes that hold `setup` at batch 1 sharded: FSDP / ZeRO-3 for
    training (weights, gradients and optimizer state split, two layers gathered, activations
    whole on each card), tensor parallel for serving (weights and KV split), as a negative
    number for serving; 0 when even MAX_CARDS cards do not. Per card that is A / n + B."""
    largest = r.largest_layer
    if setup == "serve":
        a, b = m.serve_fixed + m.serve_per_sequence, 0.0
    elif setup == "full_finetune":
        gather = 2 * largest * state_bytes(s)[0] * overhead(s)
        a, b = m.full_fixed, gather + m.act_per_sample
    else:
        a, b = m.lora_fixed, 2 * largest * m.lora_bytes_per_param + m.act_per_sample
    if b >= budget:
        return 0
    n = max(3, math.ceil(a / (budget - b)))
    if n > MAX_CARDS:
        return 0
    return -n if setup == "serve" else n


def best_cut(r: Reading, m: Memory, s: EstimateSettings, setup: str) -> tuple[float, int] | None:
    """(peak of the fuller card, layers on the first card) of the most balanced two-card cut.

    The cut k (1 ≤ k < layers) minimising max(first card, second card) at batch 1, the smallest
    such k on ties; None with fewer than 2 layers. A card fits the split iff that peak ≤ its
    budget: any cut feasible on the card has a peak ≥ the minimum, so the minimiser is also the
    most balanced feasible cut, whatever the card.
    """
    n = len(r.layers)
    if n < 2:
        return None
    pre_f, lay_f, post_f, pre_a, lay_a, post_a = _parts(r, m, s, setup)
    if len(lay_f) != len(lay_a):
        raise ValueError(f"{len(lay_f)} layers but {len(lay_a)} per-sample figures")
    need = list(map(operator.add, lay_f, lay_a))
    return balanced_cut(pre_f + pre_a, need, post_f, post_a)


def balanced_cut(head: float, need: list[float], post_f: float, post_a: float) -> tuple[float, int]:
    """(peak, k) of `best_cut` for layers needing `need` (at least two), `head` bytes before them
    on the first card and `post_f` + `post_a` after them on the second.

    With every need finite and ≥ 0 the first card's bytes, head + prefix[k], never decrease in k
    and the second's, last − prefix[k] + post_f + post_a, never increase (float rounding is
    monotone, so this holds for the computed values too). So the minimum of their maximum is at
    k*, the first k where the first card holds at least as much as the second, or at the
    earliest k holding k* − 1's second-card figure; both found by bisection, each figure
    computed exactly as `_balanced_cut_scan` computes it. Anything else (negative or
    non-finite bytes) is left to the scan.
    """
    prefix = list(itertools.accumulate(need, initial=0.0))
    n = len(need)
    last = prefix[n]
    if not (math.isfinite(head + last + post_f + post_a) and min(need) >= 0):
        return _balanced_cut_scan(head, prefix, post_f, post_a)
    # the first card's and the second's bytes at cut k are head + prefix[k] and
    # last - prefix[k] + post_f + post_a, spelled out in each key (a key runs ~log2(n) times)
    # k* (n when the first card holds less than the second at every cut)
    k_star = 1 + bisect.bisect_left(
        range(1, n), True, key=lambda k: head + prefix[k] >= last - prefix[k] + post_f + post_a
    )
    best: tuple[float, int] | None = None
    if k_star > 1:
        # below k* the peak is the second card's, which never increases: its least value is
        # at k* − 1, and the earliest cut with that value wins ties
        low = last - prefix[k_star - 1] + post_f + post_a
        k = 1 + bisect.bisect_left(
            range(1, k_star - 1), True, key=lambda k: last - prefix[k] + post_f + post_a <= low
        )
        best = (last - prefix[k] + post_f + post_a, k)
    if k_star < n:
        # from k* on the peak is the first card's, which never decreases: least at k*
        a, b = head + prefix[k_star], last - prefix[k_star] + post_f + post_a
        worst = a if a > b else b
        if best is None or worst < best[0]:
            best = (worst, k_star)
    assert best is not None  # n ≥ 2: at least one of the two ranges is not empty
    return best


def _balanced_cut_scan(
    head: float, prefix: list[float], post_f: float, post_a: float
) -> tuple[float, int]:
    """`balanced_cut` by trying every cut (prefix: the layers' running sums, from 0.0)."""
    n = len(prefix) - 1
    last = prefix[n]
    best: tuple[float, int] | None = None
    for k in range(1, n):
        first = head + prefix[k]
        second = last - prefix[k] + post_f + post_a
        worst = first if first > second else second
        if best is None or worst < best[0]:
            best = (worst, k)
    assert best is not None
    return best


def card_table(
    r: Reading, m: Memory, s: EstimateSettings, upcast: Memory | None = None
) -> tuple[CardFit, ...]:
    """The §5 `cards` list: one entry per configured card with each setup's fit; `upcast`, the
    memory of a quantized checkpoint served upcast to bf16, adds that serving row."""
    out: list[CardFit] = []
    best_cuts: dict[str, tuple[float, int] | None] = {}
    upcast_cuts: dict[str, tuple[float, int] | None] = {}
    for card in s.all_cards:
        fits = {setup: fit(r, m, s, card, setup, best_cuts) for setup in SETUPS}
        out.append(
            CardFit(
                card.name,
                card.vram_gb,
                fits["full_finetune"],
                fits["lora"],
                fits["serve"],
                None if upcast is None else fit(r, upcast, s, card, "serve", upcast_cuts),
            )
        )
    return tuple(out)
