"""Serve what users serve (issue 25, item 4): serving weights follow the checkpoint as shipped,
whether or not the count is verified, and `tracker estimate --json` and `tracker preflight --json`
(the installed CLI, as processes) agree on one number.

Kimi-K3's checkpoint (`kimi_k3_checkpoint`: headers of its MXFP4 layout built from its real
config) holds 1,560,726,660,224 bytes (its index's total_size): both say 1,560.7 GB as shipped.
With one shard's file missing, the census (and so the verdict) changes, and nothing else: the
serving weights, the card fit and preflight's capacity stay the index's bytes.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from kimi_k3_checkpoint import write_checkpoint

TRACKER = Path(sys.executable).with_name("tracker")
TOTAL_SIZE = 1_560_726_660_224
SHARDS = 64


def _cli(*args: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    done = subprocess.run(
        [str(TRACKER), *args], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


@pytest.fixture(scope="module")
def kimi(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The full checkpoint, and a copy whose shard 17 is missing (the others hard links)."""
    root = tmp_path_factory.mktemp("kimi-k3")
    full = root / "full"
    write_checkpoint(full, SHARDS)
    missing = root / "missing"
    missing.mkdir()
    dropped = f"model-00017-of-{SHARDS:05d}.safetensors"
    for p in full.iterdir():
        if p.name != dropped:
            os.link(p, missing / p.name)
    return full, missing


@pytest.mark.slow
def test_kimi_k3_serves_its_mxfp4_bytes_and_a_missing_shard_changes_only_the_verdict(
    kimi: tuple[Path, Path],
) -> None:
    full, missing = kimi
    est = _cli("estimate", str(full / "config.json"), "--json")
    pre = _cli("preflight", str(full), "--json")
    m = est["memory_gb"]
    assert est["checkpoint"]["bytes"] == TOTAL_SIZE  # every shard's header read
    assert est["verification"]["status"] == "verified"
    assert (m["serve_weights"], m["serve_weights_source"]) == (1560.727, "checkpoint")
    assert m["serve_weights_format"].endswith("(MXFP4 (4-bit floats, a scale per 32))")
    assert pre["capacity"]["weights_bytes"] == TOTAL_SIZE
    assert round(pre["capacity"]["weights_bytes"] / 1e9, 3) == m["serve_weights"]
    # bf16 only as the upcast row: the derived count at 2 bytes
    assert m["serve_weights_upcast"] == round(2 * est["params"]["total"] / 1e9, 3) == 5559.864
    # the fit rows from the shipped bytes: tensor parallel over the fewest H200s that hold the
    # weights, one sequence's KV cache and its prefill at 141 GB / 1.15 each
    h200 = next(c for c in est["cards"] if c["name"] == "H200 141 GB")
    need = (m["serve_weights"] + m["kv_cache"] + m["serve_prefill"]) / (141 / 1.15)
    assert h200["serve"]["summary"] == (
        f"does not fit on 2 cards; {math.ceil(need)} cards with tensor parallel at batch 1"
    )
    assert math.ceil(need) == 13
    assert h200["serve_upcast"]["summary"].endswith(" cards with tensor parallel at batch 1")
    # the frozen LoRA base is the checkpoint as shipped (QLoRA-style)
    assert m["lora_base"].startswith("as shipped: U8 + BF16 + F32")

    est2 = _cli("estimate", str(missing / "config.json"), "--json")
    pre2 = _cli("preflight", str(missing), "--json")
    assert est2["checkpoint"]["bytes"] < TOTAL_SIZE  # a shard's header is not there
    assert est2["verification"]["status"] == "unverified"
    assert "checkpoint census" in est2["verification"]["reasons"][0]
    # everything but the census and its verdict is the same
    for key in ("checkpoint", "verification"):
        est.pop(key)
        est2.pop(key)
    est.pop("source")
    est2.pop("source")
    assert est2 == est
    assert pre2["capacity"]["weights_bytes"] == pre["capacity"]["weights_bytes"] == TOTAL_SIZE
    assert pre2["capacity"]["cards"] == pre["capacity"]["cards"]


CONFIGS = Path(__file__).parents[1] / "data" / "configs"


def test_without_headers_the_quantization_config_gives_the_shipped_bytes() -> None:
    """gpt-oss-20b (MXFP4 experts, everything else bf16): from its config alone, 13.752 GB, its
    real index's total_size 13,761,264,768 bytes (/work/shared/corpus) within 0.1%; the bf16
    figure is the upcast row. Qwen3-30B-A3B-FP8: 1 byte plus an fp32 scale per 128 × 128 block
    for the layer linears, routers (`mlp.gate`, unconverted) and the rest at 2 bytes."""
    from tracker.estimate import estimate
    from tracker.estimate.params import read_config

    oss = json.loads((CONFIGS / "openai__gpt-oss-20b.json").read_text())
    m = estimate(oss).memory
    assert (m.serve_weights_source, m.serve_weights_format) == (
        "quantization_config",
        "MXFP4 (4-bit floats, a scale per 32)",
    )
    assert abs(m.serve_weights * 1e9 - 13_761_264_768) / 13_761_264_768 < 0.001
    r = read_config(oss)
    experts = r.by_component["routed_experts"]
    assert m.serve_weights == round((experts * (0.5 + 1 / 32) + (r.total - experts) * 2) / 1e9, 3)
    assert m.serve_weights_upcast == round(2 * r.total / 1e9, 3)

    fp8 = json.loads((CONFIGS / "Qwen__Qwen3-30B-A3B-FP8.json").read_text())
    r = read_config(fp8)
    converted = sum(
        r.by_component[k] for k in ("attention", "routed_experts", "dense_mlp", "shared_experts")
    )
    want = converted * (1 + 4 / (128 * 128)) + (r.total - converted) * 2
    m = estimate(fp8).memory
    assert m.serve_weights == round(want / 1e9, 3) == 31.175
    assert m.serve_weights_format == "FP8 e4m3 with 128×128 block scales"


@pytest.mark.parametrize(
    ("q", "per", "words"),
    [
        # GPTQ 4-bit, group 128: half a byte, an fp16 scale and a 4-bit zero per 128 weights
        (
            {"quant_method": "gptq", "bits": 4, "group_size": 128},
            0.5 + 2.5 / 128,
            "GPTQ 4-bit, group 128, scales and zeros",
        ),
        (
            {"quant_method": "awq", "bits": 4, "group_size": 64},
            0.5 + 2.5 / 64,
            "AWQ 4-bit, group 64, scales and zeros",
        ),
        (
            {"quant_method": "gptq", "bits": 8, "group_size": -1},
            1.0,
            "GPTQ 8-bit, one group per row, scales and zeros",
        ),
        # NF4 double-quantized: 8-bit absmax per 64 values, an fp32 constant per 256 blocks
        (
            {
                "quant_method": "bitsandbytes",
                "load_in_4bit": True,
                "bnb_4bit_quant_type": "nf4",
                "bnb_4bit_use_double_quant": True,
            },
            0.5 + 1 / 64 + 4 / (64 * 256),
            "NF4 (bitsandbytes, double-quantized)",
        ),
        (
            {"quant_method": "bitsandbytes", "load_in_4bit": True},
            0.5 + 4 / 64,
            "NF4 (bitsandbytes)",
        ),
        (
            {"quant_method": "bitsandbytes", "load_in_8bit": True},
            1.0,
            "int8 (bitsandbytes LLM.int8)",
        ),
        (
            {"quant_method": "fp8", "weight_block_size": [128, 128]},
            1 + 4 / 16384,
            "FP8 e4m3 with 128×128 block scales",
        ),
        ({"quant_method": "mxfp4"}, 0.5 + 1 / 32, "MXFP4 (4-bit floats, a scale per 32)"),
    ],
)
def test_bytes_per_quantized_weight_by_hand(q: dict[str, Any], per: float, words: str) -> None:
    from tracker.estimate.shipped import bytes_per_weight

    assert bytes_per_weight(q) == (per, words)


def test_a_quantization_method_not_known_serves_bf16_of_the_count() -> None:
    from tracker.estimate import estimate

    config = json.loads((CONFIGS / "meta-llama__Llama-2-7b-hf.json").read_text())
    config["quantization_config"] = {"quant_method": "some-new-method"}
    m = estimate(config).memory
    assert (m.serve_weights_source, m.serve_weights_format) == ("derived", "bf16")
    assert m.serve_weights_upcast is None


def test_a_quantized_checkpoint_is_the_lora_base_as_shipped_unless_lora_base_says() -> None:
    """DeepSeek-V3 (FP8 quantization_config): LoRA's frozen base is the FP8 weights as shipped,
    QLoRA-style (plus one dequantized linear in flight); `lora_base: bf16` upcasts it, and
    `serve_weights: bf16` serves the count in bf16 (no upcast row then: that is the setting)."""
    from tracker.estimate import EstimateSettings, estimate
    from tracker.estimate.memory import compute
    from tracker.estimate.params import read_config

    config = json.loads((CONFIGS / "deepseek-ai__DeepSeek-V3.json").read_text())
    shipped = estimate(config).memory
    assert shipped.lora_base == "as shipped: FP8 e4m3 with 128×128 block scales"
    upcast = estimate(config, settings=EstimateSettings(lora_base="bf16")).memory
    assert upcast.lora_base == "bf16"
    r = read_config(config)
    s = EstimateSettings()
    base = shipped.serve_weights * 1e9
    widest = max(x.moe_width or x.ffn_width for x in r.layer_kinds)
    adapters = shipped.lora_adapter_params * 16.0
    want = (base + 2.0 * r.hidden * widest + adapters) * 1.2  # mixed precision's overhead
    m = compute(r, s, serve_bytes=base, lora_base_bytes=base,
                adapter_params=shipped.lora_adapter_params)  # fmt: skip
    assert abs(m.lora_fixed - want) <= 1e-6 * want
    assert shipped.lora < upcast.lora
    served = estimate(config, settings=EstimateSettings(serve_weights="bf16")).memory
    assert served.serve_weights_source == "settings"
    assert served.serve_weights == shipped.serve_weights_upcast
    assert served.serve_weights_upcast is None
