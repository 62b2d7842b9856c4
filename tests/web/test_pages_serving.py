"""One number per setting (issue 25, items 4 and 5), where users meet them: the installed
`tracker estimate ORG/NAME --json` and `tracker preflight ORG/NAME --json` (processes, over the
session's demo store) and the repo page (HTTP + HTML) say the same.

- LoRA r=16 on all-linear: the demo's MoE repos (Mixtral-8x7B, granite-3.1-1b-a400m,
  DeepSeek-R1, Qwen3-Next-80B-A3B) get one adapter count in the estimate's memory table, in
  preflight's all-linear resolution and on the page, and the page says whether the routed
  experts' fused parameters are adapted (PEFT adapts them for Mixtral, DeepSeek-V3 and
  Qwen3-Next, not for granitemoe: tests/estimate/test_estimate_adapters.py).
- DeepSeek-R1 ships block-FP8 (its demo checkpoint: F8_E4M3 linears with F32
  `weight_scale_inv`, 163 shards, 688.6 GB): serving and its fit rows come from those bytes; the
  bf16 figure is a second row, labelled as an upcast.
"""

from __future__ import annotations

import html
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tracker.api import create_app

TRACKER = Path(sys.executable).with_name("tracker")
DEEPSEEK = "deepseek-ai/DeepSeek-R1"
MOE = {
    "mistralai/Mixtral-8x7B-v0.1": "adapted",
    "ibm-granite/granite-3.1-1b-a400m-instruct": "not adapted",
    DEEPSEEK: "adapted",
    "Qwen/Qwen3-Next-80B-A3B-Thinking": "adapted",
}


def _cli(demo_run: Any, *args: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env["TRACKER_STATE_DIR"] = str(demo_run.root / "state")
    env["TRACKER_WATCHLIST"] = str(demo_run.app.settings.watchlist)
    done = subprocess.run(
        [str(TRACKER), *args], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def _value(page: str, id_: str) -> float:
    m = re.search(rf'id="{id_}" data-value="([0-9.]+)"', page)
    assert m, f"no #{id_} on the page"
    return float(m.group(1))


@pytest.fixture(scope="module")
def answers(demo_run: Any) -> dict[str, tuple[dict[str, Any], dict[str, Any], str]]:
    """(estimate --json, preflight --json, page) of each MoE repo's head revision."""
    client = TestClient(create_app(demo_run.app))
    out = {}
    for repo in MOE:
        page = client.get(f"/repos/{repo}")
        assert page.status_code == 200, repo
        out[repo] = (
            _cli(demo_run, "estimate", repo, "--json"),
            _cli(demo_run, "preflight", repo, "--json"),
            page.text,
        )
    return out


@pytest.mark.parametrize("repo", sorted(MOE))
def test_one_lora_adapter_count_across_estimate_preflight_and_page(
    answers: dict[str, tuple[dict[str, Any], dict[str, Any], str]], repo: str
) -> None:
    est, pre, page = answers[repo]
    count = est["memory_gb"]["lora_adapter_params"]
    slots = pre["lora"]["targets"]["all-linear"]
    assert sum(v["adapter_params"] for v in slots.values()) == count
    assert _value(page, "lora-adapters") == count
    assert est["memory_gb"]["lora_experts"] == MOE[repo]
    experts = "mlp.experts" in slots
    assert experts == (MOE[repo] == "adapted")
    words = html.unescape(page)
    if MOE[repo] == "adapted":
        assert "the routed experts' fused parameters adapted, as PEFT does for all-linear" in words
    else:
        assert "the routed experts' fused parameters not adapted" in words


def test_counts_worked_out_for_mixtral(
    answers: dict[str, tuple[dict[str, Any], dict[str, Any], str]],
) -> None:
    """Mixtral-8x7B by hand (h 4096, 32 layers, 8 experts of width 14336, GQA 32/8 heads of
    128): per layer q r(4096+4096), k and v r(4096+1024), o r(4096+4096), router r(4096+8),
    gate_up 2r·8·(4096+2·14336), down r·8·(14336+4096); r = 16."""
    r, h, e, i = 16, 4096, 8, 14336
    per_layer = (
        r * (h + h) * 2
        + r * (h + 1024) * 2
        + r * (h + e)
        + 2 * r * e * (h + 2 * i)
        + r * e * (i + h)
    )
    est, _, _ = answers["mistralai/Mixtral-8x7B-v0.1"]
    assert est["memory_gb"]["lora_adapter_params"] == 32 * per_layer == 359_665_664


def test_deepseek_r1_serves_its_fp8_bytes_with_bf16_as_an_upcast(
    answers: dict[str, tuple[dict[str, Any], dict[str, Any], str]],
) -> None:
    est, pre, page = answers[DEEPSEEK]
    m = est["memory_gb"]
    weights = pre["capacity"]["weights_bytes"]
    assert round(weights / 1e9, 1) == 688.6
    assert m["serve_weights"] == round(weights / 1e9, 3)
    assert m["serve_weights_source"] == "checkpoint"
    assert m["serve_weights_format"].startswith("F8_E4M3 + ")
    assert m["serve_weights_format"].endswith("(FP8 e4m3 with 128×128 block scales)")
    assert m["serve_weights_upcast"] == round(2 * est["params"]["total"] / 1e9, 3)
    assert m["lora_base"].startswith("as shipped: F8_E4M3")
    # the page's serving row is the shipped bytes; the bf16 row says it is an upcast
    assert _value(page, "serve-weights") == m["serve_weights"]
    assert _value(page, "serve-weights-upcast") == m["serve_weights_upcast"]
    assert '<th scope="row">Serving weights, upcast to bf16</th>' in page
    assert "Serve upcast to bf16 at 4,096 tokens</th>" in page
    # fit rows: tensor parallel over the fewest 80 GB cards holding weights + KV + prefill
    per_seq = m["kv_cache"] + m["serve_prefill"]
    a100 = next(c for c in est["cards"] if c["name"] == "A100/H100 80 GB")
    shipped = math.ceil((m["serve_weights"] + per_seq) / (80 / 1.15))
    upcast = math.ceil((m["serve_weights_upcast"] + per_seq) / (80 / 1.15))
    assert (shipped, upcast) == (10, 20)
    assert a100["serve"]["summary"] == (
        f"does not fit on 2 cards; {shipped} cards with tensor parallel at batch 1"
    )
    assert a100["serve_upcast"]["summary"] == (
        f"does not fit on 2 cards; {upcast} cards with tensor parallel at batch 1"
    )
    row = re.search(r'<tr data-card="A100/H100 80 GB".*?</tr>', page, re.S)
    assert row is not None
    cells = re.findall(r'<td data-setup="([a-z_]+)"[^>]*>(.*?)</td>', row.group(0), re.S)
    shown = {setup: html.unescape(text) for setup, text in cells}
    assert shown["serve"].endswith(a100["serve"]["summary"])
    assert shown["serve_upcast"].endswith(a100["serve_upcast"]["summary"])
