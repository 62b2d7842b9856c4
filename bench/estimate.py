"""Estimate benchmark: calibration against measured_peaks.tsv and speed vs transformers meta.

Section of `make bench` (`python -m bench.run estimate`). Calibration parametrizes the estimate
by each comparable row's settings (batch, sequence length, LoRA rank/targets, precision) and
converts GiB to GB; rows left out are listed with why. Speed times `tracker.estimate.estimate`
over every corpus config against transformers' meta-device instantiation of the same configs.
"""

from __future__ import annotations

import csv
import json
import re
import statistics
import time
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

from tracker.estimate import EstimateSettings, estimate

ROOT = Path(__file__).parents[1]
CONFIGS = ROOT / "tests" / "data" / "configs"
PEAKS = ROOT / "tests" / "data" / "estimate" / "measured_peaks.tsv"
GIB = 1.073741824
# Measured model → corpus config with the same shapes.
MODEL_CONFIG = {
    "meta-llama/Llama-3.1-8B-Instruct": "meta-llama__Meta-Llama-3.1-8B",
    "meta-llama/Llama-2-7b-hf": "meta-llama__Llama-2-7b-hf",
    "Qwen/Qwen-7B": "Qwen__Qwen-7B-Chat",
    "Qwen/Qwen-7B-Chat": "Qwen__Qwen-7B-Chat",
    "Qwen/Qwen-72B-Chat": "Qwen__Qwen-72B",
    "Qwen/Qwen2.5-1.5B-Instruct": "Qwen__Qwen2.5-1.5B",
    "Qwen/Qwen2.5-7B-Instruct": "Qwen__Qwen2.5-7B",
    "Qwen/Qwen2.5-32B-Instruct": "Qwen__Qwen2.5-32B",
    "Qwen/Qwen3-0.6B": "Qwen__Qwen3-0.6B",
    "Qwen/Qwen3-1.7B": "Qwen__Qwen3-1.7B",
    "Qwen/Qwen3-32B": "Qwen__Qwen3-32B",
    "Qwen/Qwen3-30B-A3B": "Qwen__Qwen3-30B-A3B",
}
EXCLUDE = (
    (r"QLoRA|Q-LoRA|NF4|int4|4-bit|int8|fp8", "quantized base"),
    (r"offload|Paged|8bit|8-bit|optimizer_in_bwd|in bwd|Adafactor", "offload / non-AdamW state"),
    (r"FSDP|ZeRO|DeepSpeed|TP=|\b[2-8]x ", "sharded over several GPUs or ZeRO"),
    (r"not stated|variable|short|profile|KV pool|~", "settings not stated precisely"),
)


def _first_int(text: str) -> int | None:
    m = re.search(r"\d+", text)
    return int(m.group()) if m else None


def _row_settings(row: dict[str, str]) -> tuple[EstimateSettings, int] | str:
    s = EstimateSettings()
    batch = _first_int(row["batch"])
    if batch is None:
        return "batch not stated"
    seq = row["seq_len"]
    nums = [int(x) for x in re.findall(r"\d+", seq)]
    if not nums:
        return "sequence length not stated"
    tokens = sum(nums) if "in +" in seq else nums[0]
    method = row["method"]
    if row["task"] == "serving":
        s = replace(s, serve_seq_len=tokens)
        return s, batch
    s = replace(s, train_seq_len=tokens)
    rank = re.search(r"r(\d+)", method)
    if "LoRA" in method:
        s = replace(s, lora_rank=int(rank.group(1)) if rank else 8)
        if "q,v" in method or "Q,V" in method:
            s = replace(s, lora_targets="q,v")
    if "pure bf16" in row["precision"]:
        s = replace(s, full_ft_bytes_per_param=8.0, full_ft_overhead=1.0)
    return s, batch


def calibration() -> tuple[list[str], list[str], list[float]]:
    rows = list(csv.DictReader(PEAKS.open(), delimiter="\t"))
    table, left_out, errors = [], [], []
    for row in rows:
        line = "\t".join(row.values())
        why = next((w for pat, w in EXCLUDE if re.search(pat, line)), None)
        cfg_name = MODEL_CONFIG.get(row["model"])
        if cfg_name is None:
            why = why or "no config with these shapes in the corpus"
        measured = re.match(r"[\d.]+", row["measured_peak_gb"].strip())
        if measured is None:
            why = why or "no single measured figure"
        if why:
            left_out.append(f"| {row['model']} | {row['method']} | {row['gpu']} | {why} |")
            continue
        parsed = _row_settings(row)
        if isinstance(parsed, str):
            left_out.append(f"| {row['model']} | {row['method']} | {row['gpu']} | {parsed} |")
            continue
        s, batch = parsed
        assert cfg_name is not None and measured is not None
        config = json.loads((CONFIGS / f"{cfg_name}.json").read_text())
        from tracker.estimate import memory
        from tracker.estimate.params import read_config

        r = read_config(config)
        m = memory.compute(r, s)
        act = m.act_per_sample
        if row["grad_ckpt"].startswith("on"):
            # checkpointing keeps each layer's bf16 input plus one layer's full activations
            act = len(r.layers) * 2 * r.hidden * m.train_tokens + max(m.layer_act) + m.logits_act
        if row["task"] == "serving":
            est = m.serve_fixed + batch * m.kv_per_sequence
        elif "LoRA" in row["method"]:
            est = m.lora_fixed + batch * act
        else:
            est = m.full_fixed + batch * act
        meas_gb = float(measured.group()) * GIB
        err = (est / 1e9 - meas_gb) / meas_gb
        errors.append(abs(err))
        table.append(
            f"| {row['model']} | {row['method']} | {batch} | {row['seq_len']} | "
            f"{est / 1e9:.2f} | {meas_gb:.2f} | {err * 100:+.1f}% |"
        )
    return table, left_out, errors


def speed() -> tuple[float, float, int]:
    import torch
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    ours, theirs = [], []
    for path in sorted(CONFIGS.glob("*.json")):
        config = json.loads(path.read_text())
        t0 = time.perf_counter()
        estimate(config)
        ours.append((time.perf_counter() - t0) * 1000)
        data = dict(config)
        data.pop("auto_map", None)
        cls = getattr(transformers, (data.get("architectures") or [""])[0], None)
        if data.get("model_type") not in CONFIG_MAPPING or cls is None:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            cfg = CONFIG_MAPPING[data["model_type"]].from_dict(data)
            with torch.device("meta"):
                cls._from_config(cfg)
            theirs.append((time.perf_counter() - t0) * 1000)
    return statistics.median(ours), statistics.median(theirs), len(theirs)


def run() -> str:
    table, left_out, errors = calibration()
    mine, meta, n_meta = speed()
    med = statistics.median(errors) * 100 if errors else float("nan")
    out = [
        "## Estimate (`make bench` / `python -m bench.run estimate`)\n",
        "### Calibration against measured_peaks.tsv\n",
        "Estimate under each row's settings (batch, tokens, LoRA rank/targets, precision: pure "
        "bf16 = 8 B/param states without the 1.2 factor); measured figures read as GiB "
        "(torch's max_memory_allocated) and converted ×1.0737 to GB. Rows with gradient "
        "checkpointing: activations = each layer's bf16 input + one layer's full activations + logits.\n",
        "| model | method | batch | seq | estimate GB | measured GB | error |",
        "|---|---|---|---|---|---|---|",
        *table,
        f"\n**{len(errors)} rows compared; median absolute error {med:.1f}% (target ≤ 15%).**\n",
        "Rows left out:\n",
        "| model | method | gpu | why |",
        "|---|---|---|---|",
        *left_out,
        "\n### Speed\n",
        f"tracker estimator over all {len(list(CONFIGS.glob('*.json')))} corpus configs: median "
        f"{mine:.2f} ms; transformers meta-device instantiation of the {n_meta} it builds: median "
        f"{meta:.1f} ms; ratio {meta / mine:.0f}× (target ≥ 100×).\n",
    ]
    return "\n".join(out)


def _cli() -> dict[str, Any]:  # pragma: no cover - manual use
    return {"run": run()}
