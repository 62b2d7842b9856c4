"""Estimate benchmark: calibration against measured_peaks.tsv and speed vs transformers meta.

Section of `make bench` (`python -m bench.run estimate`). Calibration parametrizes the estimate
by each comparable row's settings (batch, sequence length, LoRA rank/targets, precision) and
converts GiB to GB; rows left out are listed with why. Speed times `tracker.estimate.estimate`
over every corpus config against transformers' meta-device instantiation of the same configs.
"""

from __future__ import annotations

import contextlib
import copy
import csv
import functools
import gc
import json
import logging
import re
import statistics
import time
import warnings
from collections.abc import Callable, Iterator
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
    "meta-llama/Llama-2-70b-hf": "meta-llama__Llama-2-70b-hf",
    "meta-llama/Llama-3.1-70B-Instruct": "meta-llama__Meta-Llama-3.1-70B",
    "meta-llama/Llama-3.3-70B-Instruct": "meta-llama__Llama-3.3-70B-Instruct",
    "Qwen/Qwen3-235B-A22B-FP8": "Qwen__Qwen3-235B-A22B-FP8",
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
GPUS = re.compile(r"(?:^|\D)([2-9]|\d\d+)x ")


def _why_left_out(row: dict[str, str]) -> str | None:
    """Every reason `row` cannot be compared with the single-card AdamW/bf16 estimate, or None."""
    method, precision, optimizer = row["method"], row["precision"], row["optimizer"]
    ckpt, framework, gpu = row["grad_ckpt"], row["framework"], row["gpu"]
    peak = row["measured_peak_gb"].strip()
    why: list[str] = []
    if peak.startswith("OOM"):
        why.append(f"no peak measured ({peak})")
    elif peak.startswith(("<=", "~")) or not re.match(r"[\d.]+\s*(?:\(|per GPU|$)", peak):
        why.append(f"not a single measured peak ({peak[:40]})")
    if re.search(r"NF4|int4|int8|4-bit|fp8", precision) or re.search(r"Q-?LoRA", method):
        why.append(f"quantized base weights ({precision})")
    if re.search(r"(?<!no )offload", f"{method} {optimizer} {ckpt} {framework}", re.IGNORECASE):
        why.append("CPU offload (optimizer states, parameters or activations)")
    if re.search(r"8-?bit|Paged", f"{method} {optimizer}", re.IGNORECASE):
        why.append(f"8-bit or paged optimizer ({optimizer})")
    if re.search(r"in_bwd|in bwd|into backward", f"{method} {optimizer}"):
        why.append("optimizer step fused into backward (no full gradient set held)")
    if "Adafactor" in optimizer:
        why.append("Adafactor (factored optimizer states, not AdamW)")
    if GPUS.search(gpu) or re.search(r"FSDP|TP=|\d GPUs", framework):
        why.append(f"sharded over several GPUs ({gpu}; {framework})")
    elif "ZeRO" in framework:
        why.append("DeepSpeed ZeRO-3 on one GPU (fp32 master weights and DeepSpeed buffers)")
    if "vLLM" in framework or "SGLang" in framework:
        why.append("vLLM/SGLang memory pool (preallocated KV pool, not a peak)")
    if "emb" in method:
        why.append("trainable embeddings and head besides LoRA (no such setup in the estimate)")
    if "init only" in method:
        why.append("model load only, no training step")
    if "fp32" in precision or "AMP" in precision:
        why.append(f"fp32 weights or mixed precision ({precision}); the estimate assumes bf16")
    if row["model"] not in MODEL_CONFIG:
        why.append(f"no corpus config for {row['model']}")
    if _first_int(row["batch"]) is None:
        why.append(f"batch not stated ({row['batch']})")
    seq = row["seq_len"]
    if re.search(r"variable|short|same|not stated|~|<=", seq) or not re.search(r"\d", seq):
        why.append(f"sequence length not stated precisely ({seq})")
    if "not stated" in f"{ckpt} {optimizer} {gpu}":
        why.append("gradient checkpointing, optimizer or GPU not stated")
    return "; ".join(why) or None


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


def calibration() -> tuple[list[str], list[str], list[float], dict[str, list[float]]]:
    """Rows compared (Markdown), rows left out with why, |errors|, and |errors| by task."""
    from tracker.estimate import memory
    from tracker.estimate.params import read_config

    rows = list(csv.DictReader(PEAKS.open(), delimiter="\t"))
    table, left_out, errors = [], [], []
    by_task: dict[str, list[float]] = {}
    for row in rows:
        why = _why_left_out(row)
        parsed = _row_settings(row) if why is None else why
        if isinstance(parsed, str):
            left_out.append(
                f"| {row['model']} | {row['method']} | {row['batch']} | {row['seq_len']} | "
                f"{row['gpu']} | {parsed} |"
            )
            continue
        s, batch = parsed
        measured = re.match(r"[\d.]+", row["measured_peak_gb"].strip())
        assert measured is not None
        config = json.loads((CONFIGS / f"{MODEL_CONFIG[row['model']]}.json").read_text())
        r = read_config(config)
        note = ""
        if r.max_context and s.train_seq_len > r.max_context and row["task"] != "serving":
            # the row ran longer sequences than the stand-in config declares: use the row's
            note = f" (config declares {r.max_context}; computed at the row's {s.train_seq_len})"
            r = replace(r, max_context=s.train_seq_len)
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
        by_task.setdefault(row["task"], []).append(abs(err))
        table.append(
            f"| {row['model']} | {row['method']} | {batch} | {row['seq_len']}{note} | "
            f"{est / 1e9:.2f} | {meas_gb:.2f} | {err * 100:+.1f}% |"
        )
    return table, left_out, errors, by_task


REPEATS = 5  # timed runs per config and side, after one untimed warm-up run


def _median_ms(fn: Callable[[], object]) -> float:
    """Median wall time of `fn` over REPEATS runs after one warm-up run, in milliseconds."""
    fn()
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def _meta_builder(config: dict[str, Any]) -> Callable[[], object] | None:
    """A callable that builds `config` on the meta device with transformers, or None."""
    import torch
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    data = dict(config)
    data.pop("auto_map", None)
    cls = getattr(transformers, (data.get("architectures") or [""])[0], None)
    if data.get("model_type") not in CONFIG_MAPPING or cls is None:
        return None

    def build() -> object:
        cfg = CONFIG_MAPPING[data["model_type"]].from_dict(data)
        with torch.device("meta"):
            return cls._from_config(cfg)

    return build


def speed() -> dict[str, float]:
    """Per-config medians (REPEATS runs after a warm-up, both sides), then medians over configs.

    Both sides run in this process, config by config, on the same configs: the ratio compares
    the estimator with transformers only over the configs transformers builds.
    """
    ours_all: list[float] = []
    ours: list[float] = []
    theirs: list[float] = []
    for path in sorted(CONFIGS.glob("*.json")):
        config = json.loads(path.read_text())
        gc.collect()
        mine = _median_ms(functools.partial(estimate, config))
        ours_all.append(mine)
        build = _meta_builder(config)
        if build is None:
            continue
        gc.collect()
        theirs.append(_median_ms(build))
        ours.append(mine)
    ratios = [t / o for t, o in zip(theirs, ours, strict=True)]
    return {
        "ours_all": statistics.median(ours_all),
        "n_all": len(ours_all),
        "ours": statistics.median(ours),
        "theirs": statistics.median(theirs),
        "n": len(theirs),
        "ratio": statistics.median(theirs) / statistics.median(ours),
        "ratio_min": min(ratios),
        "ratio_median": statistics.median(ratios),
    }


def _category(deltas: list[int], truths: list[int]) -> tuple[str, float]:
    """("exact" | "within 1%" | "off", worst |Δ| in percent) over a family's configs."""
    worst = max(abs(d) / t * 100 for d, t in zip(deltas, truths, strict=True))
    if not any(deltas):
        return "exact", 0.0
    return ("within 1%" if worst <= 1.0 else "off"), worst


def leave_one_family_out() -> tuple[list[str], dict[str, int]]:
    """Every corpus config read with its family left out, per family: exact / within 1% / off.

    Truth: transformers' meta-device count where the pinned transformers builds the config,
    else the family's own reading (custom code; its count is checked against published and
    checkpoint counts in the tests). Two readings without the family: `config alone` (no
    family reader, no family traits: transformers' base defaults for all the config leaves
    unsaid) and `+ traits` (no family reader, but the family's table of what transformers'
    class fixes without a config key: tie default, always-on biases, ...).
    """
    from tracker.estimate.params import read_config

    rows: dict[str, list[tuple[str, int, int, int, bool]]] = {}
    for path in sorted(CONFIGS.glob("*.json")):
        config = json.loads(path.read_text())
        own = read_config(config)
        build = _meta_builder(copy.deepcopy(config))  # transformers edits nested configs
        native = build is not None
        truth = sum(p.numel() for p in build().parameters()) if build else own.total  # type: ignore[attr-defined]
        alone = read_config(config, use_family=False).total - truth
        traits = read_config(config, use_reader=False).total - truth
        rows.setdefault(own.family, []).append((path.stem, truth, alone, traits, native))
    table: list[str] = []
    counts = {"families": len(rows), "alone_1pct": 0, "traits_1pct": 0, "native": 0}
    counts |= {"native_exact_alone": 0, "native_exact_traits": 0}
    for family, items in sorted(rows.items()):
        truths = [t for _, t, _, _, _ in items]
        cat_a, worst_a = _category([a for _, _, a, _, _ in items], truths)
        cat_t, worst_t = _category([x for _, _, _, x, _ in items], truths)
        native = all(n for *_, n in items)
        counts["alone_1pct"] += cat_a != "off"
        counts["traits_1pct"] += cat_t != "off"
        if native:
            counts["native"] += 1
            counts["native_exact_alone"] += cat_a == "exact"
            counts["native_exact_traits"] += cat_t == "exact"
        worst = max(items, key=lambda x: abs(x[2]) / x[1])
        table.append(
            f"| {family} | {len(items)} | {'transformers' if native else 'family reading'} | "
            f"{cat_a} ({worst_a:.2f}%) | {cat_t} ({worst_t:.2f}%) | {worst[0]}: {worst[2]:+,} |"
        )
    return table, counts


CLI_RUNS = 21


def cli_speed() -> dict[str, float]:
    """`tracker estimate CONFIG` as a process against `python -c pass`, same interpreter.

    Runs alternate (pass, estimate, estimate --json) CLI_RUNS times after one warm-up round, so
    the machine's load falls on both sides alike; medians and minima in seconds. Bytecode
    caching is on (PYTHONDONTWRITEBYTECODE removed), as in an ordinary install.
    """
    import os
    import subprocess
    import sys

    python = Path(sys.executable)
    tracker = python.with_name("tracker")
    config = str(CONFIGS / "Qwen__Qwen3-0.6B.json")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    commands = {
        "pass": [str(python), "-c", "pass"],
        "estimate": [str(tracker), "estimate", config],
        "json": [str(tracker), "estimate", config, "--json"],
    }
    times: dict[str, list[float]] = {k: [] for k in commands}
    for round_ in range(CLI_RUNS + 1):
        for name, cmd in commands.items():
            t0 = time.perf_counter()
            subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True, env=env)
            if round_:
                times[name].append(time.perf_counter() - t0)
    out = {f"{k}_median": statistics.median(v) for k, v in times.items()}
    out |= {f"{k}_min": min(v) for k, v in times.items()}
    out["ratio"] = out["estimate_median"] / out["pass_median"]
    out["ratio_json"] = out["json_median"] / out["pass_median"]
    return out


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Silence transformers' logger and Python warnings for the bench's duration only."""
    import transformers

    level = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        transformers.logging.set_verbosity(level)


def run() -> str:
    """The Markdown section: calibration table, rows left out with why, speed."""
    with _quiet_transformers():
        table, left_out, errors, by_task = calibration()
        sp = speed()
        lofo, lc = leave_one_family_out()
    cli = cli_speed()
    med = statistics.median(errors) * 100 if errors else float("nan")
    per_task = "; ".join(
        f"{task}: {len(errs)} rows, median {statistics.median(errs) * 100:.1f}%"
        for task, errs in sorted(by_task.items())
    )
    out = [
        "## Estimate (`make bench` / `python -m bench.run estimate`)\n",
        "### Calibration against measured_peaks.tsv\n",
        "Estimate under each row's settings (batch, tokens, LoRA rank/targets, precision: pure "
        "bf16 = 8 B/param states without the 1.2 factor); measured figures read as GiB "
        "(torch's max_memory_allocated) and converted ×1.0737 to GB. Rows with gradient "
        "checkpointing: activations = each layer's bf16 input + one layer's full activations "
        "+ logits.\n",
        "| model | method | batch | seq | estimate GB | measured GB | error |",
        "|---|---|---|---|---|---|---|",
        *table,
        f"\n**{len(errors)} of {len(errors) + len(left_out)} rows compared; median absolute "
        f"error {med:.1f}% (target ≤ 15%).** By task: {per_task}.\n",
        f"Rows left out ({len(left_out)}), each with why:\n",
        "| model | method | batch | seq | gpu | why left out |",
        "|---|---|---|---|---|---|",
        *left_out,
        "\n### Speed\n",
        f"Each config timed {REPEATS} times after one untimed warm-up run on each side, median "
        "per config, then the median over configs; both sides in this process, config by "
        "config, on the same configs.\n",
        f"- tracker `estimate()` over all {sp['n_all']:.0f} corpus configs: median "
        f"{sp['ours_all']:.3f} ms per config.",
        f"- over the {sp['n']:.0f} configs transformers builds: tracker median "
        f"{sp['ours']:.3f} ms; transformers config + meta-device instantiation median "
        f"{sp['theirs']:.1f} ms.",
        f"- **ratio {sp['ratio']:.0f}× (target ≥ 100×)**; per-config ratios: median "
        f"{sp['ratio_median']:.0f}×, lowest {sp['ratio_min']:.0f}×.\n",
        "### Leave-one-family-out: the general reader on every corpus family\n",
        "Each corpus config read with its own family left out (`read_config(config, "
        "use_family=False)`: no family reader, no family traits, transformers' base defaults "
        "for what the config leaves unsaid) and with only the family reader left out "
        "(`use_reader=False`: the family's traits kept). Truth: transformers' meta-device count "
        "where the pinned transformers builds the config, else the family's own reading. Worst "
        "config per family; vision towers are counted as in the full reading.\n",
        "| family | configs | truth | config alone | + traits | worst config (config alone): Δ |",
        "|---|---|---|---|---|---|",
        *lofo,
        f"\n**Config alone: within 1% on {lc['alone_1pct']} of {lc['families']} families "
        f"({lc['alone_1pct'] / lc['families']:.0%}; target ≥ 80%); exact on "
        f"{lc['native_exact_alone']} of the {lc['native']} families transformers builds. "
        f"With the family traits: within 1% on {lc['traits_1pct']} of {lc['families']}, exact "
        f"on {lc['native_exact_traits']} of {lc['native']}.**\n",
        "### `tracker estimate CONFIG` as a process\n",
        f"{CLI_RUNS} alternating rounds after a warm-up (`python -c pass`, `tracker estimate "
        "tests/data/configs/Qwen__Qwen3-0.6B.json`, the same with `--json`), same interpreter, "
        "bytecode caching on; seconds, median (min).\n",
        f"- `python -c pass`: {cli['pass_median']:.3f} ({cli['pass_min']:.3f})",
        f"- `tracker estimate CONFIG`: {cli['estimate_median']:.3f} ({cli['estimate_min']:.3f})",
        f"- `tracker estimate CONFIG --json`: {cli['json_median']:.3f} ({cli['json_min']:.3f})",
        f"- **ratio {cli['ratio']:.2f}× (`--json` {cli['ratio_json']:.2f}×; target ≤ 3×)**; "
        "the command imports only the estimate (no typer, rich, pydantic, PyYAML, store or Hub "
        "client: `tests/estimate/test_estimate_cli.py`).\n",
    ]
    return "\n".join(out)
