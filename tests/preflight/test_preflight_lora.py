"""LoRA target resolution against transformers' meta-device module tree.

`data/meta-modules-5.24.0.json` records, for every corpus config the pinned transformers builds
natively, the Linear modules of its meta-device build (`tests/preflight/metagen.py` writes it;
`--check` rebuilds all of them). The derivation must give, for every default target name and for
`all-linear`, exactly the module count and the adapter parameters (rank × (in + out)) that PEFT's
name matching finds in that build. All 54 configs are rebuilt live here (meta device, about 20 s)
to show the record is what transformers builds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tracker.estimate.params import read_config
from tracker.preflight.lora import ALL_LINEAR, resolve_targets
from tracker.preflight.settings import DEFAULT_TARGETS

CONFIGS = Path(__file__).parents[1] / "data" / "configs"
RECORD = Path(__file__).parent / "data" / "meta-modules-5.24.0.json"
META: dict[str, Any] = json.loads(RECORD.read_text())
RANK = 16


def _truth(built: dict[str, Any], target: str) -> tuple[int, int]:
    modules = params = 0
    for last, i, o, n in built["linears"]:
        if target == ALL_LINEAR or last == target:
            modules += n
            params += n * RANK * (i + o)
    return modules, params


def test_every_natively_built_corpus_config_is_recorded() -> None:
    assert len(META) == 54  # of the 65 corpus configs; the rest are remote-code families
    assert set(META) <= {p.name for p in CONFIGS.glob("*.json")}


@pytest.mark.parametrize("name", sorted(META))
def test_counts_per_target_equal_the_meta_device_build(name: str) -> None:
    config = json.loads((CONFIGS / name).read_text())
    res, why = resolve_targets(read_config(config), config, DEFAULT_TARGETS, RANK)
    assert res is not None, why
    for target in DEFAULT_TARGETS:
        assert (res.modules(target), res.adapter_params(target)) == _truth(META[name], target), (
            target
        )


def test_experts_and_linear_attention_split_the_answer() -> None:
    """Qwen3-Next: q_proj reaches the 12 full-attention layers only (0 in the 36 linear-attention
    layers), and gate_proj only the shared experts (routed experts are fused parameters)."""
    config = json.loads((CONFIGS / "Qwen__Qwen3-Next-80B-A3B-Thinking.json").read_text())
    res, _ = resolve_targets(read_config(config), config, DEFAULT_TARGETS, RANK)
    assert res is not None
    assert {k: v["modules"] for k, v in res.targets["q_proj"].items()} == {"attention.full": 12}
    assert {k: v["modules"] for k, v in res.targets["gate_proj"].items()} == {"mlp.shared": 48}
    assert {k: v["modules"] for k, v in res.targets[ALL_LINEAR].items()} == {
        "attention.full": 48,
        "attention.linear": 108,
        "mlp.shared": 192,
    }


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

    # every recorded config is rebuilt on the meta device (about 20 s for the 54)
    assert len(META) == 54
    differ = [
        name
        for name in sorted(META)
        if meta_modules(json.loads((CONFIGS / name).read_text())) != META[name]
    ]
    assert differ == []
