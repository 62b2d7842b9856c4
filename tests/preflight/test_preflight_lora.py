"""LoRA target resolution against transformers' meta-device module tree.

`data/meta-modules-5.24.0.json` records, for every corpus config the pinned transformers builds
natively, the Linear modules of its meta-device build (`tests/preflight/metagen.py` writes it;
`--check` rebuilds all of them). The derivation must give, for every default target name and for
`all-linear`, exactly the module count and the adapter parameters (rank × (in + out)) that PEFT's
name matching finds in that build. All 56 configs are rebuilt live here (meta device, about 25 s)
to show the record is what transformers builds.

Kimi-K2.5 is built through the Auto mapping of its `kimi_k25` model_type: its `architectures` says
`KimiK25ForConditionalGeneration` (the remote code's name), transformers 5.24.0 exports the same
model as `Kimi_K25ForConditionalGeneration`. Kimi-K2-Instruct's model_type `kimi_k2` is remote
code, but its `architectures` names `DeepseekV3ForCausalLM`, a transformers class: it is built with
that class and DeepseekV3Config, the native build of the same weights. Left out, because
transformers 5.24.0 does not register their model_type (remote code only; pinned in
`test_the_configs_left_out_and_why`): Qwen-72B and Qwen-7B-Chat (`qwen`), chatglm2-6b (`chatglm`),
MiMo-7B-Base (`mimo`), internlm-20b (`internlm`), Phi-4-reasoning-vision-15B (`phi4-siglip`),
Kimi-K3 (`kimi_k3`), Llama-3_3-Nemotron-Super-49B-v1 (`nemotron-nas`) and falcon-40b (`RefinedWeb`:
transformers registers Falcon as `falcon` only, and nothing in 5.24.0 maps RW's name onto it).
Those are read as remote code (`census_lora`, its own tests).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tracker.estimate.adapters import FUSED_NAMES, TAKEN, peft_fused
from tracker.estimate.params import read_config
from tracker.preflight.lora import ALL_LINEAR, resolve_targets
from tracker.preflight.settings import DEFAULT_TARGETS

CONFIGS = Path(__file__).parents[1] / "data" / "configs"
RECORD = Path(__file__).parent / "data" / "meta-modules-5.24.0.json"
META: dict[str, Any] = json.loads(RECORD.read_text())
RANK = 16


def _truth(
    built: dict[str, Any], target: str, taken: frozenset[str] = frozenset()
) -> tuple[int, int]:
    """Modules and adapter parameters of `target` among the build's Linears; `taken`: the
    Linear names PEFT maps onto the fused experts for all-linear (no longer adapted)."""
    modules = params = 0
    for last, i, o, n in built["linears"]:
        if (target == ALL_LINEAR and last not in taken) or last == target:
            modules += n
            params += n * RANK * (i + o)
    return modules, params


FUSED_KINDS = ("mlp.experts", "mlp.router")
"""Where all-linear reaches fused parameters in the families PEFT converts (no Linear modules
there: tests/estimate/test_estimate_adapters.py checks them against PEFT itself)."""


LEFT_OUT = {
    "Qwen__Qwen-72B.json": "model_type 'qwen' is not registered in transformers 5.24.0",
    "Qwen__Qwen-7B-Chat.json": "model_type 'qwen' is not registered in transformers 5.24.0",
    "THUDM__chatglm2-6b.json": "model_type 'chatglm' is not registered in transformers 5.24.0",
    "XiaomiMiMo__MiMo-7B-Base.json": "model_type 'mimo' is not registered in transformers 5.24.0",
    "internlm__internlm-20b.json": "model_type 'internlm' is not registered in transformers 5.24.0",
    "microsoft__Phi-4-reasoning-vision-15B.json": (
        "model_type 'phi4-siglip' is not registered in transformers 5.24.0"
    ),
    "moonshotai__Kimi-K3.json": "model_type 'kimi_k3' is not registered in transformers 5.24.0",
    "nvidia__Llama-3_3-Nemotron-Super-49B-v1.json": (
        "model_type 'nemotron-nas' is not registered in transformers 5.24.0"
    ),
    "tiiuae__falcon-40b.json": "model_type 'RefinedWeb' is not registered in transformers 5.24.0",
}


def test_every_natively_built_corpus_config_is_recorded() -> None:
    assert len(META) == 56  # of the 65 corpus configs; the rest are remote-code families
    assert set(META) <= {p.name for p in CONFIGS.glob("*.json")}
    assert set(META) | set(LEFT_OUT) == {p.name for p in CONFIGS.glob("*.json")}
    assert not set(META) & set(LEFT_OUT)


def test_the_configs_left_out_and_why() -> None:
    """Every corpus config transformers does not build natively, with the reason metagen gives."""
    pytest.importorskip("transformers")
    from tests.preflight.metagen import left_out

    assert left_out() == LEFT_OUT


@pytest.mark.parametrize("name", sorted(META))
def test_counts_per_target_equal_the_meta_device_build(name: str) -> None:
    config = json.loads((CONFIGS / name).read_text())
    res, why = resolve_targets(read_config(config), config, DEFAULT_TARGETS, RANK)
    assert res is not None, why
    pattern = peft_fused(config)
    for target in DEFAULT_TARGETS:
        if target == ALL_LINEAR and pattern is not None:
            # the Linears all-linear still reaches, beside the fused experts and the router
            slots = [v for k, v in res.targets[target].items() if k not in FUSED_KINDS]
            got = (sum(v["modules"] for v in slots), sum(v["adapter_params"] for v in slots))
            assert got == _truth(META[name], target, TAKEN[pattern] | {"gate"}), target
            continue
        if pattern is not None and target in FUSED_NAMES[pattern]:
            continue  # PEFT sends it to the fused experts: checked below, and against PEFT
        assert (res.modules(target), res.adapter_params(target)) == _truth(META[name], target), (
            target
        )
    named = [t for t in DEFAULT_TARGETS if pattern is not None and t in FUSED_NAMES[pattern]]
    if pattern is not None and named:  # Mixtral's w1/w2/w3 are not among the default targets
        # the v4 expert names PEFT converts reach the fused experts only (none of the dense or
        # shared Linears of those names), and together exactly what all-linear adds there
        assert {k for t in named for k in res.targets[t]} == {"mlp.experts"}
        assert (
            sum(res.adapter_params(t) or 0 for t in named)
            == (res.targets[ALL_LINEAR]["mlp.experts"]["adapter_params"])
        )


def test_experts_and_linear_attention_split_the_answer() -> None:
    """Qwen3-Next: q_proj reaches the 12 full-attention layers only (0 in the 36 linear-attention
    layers), and gate_proj (as PEFT converts it) only the 48 layers' fused routed experts, half
    of their gate_up_proj, not the shared experts' Linears of that name.
    all-linear is what PEFT adapts: it maps gate/up/down_proj onto the 48 layers' fused experts
    (two parameters each) and their routers, so of the shared experts only shared_expert_gate
    stays a Linear it adapts."""
    config = json.loads((CONFIGS / "Qwen__Qwen3-Next-80B-A3B-Thinking.json").read_text())
    res, _ = resolve_targets(read_config(config), config, DEFAULT_TARGETS, RANK)
    assert res is not None
    assert {k: v["modules"] for k, v in res.targets["q_proj"].items()} == {"attention.full": 12}
    assert {k: v["modules"] for k, v in res.targets["gate_proj"].items()} == {"mlp.experts": 48}
    assert {k: v["modules"] for k, v in res.targets[ALL_LINEAR].items()} == {
        "attention.full": 48,
        "attention.linear": 108,
        "mlp.shared": 48,
        "mlp.router": 48,
        "mlp.experts": 96,
    }


def test_kimi_k25_splits_vision_tower_from_language_model() -> None:
    """Kimi-K2.5: q/k/v_proj reach only the 27 MoonViT layers (the language model's MLA attention
    has q_a_proj / q_b_proj / kv_a_proj_with_mqa / kv_b_proj instead), o_proj only the 61
    language-model layers; all-linear adds the tower's proj/fc1/fc2 and the projector's
    in_proj/out_proj (27 × 6 + 2 = 164 vision modules)."""
    config = json.loads((CONFIGS / "moonshotai__Kimi-K2.5.json").read_text())
    res, _ = resolve_targets(read_config(config), config, DEFAULT_TARGETS, RANK)
    assert res is not None
    assert {k: v["modules"] for k, v in res.targets["q_proj"].items()} == {"vision": 27}
    assert res.adapter_params("q_proj") == 27 * RANK * (1152 + 1152)  # 995,328
    assert {k: v["modules"] for k, v in res.targets["o_proj"].items()} == {"attention.full": 61}
    assert {k: v["modules"] for k, v in res.targets["gate_proj"].items()} == {
        "mlp.dense": 1,
        "mlp.shared": 60,
    }
    assert {k: v["modules"] for k, v in res.targets[ALL_LINEAR].items()} == {
        "attention.full": 61 * 5,
        "mlp.dense": 3,
        "mlp.shared": 60 * 3,
        "vision": 27 * 6 + 2,
    }
    assert res.targets[ALL_LINEAR]["vision"]["adapter_params"] == RANK * (
        27 * (4 * (1152 + 1152) + 2 * (1152 + 4304)) + (4608 + 4608) + (4608 + 7168)
    )


def test_an_unknown_family_gets_no_resolution_and_says_why() -> None:
    config = json.loads((CONFIGS / "THUDM__chatglm2-6b.json").read_text())
    res, why = resolve_targets(read_config(config), config, DEFAULT_TARGETS, RANK)
    assert res is None
    assert why == "model_type 'chatglm' has no module-name table"


@pytest.mark.slow
def test_the_recorded_module_names_are_what_transformers_builds() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from tests.preflight.metagen import meta_modules

    # every recorded config is rebuilt on the meta device (about 25 s for the 56)
    assert len(META) == 56
    differ = [
        name
        for name in sorted(META)
        if meta_modules(json.loads((CONFIGS / name).read_text())) != META[name]
    ]
    assert differ == []


def test_the_installed_cli_prints_the_kimi_k25_vision_split(tmp_path: Path) -> None:
    """`tracker preflight DIR` (the executable, as a process) on a directory holding Kimi-K2.5's
    config.json: each target's modules split between the vision tower and the language model."""
    from tests.preflight.test_preflight_census_cli import _run

    model = tmp_path / "Kimi-K2.5"
    model.mkdir()
    (model / "config.json").write_bytes((CONFIGS / "moonshotai__Kimi-K2.5.json").read_bytes())
    done = _run(tmp_path, str(model))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    start = lines.index("LoRA targets (rank 16):")
    assert lines[start + 1 : start + 9] == [
        "  q_proj: 27 modules (vision 27); 995,328 adapter parameters",
        "  k_proj: 27 modules (vision 27); 995,328 adapter parameters",
        "  v_proj: 27 modules (vision 27); 995,328 adapter parameters",
        "  o_proj: 61 modules (attention.full 61); 14,991,360 adapter parameters",
        "  gate_proj: 61 modules (mlp.dense 1, mlp.shared 60); 9,256,960 adapter parameters",
        "  up_proj: 61 modules (mlp.dense 1, mlp.shared 60); 9,256,960 adapter parameters",
        "  down_proj: 61 modules (mlp.dense 1, mlp.shared 60); 9,256,960 adapter parameters",
        "  all-linear: 652 modules (attention.full 305, mlp.dense 3, mlp.shared 180, vision 164); "
        "97,829,376 adapter parameters",
    ]
    data = json.loads(_run(tmp_path, str(model), "--json").stdout)
    assert data["lora_error"] is None
    assert data["lora"]["targets"]["q_proj"] == {
        "vision": {"modules": 27, "adapter_params": 995_328}
    }
