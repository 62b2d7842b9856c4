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


def peft_named(config: dict[str, Any], targets: list[str]) -> int | str:
    """LoRA parameters PEFT creates at r=16 for the named `targets`, or its error's first line."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    values = {k: v for k, v in config.items() if k != "model_type"}
    cfg = transformers.AutoConfig.for_model(config["model_type"], **values)
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(cfg)
        try:
            wrapped = peft.get_peft_model(model, peft.LoraConfig(r=16, target_modules=targets))
        except ValueError as e:
            return str(e).splitlines()[0]
    return sum(p.numel() for n, p in wrapped.named_parameters() if ".lora_" in n)


NAMED = [
    ("mixtral", ["w1", "w3", "w2"]),
    ("mixtral", ["gate", "q_proj"]),
    ("mixtral", ["w2"]),
    ("deepseek_v3", ["gate_proj", "up_proj", "down_proj"]),
    ("deepseek_v3", ["down_proj", "q_a_proj"]),
    ("qwen3_next", ["gate_proj", "up_proj", "gate"]),
    ("granitemoe", ["q_proj", "o_proj"]),
    ("llama", ["gate_proj", "down_proj"]),
]


@pytest.mark.slow
@pytest.mark.parametrize(("case", "targets"), NAMED)
def test_named_targets_count_what_peft_creates(case: str, targets: list[str]) -> None:
    """Named targets in a family PEFT converts go where PEFT sends them (on the meta device):
    Mixtral's w1/w3/w2 and DeepSeek-V3's and Qwen3-Next's gate_proj/up_proj/down_proj to the fused
    experts (gate_up_proj at rank 2r), `gate` to the router, and the dense and shared-expert
    Linears of those names are then not adapted. Before, the names resolved by Linear name
    (Mixtral's w1 to nothing, DeepSeek-V3's gate_proj to the dense and shared MLPs)."""
    config = small_config(case)
    created = peft_named(config, targets)
    assert isinstance(created, int), created
    resolution, why = resolve_targets(read_config(config), config, targets, 16)
    assert resolution is not None, why
    assert resolution.unresolved == {}
    assert sum(resolution.adapter_params(t) or 0 for t in targets) == created


@pytest.mark.slow
def test_half_of_a_fused_pair_is_refused_as_peft_refuses() -> None:
    """PEFT raises for w1 without w3 (fused into gate_up_proj); the resolution says why, in one
    line, instead of adapting the w1 Linears that transformers 5 no longer has."""
    config = small_config("mixtral")
    created = peft_named(config, ["w1", "w2"])
    assert created == (
        "Cannot convert PEFT target(s) w1 without also targeting w3 because they are fused into "
        "gate_up_proj."
    )
    resolution, why = resolve_targets(read_config(config), config, ["w1", "w2"], 16)
    assert resolution is not None, why
    assert resolution.unresolved == {
        "w1": "PEFT cannot adapt w1 without also targeting w3: they are fused into the experts' "
        "gate_up_proj"
    }
    assert resolution.adapter_params("w2") == 16 * 2 * 4 * (96 + 64)  # 2 layers, 4 experts
