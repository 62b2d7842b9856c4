"""Property tests of the hybrid-layout facts (ESTIMATES.md §4) and KV formulas per kind."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.estimate import estimate
from tracker.estimate.layout import decimal_ratio, mode_of_gaps, pattern


def test_kimi_style_93_layers_every_4th_plus_final() -> None:
    full = [i for i in range(93) if (i + 1) % 4 == 0] + [92]
    kinds = ["full" if i in full else "linear" for i in range(93)]
    p = pattern(kinds)
    assert (p.full, p.linear, p.period, p.ratio) == (24, 69, 4, "2.9")


@given(period=st.integers(1, 12), n=st.integers(2, 400), extra=st.booleans())
def test_period_is_mode_of_gaps(period: int, n: int, extra: bool) -> None:
    full = [i for i in range(n) if (i + 1) % period == 0]
    if extra and (n - 1) not in full:
        full.append(n - 1)
    if len([i for i in range(n) if (i + 1) % period == 0]) < 2:
        return
    assert mode_of_gaps(full) == period


@given(linear=st.integers(0, 10_000), full=st.integers(1, 10_000))
def test_ratio_is_one_decimal(linear: int, full: int) -> None:
    text = decimal_ratio(linear, full)
    assert text is not None
    assert abs(float(text) - linear / full) <= 0.05 + 1e-9
    assert text.count(".") == 1 and len(text.split(".")[1]) == 1


@given(n=st.integers(1, 300), kind=st.sampled_from(["gqa", "mha", "mqa", "mla", "sliding"]))
def test_dense_never_hybrid(n: int, kind: str) -> None:
    p = pattern([kind] * n)
    assert not p.hybrid and p.period is None and p.ratio is None and p.full == n


@settings(max_examples=40, deadline=None)
@given(
    layers=st.integers(1, 64),
    kv=st.sampled_from([1, 2, 4, 8]),
    head_dim=st.sampled_from([64, 128]),
    window=st.one_of(st.none(), st.integers(1, 8192)),
)
def test_kv_formula_gqa_and_sliding(
    layers: int, kv: int, head_dim: int, window: int | None
) -> None:
    cfg = {
        "model_type": "mistral",
        "architectures": ["MistralForCausalLM"],
        "hidden_size": 8 * head_dim,
        "num_attention_heads": 8,
        "num_key_value_heads": kv,
        "head_dim": head_dim,
        "num_hidden_layers": layers,
        "intermediate_size": 1024,
        "vocab_size": 1000,
        "max_position_embeddings": 32768,
        "sliding_window": window,
    }
    held = 4096 if window is None else min(4096, window)
    expected = layers * 2 * kv * head_dim * 2 * held
    assert estimate(cfg).to_json()["memory_gb"]["kv_cache"] == round(expected / 1e9, 3)


@settings(max_examples=30, deadline=None)
@given(layers=st.integers(1, 64), rank=st.sampled_from([256, 512]), rope=st.sampled_from([32, 64]))
def test_kv_formula_mla(layers: int, rank: int, rope: int) -> None:
    cfg = {
        "model_type": "deepseek_v3",
        "hidden_size": 1024,
        "num_attention_heads": 8,
        "num_hidden_layers": layers,
        "intermediate_size": 2048,
        "vocab_size": 1000,
        "q_lora_rank": 256,
        "kv_lora_rank": rank,
        "qk_nope_head_dim": 64,
        "qk_rope_head_dim": rope,
        "v_head_dim": 64,
        "max_position_embeddings": 8192,
    }
    assert estimate(cfg).to_json()["memory_gb"]["kv_cache"] == round(
        layers * (rank + rope) * 2 * 4096 / 1e9, 3
    )


@settings(max_examples=30, deadline=None)
@given(layers=st.integers(2, 64), interval=st.integers(2, 8))
def test_hybrid_caches_only_full_attention_layers(layers: int, interval: int) -> None:
    cfg = {
        "model_type": "qwen3_next",
        "hidden_size": 512,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "num_hidden_layers": layers,
        "intermediate_size": 1024,
        "vocab_size": 1000,
        "full_attention_interval": interval,
        "linear_num_key_heads": 2,
        "linear_key_head_dim": 32,
        "linear_num_value_heads": 4,
        "linear_value_head_dim": 32,
        "linear_conv_kernel_dim": 4,
        "num_experts": 0,
    }
    full = layers // interval
    linear = layers - full
    per_token = full * 2 * 2 * 64 * 2
    state = linear * (4 * 32 * 32 * 4 + (2 * 64 + 128) * 3 * 2)
    r = estimate(cfg).to_json()
    assert r["memory_gb"]["kv_cache"] == round((per_token * 4096 + state) / 1e9, 3)
    assert r["structure"]["pattern"]["hybrid"] is (linear > 0)
