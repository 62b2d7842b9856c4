"""Findings of ESTIMATES.md §4 on real corpus configs, each with id, level, evidence and fix."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.estimate import EstimateSettings, estimate
from tracker.shared.domain import SafetensorsHeader, TensorInfo

CONFIGS = Path(__file__).parents[1] / "data" / "configs"
LEVELS = {"info", "warning", "error"}


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CONFIGS / f"{name}.json").read_text())
    return data


def found(config: dict[str, Any], **kwargs: Any) -> list[dict[str, str]]:
    result: list[dict[str, str]] = estimate(config, **kwargs).to_json()["findings"]
    return result


def ids(config: dict[str, Any], **kwargs: Any) -> list[tuple[str, str]]:
    return [(f["id"], f["level"]) for f in found(config, **kwargs)]


def test_corpus_configs_raise_no_warnings_or_errors() -> None:
    """The published configs are consistent: no finding above info on any of them."""
    for path in sorted(CONFIGS.glob("*.json")):
        for f in found(json.loads(path.read_text())):
            assert set(f) == {"id", "level", "evidence", "fix"}, path.name
            assert f["level"] in LEVELS and f["evidence"] and f["fix"], path.name
            assert f["level"] == "info", (path.name, f)


def test_context_past_learned_position_table_is_an_error() -> None:
    cfg = load("openai-community__gpt2-xl")
    cfg["n_ctx"] = 2048
    (f,) = [f for f in found(cfg) if f["level"] == "error"]
    assert f["id"] == "context-exceeds-positions"
    assert "n_ctx 2048 > n_positions 1024" in f["evidence"]
    assert "learned position table has 1024 rows" in f["evidence"]


def test_context_past_rotary_positions_is_a_warning() -> None:
    cfg = load("meta-llama__Llama-2-7b-hf")
    assert ids(cfg) == []
    cfg["seq_length"] = 8192
    (f,) = found(cfg)
    assert (f["id"], f["level"]) == ("context-exceeds-positions", "warning")
    assert "seq_length 8192 > max_position_embeddings 4096" in f["evidence"]


def test_alibi_and_sliding_window_set_no_position_limit() -> None:
    bloom = load("bigscience__bloom-560m")
    bloom["seq_length"] = 1_000_000
    assert "context-exceeds-positions" not in [i for i, _ in ids(bloom)]
    gemma = load("google__gemma-3-1b-it")  # window 512 < max_position_embeddings 32768
    gemma["sliding_window"] = 65536  # wider than the context: never slides, not a finding
    assert ids(gemma) == []


def test_serving_context_longer_than_supported_is_info() -> None:
    cfg = load("openai-community__gpt2-xl")
    (f,) = found(cfg)
    assert (f["id"], f["level"]) == ("context-exceeds-positions", "info")
    assert "serve_seq_len 4096" in f["evidence"] and "n_positions 1024" in f["evidence"]
    assert found(cfg, settings=replace(EstimateSettings(), serve_seq_len=1024)) == []


def test_rope_scaling_product_must_reach_max_positions() -> None:
    cfg = load("moonshotai__Kimi-K2-Instruct")  # yarn 32 × 4096 = 131072 = max positions
    assert "rope-scaling-inconsistent" not in [i for i, _ in ids(cfg)]
    cfg["max_position_embeddings"] = 262144
    (f,) = [f for f in found(cfg) if f["id"] == "rope-scaling-inconsistent"]
    assert f["level"] == "warning"
    assert "32 × original 4096 = 131072 < max_position_embeddings 262144" in f["evidence"]


@pytest.mark.parametrize(
    ("factor", "fragment"),
    [("8", "factor '8'"), (0.5, "factor 0.5"), (None, "factor None")],
)
def test_rope_scaling_factor_must_be_a_number_at_least_1(factor: Any, fragment: str) -> None:
    cfg = load("meta-llama__Meta-Llama-3.1-8B")  # llama3 8 × 8192 < 131072 is published: fine
    assert ids(cfg) == []
    cfg["rope_scaling"]["factor"] = factor
    (f,) = found(cfg)
    assert f["id"] == "rope-scaling-inconsistent" and fragment in f["evidence"]


def test_rope_original_longer_than_max_positions() -> None:
    cfg = load("meta-llama__Meta-Llama-3.1-8B")
    cfg["max_position_embeddings"] = 4096
    (f,) = found(cfg)
    assert "original_max_position_embeddings 8192 > max_position_embeddings 4096" in f["evidence"]


def test_longrope_factor_lists_match_rotary_dims() -> None:
    cfg = load("microsoft__Phi-3-mini-128k-instruct")  # head_dim 96: 48 factors each
    assert [i for i, _ in ids(cfg)] == ["custom-code"]
    cfg["rope_scaling"]["long_factor"] = cfg["rope_scaling"]["long_factor"][:40]
    (f,) = [f for f in found(cfg) if f["id"] == "rope-scaling-inconsistent"]
    assert "long_factor has 40 entries, rotary dims / 2 = 48" in f["evidence"]
    cfg["partial_rotary_factor"] = 0.5  # rotary on half of head_dim: 24 factors each
    assert len([i for i, _ in ids(cfg) if i == "rope-scaling-inconsistent"]) == 2
    cfg["partial_rotary_factor"] = 1e308  # nonsense: read as 1, no overflow
    assert len([i for i, _ in ids(cfg) if i == "rope-scaling-inconsistent"]) == 1


def test_head_dim_times_heads_must_equal_hidden_where_derived() -> None:
    cfg = load("openai-community__gpt2-xl")
    cfg["n_head"] = 24  # 1600 / 24 is not whole: GPT-2 attention cannot be built
    (f,) = [f for f in found(cfg) if f["id"] == "head-dim-mismatch"]
    assert f["level"] == "error"
    assert "heads 24 × head_dim 66 = 1584 ≠ hidden 1600" in f["evidence"]
    # Qwen3 sets head_dim explicitly (16 × 128 = 2048 ≠ 1024): allowed there.
    assert ids(load("Qwen__Qwen3-0.6B")) == []


def _header(tensors: dict[str, tuple[str, int]]) -> dict[str, SafetensorsHeader]:
    size = {"BF16": 2, "F16": 2, "F32": 4, "F8_E4M3": 1}
    infos = {k: TensorInfo(d, (n,), n * size[d]) for k, (d, n) in tensors.items()}
    return {"model.safetensors": SafetensorsHeader(infos)}


def test_torch_dtype_against_the_census() -> None:
    cfg = load("Qwen__Qwen3-0.6B")  # torch_dtype bfloat16
    assert cfg["torch_dtype"] == "bfloat16"
    same = _header({"a": ("BF16", 900), "b": ("F32", 100)})
    assert ids(cfg, headers=same) == []
    other = _header({"a": ("F16", 900), "b": ("BF16", 100)})
    (f,) = found(cfg, headers=other)
    assert (f["id"], f["level"]) == ("dtype-disagrees", "warning")
    assert "torch_dtype bfloat16 but most stored elements are F16 (900 of 1,000)" in f["evidence"]
    fp8 = _header({"w": ("F8_E4M3", 900), "n": ("BF16", 100), "w_scale": ("F32", 9)})
    assert [i for i, _ in ids(cfg, headers=fp8)] == ["dtype-disagrees"]
    quantized = copy.deepcopy(cfg)
    quantized["quantization_config"] = {"quant_method": "fp8"}
    assert ids(quantized, headers=fp8) == []


def test_vocab_smaller_than_tokenizer_highest_id() -> None:
    cfg = load("Qwen__Qwen3-0.6B")
    vocab = cfg["vocab_size"]
    assert ids(cfg, max_token_id=vocab - 1) == []
    (f,) = found(cfg, max_token_id=vocab)
    assert (f["id"], f["level"]) == ("vocab-too-small", "error")
    assert f"vocab_size {vocab} but the tokenizer's highest token id is {vocab}" in f["evidence"]
    assert str(vocab + 1) in f["fix"]


def test_huge_linear_names_the_component() -> None:
    cfg = load("Qwen__Qwen3-0.6B")
    cfg["intermediate_size"] = 1_000_000  # 1024 × 1e6 > 1e9
    (f,) = found(cfg)
    assert (f["id"], f["level"]) == ("huge-linear-params", "warning")
    assert "dense MLP linear holds 1,024,000,000" in f["evidence"]


JSONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
ROPE_KEYS = st.sampled_from(
    ["rope_type", "type", "factor", "original_max_position_embeddings", "long_factor"]
)


@settings(max_examples=150, deadline=None)
@given(
    rope=st.dictionaries(ROPE_KEYS, JSONISH | st.sampled_from(["linear", "yarn", "longrope"])),
    extra=st.dictionaries(
        st.sampled_from(["seq_length", "n_ctx", "model_max_length", "partial_rotary_factor"]),
        JSONISH,
    ),
    max_id=st.none() | st.integers(0, 10**12),
)
def test_findings_never_crash_on_odd_values(
    rope: dict[str, Any], extra: dict[str, Any], max_id: int | None
) -> None:
    cfg = load("microsoft__Phi-3-mini-128k-instruct") | extra | {"rope_scaling": rope}
    for f in found(cfg, max_token_id=max_id):
        assert set(f) == {"id", "level", "evidence", "fix"} and f["level"] in LEVELS
