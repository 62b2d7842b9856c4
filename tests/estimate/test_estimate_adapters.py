"""Oracle: LoRA r=16 on all-linear adds exactly the adapter parameters PEFT creates (issue 25,
item 5), and the estimate's memory table and preflight's target resolution count the same.

PEFT 0.21.2 on transformers 5.24.0 (both pinned in the `oracle` extra) is the truth: each demo MoE
family's real config, shrunk to a few small layers and experts (a stand-in for the real sizes:
the same keys, small values), is built and wrapped by `get_peft_model(LoraConfig(r=16,
target_modules="all-linear"))`; the LoRA parameters it creates are counted, and those inside
the routed experts tell whether the fused 3-D expert parameters are adapted. A dense Llama-2
and a dense Qwen3-VL (text) stand beside them.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from tracker.estimate import estimate
from tracker.estimate.adapters import all_linear_params
from tracker.estimate.params import read_config
from tracker.preflight.lora import ALL_LINEAR, resolve_targets

REPOS = Path(__file__).resolve().parents[2] / "tracker" / "demo_data" / "repos"
SMALL = {
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "vocab_size": 128,
    "max_position_embeddings": 256,
}
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "mixtral": (
        "mistralai__Mixtral-8x7B-v0.1/syn_09_config.json",
        {"num_hidden_layers": 2, "num_local_experts": 4, "num_experts_per_tok": 2},
    ),
    "granitemoe": (
        "ibm-granite__granite-3.1-1b-a400m-instruct/02_8290d32f_config.json",
        {"num_hidden_layers": 2, "num_local_experts": 4, "num_experts_per_tok": 2},
    ),
    "deepseek_v3": (
        "deepseek-ai__DeepSeek-R1/base_config.json",
        {
            "num_hidden_layers": 3,
            "first_k_dense_replace": 1,
            "num_key_value_heads": 4,
            "moe_intermediate_size": 32,
            "n_routed_experts": 4,
            "n_shared_experts": 1,
            "num_experts_per_tok": 2,
            "n_group": 1,
            "topk_group": 1,
            "q_lora_rank": 24,
            "kv_lora_rank": 16,
            "qk_nope_head_dim": 8,
            "qk_rope_head_dim": 8,
            "v_head_dim": 8,
            "quantization_config": None,
        },
    ),
    "qwen3_next": (
        "Qwen__Qwen3-Next-80B-A3B-Thinking/base_config.json",
        {
            "num_hidden_layers": 4,
            "full_attention_interval": 4,
            "layer_types": None,
            "moe_intermediate_size": 32,
            "shared_expert_intermediate_size": 48,
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "linear_num_key_heads": 2,
            "linear_num_value_heads": 4,
            "linear_key_head_dim": 8,
            "linear_value_head_dim": 8,
        },
    ),
    "llama": ("meta-llama__Llama-2-7b-hf/05_87a34353_config.json", {"num_hidden_layers": 2}),
}


def small_config(case: str) -> dict[str, Any]:
    path, extra = CASES[case]
    config = json.loads((REPOS / path).read_text())
    config.update(SMALL)
    config.update(extra)
    return {k: v for k, v in config.items() if v is not None}


def peft_count(config: dict[str, Any]) -> tuple[int, bool]:
    """(LoRA parameters PEFT creates for all-linear at r=16, whether any sits in the experts)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    values = {k: v for k, v in config.items() if k != "model_type"}
    cfg = transformers.AutoConfig.for_model(config["model_type"], **values)
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = transformers.AutoModelForCausalLM.from_config(cfg)
        wrapped = peft.get_peft_model(model, peft.LoraConfig(r=16, target_modules="all-linear"))
    lora = [(n, p.numel()) for n, p in wrapped.named_parameters() if ".lora_" in n]
    return sum(n for _, n in lora), any(".experts." in name for name, _ in lora)


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_all_linear_counts_what_peft_creates(case: str) -> None:
    config = small_config(case)
    created, experts_adapted = peft_count(config)
    reading = read_config(config)
    found = all_linear_params(reading, config, 16)
    assert found is not None
    ours, experts = found
    assert ours == created
    moe = case != "llama"
    assert experts == (None if not moe else "adapted" if experts_adapted else "not adapted")
    # the memory table and preflight's resolution say the same
    assert estimate(config).memory.lora_adapter_params == created
    resolution, why = resolve_targets(reading, config, [ALL_LINEAR], 16)
    assert resolution is not None, why
    assert resolution.adapter_params(ALL_LINEAR) == created


def test_which_families_adapt_their_experts() -> None:
    """PEFT maps all-linear onto the fused experts for Mixtral, DeepSeek-V3 and Qwen3-Next (their
    v4 expert Linears are converted in transformers 5), never for granitemoe."""
    expected = {
        "mixtral": "adapted",
        "deepseek_v3": "adapted",
        "qwen3_next": "adapted",
        "granitemoe": "not adapted",
        "llama": None,
    }
    for case, want in expected.items():
        config = small_config(case)
        found = all_linear_params(read_config(config), config, 16)
        assert found is not None and found[1] == want, case
