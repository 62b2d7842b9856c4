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
SIBLINGS = ROOT / "tests" / "data" / "estimate" / "siblings"
# Measured model → a real corpus config of the same architecture (and which, where not itself).
MODEL_CONFIG: dict[str, tuple[Path, str]] = {
    "meta-llama/Llama-3.1-8B-Instruct": (CONFIGS / "meta-llama__Meta-Llama-3.1-8B.json", "base"),
    "meta-llama/Llama-2-7b-hf": (CONFIGS / "meta-llama__Llama-2-7b-hf.json", ""),
    "meta-llama/Llama-2-70b-hf": (CONFIGS / "meta-llama__Llama-2-70b-hf.json", ""),
    "meta-llama/Llama-3.1-70B-Instruct": (CONFIGS / "meta-llama__Meta-Llama-3.1-70B.json", "base"),
    "meta-llama/Llama-3.3-70B-Instruct": (CONFIGS / "meta-llama__Llama-3.3-70B-Instruct.json", ""),
    "meta-llama/Llama-3.2-3B": (SIBLINGS / "meta-llama__Llama-3.2-3B-Instruct.json", "Instruct"),
    "meta-llama/Meta-Llama-3-8B": (SIBLINGS / "meta-llama__Meta-Llama-3-8B.json", ""),
    "neuralmagic/Meta-Llama-3.1-70B-Instruct-quantized.w8a8": (
        CONFIGS / "meta-llama__Meta-Llama-3.1-70B.json",
        "the bf16 base it quantizes",
    ),
    "Qwen/Qwen3-235B-A22B-FP8": (CONFIGS / "Qwen__Qwen3-235B-A22B-FP8.json", ""),
    "Qwen/Qwen-7B": (CONFIGS / "Qwen__Qwen-7B-Chat.json", "Chat"),
    "Qwen/Qwen-7B-Chat": (CONFIGS / "Qwen__Qwen-7B-Chat.json", ""),
    "Qwen/Qwen-7B-Chat-Int4": (CONFIGS / "Qwen__Qwen-7B-Chat.json", "the bf16 Chat it quantizes"),
    "Qwen/Qwen-72B-Chat": (CONFIGS / "Qwen__Qwen-72B.json", "base"),
    "Qwen/Qwen-72B-Chat-Int4": (CONFIGS / "Qwen__Qwen-72B.json", "the bf16 base"),
    "Qwen/Qwen2.5-1.5B-Instruct": (CONFIGS / "Qwen__Qwen2.5-1.5B.json", "base"),
    "Qwen/Qwen2.5-7B-Instruct": (CONFIGS / "Qwen__Qwen2.5-7B.json", "base"),
    "Qwen/Qwen2.5-32B-Instruct": (CONFIGS / "Qwen__Qwen2.5-32B.json", "base"),
    "Qwen/Qwen3-0.6B": (CONFIGS / "Qwen__Qwen3-0.6B.json", ""),
    "Qwen/Qwen3-1.7B": (CONFIGS / "Qwen__Qwen3-1.7B.json", ""),
    "Qwen/Qwen3-32B": (CONFIGS / "Qwen__Qwen3-32B.json", ""),
    "Qwen/Qwen3-30B-A3B": (CONFIGS / "Qwen__Qwen3-30B-A3B.json", ""),
}
GPUS = re.compile(r"(\d+)x |\((\d+) GPUs\)|, (\d+) GPUs|TP=(\d+)")
IMPRECISE = re.compile(r"variable|^short|same|not stated|<=")


def _why_left_out(row: dict[str, str]) -> str | None:
    """Why `row` cannot be expressed in the estimate's settings (None: it can)."""
    method, optimizer, framework = row["method"], row["optimizer"], row["framework"]
    peak = row["measured_peak_gb"].strip()
    everything = f"{method} {optimizer} {row['grad_ckpt']} {framework}"
    why: list[str] = []
    if peak.startswith("OOM"):
        why.append(f"no peak measured ({peak})")
    elif peak.startswith(("<=", "~")):
        why.append(f"a budget or rough figure, not a measured peak ({peak[:40]})")
    if re.search(r"(?<!no )offload", everything, re.IGNORECASE):
        why.append("CPU offload (not in the estimate's settings)")
    if "Paged" in optimizer:
        why.append(
            "paged optimizer: its state pages to CPU memory under pressure, so the measured "
            "peak is bounded by the card, not by the setup"
        )
    if "Unsloth" in everything:
        why.append("Unsloth's kernels (not in the estimate's settings)")
    if "Adafactor" in optimizer:
        why.append("Adafactor (factored optimizer states; not in the estimate's settings)")
    if "init only" in method:
        why.append("model load only, no training step")
    if "KV pool" in method:
        why.append("a KV pool size, not a peak")
    if row["model"] not in MODEL_CONFIG:
        why.append(f"no corpus config of {row['model']}'s architecture")
    if row["task"] != "serving" and _first_int(row["batch"]) is None:
        why.append(f"batch not stated ({row['batch']})")
    seq = row["seq_len"]
    precise = "vLLM" in framework or "prompt ~short" in seq
    if not precise and (IMPRECISE.search(seq) or not re.search(r"\d", seq)):
        why.append(f"sequence length not stated precisely ({seq})")
    if "not stated" in f"{row['grad_ckpt']} {optimizer}":
        why.append("gradient checkpointing or optimizer not stated")
    return "; ".join(why) or None


def _first_int(text: str) -> int | None:
    m = re.search(r"\d+", text)
    return int(m.group()) if m else None


def _unit(row: dict[str, str]) -> tuple[float, str]:
    """(GB per unit, the unit in words) of the row's measured figure, from its source and notes."""
    text = f"{row['source']} {row['notes']}"
    if re.search(r"GB=1e9|units? GB\b|in GB\b", text):
        return 1.0, "GB"
    if "GiB" in text or "MiB" in text or "1024" in text:
        return GIB, "GiB"
    if "vLLM" in row["framework"]:
        return GIB, "GiB (vLLM logs GiB)"
    return GIB, "GiB assumed (unit unstated)"


def _gpus(row: dict[str, str]) -> int:
    m = GPUS.search(f"{row['gpu']} {row['framework']} {row['method']}")
    return int(next(g for g in m.groups() if g)) if m else 1


def _row_settings(row: dict[str, str]) -> tuple[EstimateSettings, int, str]:
    """(settings, batch, note) expressing `row` (a row `_why_left_out` accepts)."""
    s = EstimateSettings()
    method, precision, optimizer = row["method"], row["precision"], row["optimizer"]
    framework, seq = row["framework"], row["seq_len"]
    batch = _first_int(row["batch"]) or 1
    notes: list[str] = []
    if row["task"] == "serving":
        nums = [int(x) for x in re.findall(r"\d+", seq)]
        if "in +" in seq:
            s = replace(s, serve_seq_len=sum(nums), serve_prompt_tokens=max(1, nums[0]))
        elif "prompt ~short" in seq:
            s = replace(s, serve_seq_len=nums[0], serve_prompt_tokens=1)
            notes.append("short prompt taken as 1 token")
        else:
            s = replace(s, serve_seq_len=nums[0] if nums else 2048)
        if "int8" in precision:
            s = replace(s, serve_weights="int8")
        if "TP=" in f"{framework} {method}":
            s = replace(s, serve_shards=_gpus(row))
        return s, batch, "; ".join(notes)
    s = replace(s, train_seq_len=_first_int(seq) or 2048)
    if "LoRA" in method:
        rank = re.search(r"r(\d+)", method)
        s = replace(s, lora_rank=int(rank.group(1)) if rank else 8)
        if re.search(r"q,v|Q,V", method):
            s = replace(s, lora_targets="q,v")
        elif "(q,k,v)" in method:
            s = replace(s, lora_targets="q,k,v")
        if "emb" in method:
            s = replace(s, lora_trainable_embeddings=True)
    if re.search(r"NF4|4-bit", precision):
        s = replace(s, lora_base="nf4")
    elif "int4" in precision:
        s = replace(s, lora_base="int4")
    if "pure bf16" in precision or ("torchtune" in framework and "fp32" not in precision):
        s = replace(s, precision="bf16")
    elif "fp16 AMP" in precision:
        s = replace(s, precision="fp16-mixed")
    elif precision.startswith("fp32"):
        s = replace(s, precision="fp32")
    if re.search(r"8-?bit", optimizer, re.IGNORECASE):
        s = replace(s, optimizer="paged-adamw-8bit" if "Paged" in optimizer else "adamw-8bit")
    elif "Paged" in optimizer:
        s = replace(s, optimizer="paged-adamw")
    if re.search(r"in_bwd|in bwd|into backward", f"{method} {optimizer}"):
        s = replace(s, optimizer_in_backward=True)
    if re.match(r"(likely )?on", row["grad_ckpt"]) or "(AC on)" in row["notes"]:
        s = replace(s, grad_checkpointing=True)
        if not row["grad_ckpt"].startswith("on"):
            notes.append("checkpointing on, the framework's default (notes)")
    if "chunked CE" in method:
        s = replace(s, chunked_loss=True)
    gpus = _gpus(row)
    if gpus > 1:
        s = replace(s, sharding="zero3" if "ZeRO-3" in framework else "fsdp", shards=gpus)
    if "compile" in f"{method} {row['notes']}":
        notes.append("torch.compile on (not modelled)")
    return s, batch, "; ".join(notes)


def _describe(s: EstimateSettings, task: str, what: str) -> str:
    """`what` and the settings of a row that differ from the defaults."""
    base = EstimateSettings()
    if task == "serving":
        keys: tuple[str, ...] = (
            "serve_seq_len",
            "serve_prompt_tokens",
            "serve_weights",
            "serve_shards",
        )
    else:
        keys = (
            "train_seq_len",
            "precision",
            "optimizer",
            "optimizer_in_backward",
            "grad_checkpointing",
            "lora_rank",
            "lora_targets",
            "lora_base",
            "lora_trainable_embeddings",
            "chunked_loss",
            "sharding",
            "shards",
        )
    parts = [what] + [f"{k}={getattr(s, k)}" for k in keys if getattr(s, k) != getattr(base, k)]
    return ", ".join(parts)


def _estimate_row(row: dict[str, str]) -> tuple[float, float, str, str]:
    """(estimate GB, measured GB, measured in words, note) of an accepted row."""
    from tracker.estimate import memory
    from tracker.estimate.params import read_config

    s, batch, note = _row_settings(row)
    path, sibling = MODEL_CONFIG[row["model"]]
    r = read_config(json.loads(path.read_text()))
    if sibling:
        note = "; ".join(x for x in (f"config {path.stem} ({sibling})", note) if x)
    if r.max_context and s.train_seq_len > r.max_context and row["task"] != "serving":
        note = "; ".join(x for x in (note, f"config declares {r.max_context} tokens") if x)
        r = replace(r, max_context=s.train_seq_len)
    m = memory.compute(r, s)
    peak = row["measured_peak_gb"]
    if "vLLM" in row["framework"]:
        figure = re.search(r"weights ([\d.]+)", peak)
        assert figure is not None
        value, est, what = float(figure.group(1)), m.serve_fixed, "serving weights"
    else:
        first = re.match(r"[\d.]+", peak.strip())
        assert first is not None
        value = float(first.group())
        if row["task"] == "serving":
            est, what = m.serve_fixed + batch * m.serve_per_sequence, "serving"
        elif "LoRA" in row["method"]:
            est = m.lora_fixed + batch * m.act_per_sample
            # "shipped" (the default) is the checkpoint's own format: bf16 for these rows
            what = {"bf16": "LoRA", "shipped": "LoRA (base as shipped)"}.get(s.lora_base, "QLoRA")
        else:
            est, what = m.full_fixed + batch * m.act_per_sample, "full"
        cards = s.serve_shards if row["task"] == "serving" else s.shards
        if "summed" in peak and cards > 1:
            est *= cards
    unit, unit_words = _unit(row)
    where = " per GPU" if "per GPU" in f"{peak} {row['batch']}" else ""
    where = " summed" if "summed" in peak else where
    described = _describe(s, row["task"], what)
    return est / 1e9, value * unit, f"{value:g} {unit_words}{where}", f"{described}; {note}"


def calibration() -> tuple[list[str], list[str], dict[str, list[float]]]:
    """Rows compared (Markdown), rows left out with why, signed errors by task."""
    rows = list(csv.DictReader(PEAKS.open(), delimiter="\t"))
    table, left_out = [], []
    by_task: dict[str, list[float]] = {}
    for row in rows:
        why = _why_left_out(row)
        if why is not None:
            left_out.append(
                f"| {row['model']} | {row['method']} | {row['batch']} | {row['seq_len']} | "
                f"{row['gpu']} | {why} |"
            )
            continue
        est, meas, words, note = _estimate_row(row)
        err = (est - meas) / meas
        by_task.setdefault(row["task"], []).append(err)
        table.append(
            f"| {row['model']} | {row['method']} | {row['batch']} | {row['seq_len']} | "
            f"{est:.2f} | {words} = {meas:.2f} GB | {err * 100:+.1f}% | {note.strip('; ')} |"
        )
    return table, left_out, by_task


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


CLI_RUNS = 30


def cli_speed() -> dict[str, float]:
    """`tracker estimate CONFIG` as a process against `python -c pass`, same interpreter.

    Runs alternate (pass, estimate, estimate --json) CLI_RUNS times after one warm-up round, so
    the machine's load falls on both sides alike; medians and minima in seconds, and the median
    CPU time (user + system) of each process, which other processes' load disturbs less than the
    wall clock. The package is compiled first as `make venv` does (`python -m compileall -q
    tracker`); the environment is left as it is, so with PYTHONDONTWRITEBYTECODE set nothing else
    writes bytecode, as for a user of a fresh clone. `load` is the 1-minute load average before
    and after.
    """
    import os
    import resource
    import subprocess
    import sys

    python = Path(sys.executable)
    tracker = python.with_name("tracker")
    config = str(CONFIGS / "Qwen__Qwen3-0.6B.json")
    env = dict(os.environ)
    package = Path(__file__).resolve().parents[1] / "tracker"
    subprocess.run([str(python), "-m", "compileall", "-q", str(package)], check=True, env=env)
    commands = {
        "pass": [str(python), "-c", "pass"],
        "estimate": [str(tracker), "estimate", config],
        "json": [str(tracker), "estimate", config, "--json"],
    }
    times: dict[str, list[float]] = {k: [] for k in commands}
    cpu: dict[str, list[float]] = {k: [] for k in commands}
    load_before = os.getloadavg()[0]
    for round_ in range(CLI_RUNS + 1):
        for name, cmd in commands.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True, env=env)
            wall = time.perf_counter() - t0
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if round_:
                times[name].append(wall)
                cpu[name].append(
                    after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
                )
    out = {f"{k}_median": statistics.median(v) for k, v in times.items()}
    out |= {f"{k}_min": min(v) for k, v in times.items()}
    out |= {f"{k}_cpu": statistics.median(v) for k, v in cpu.items()}
    out["ratio"] = out["estimate_median"] / out["pass_median"]
    out["ratio_json"] = out["json_median"] / out["pass_median"]
    out["ratio_cpu"] = out["estimate_cpu"] / out["pass_cpu"]
    out["load_before"], out["load_after"] = load_before, os.getloadavg()[0]
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


def _summary(errs: list[float]) -> str:
    over = sum(e > 0 for e in errs)
    med = statistics.median(abs(e) for e in errs) * 100
    return (
        f"{len(errs)} rows, median absolute error {med:.1f}%, median signed "
        f"{statistics.median(errs) * 100:+.1f}%, {over} over / {len(errs) - over} under"
    )


def run() -> str:
    """The Markdown section: calibration, rows left out with why, speed, LOFO, CLI start."""
    with _quiet_transformers():
        table, left_out, by_task = calibration()
        sp = speed()
        lofo, lc = leave_one_family_out()
    cli = cli_speed()
    compared = sum(len(v) for v in by_task.values())
    out = [
        "## Estimate (`make bench` / `python -m bench.run estimate`)\n",
        "### Calibration against measured_peaks.tsv\n",
        "Every row expressed in the estimate's settings (`tracker/estimate/settings.py`: "
        "precision, optimizer, 8-bit/paged optimizers, optimizer step in backward, gradient "
        "checkpointing, LoRA rank/targets, QLoRA base, trainable embeddings, ZeRO/FSDP over N "
        "cards, serving prompt and prefill, quantized serving weights, tensor parallel). "
        "Measured figures converted to GB by each row's own unit (from its source and notes); "
        "per-GPU rows against the per-card estimate, summed rows against the per-card estimate "
        "× cards. A model without a corpus config uses a real corpus config of the same "
        "architecture, named in the note. Error = (estimate − measured) / measured.\n",
        "| model | method | batch | seq | estimate GB | measured | error | estimated as; note |",
        "|---|---|---|---|---|---|---|---|",
        *table,
        f"\n**{compared} of {compared + len(left_out)} rows compared.** "
        + " ".join(f"**{task}: {_summary(errs)}.**" for task, errs in sorted(by_task.items()))
        + " Targets: ≥ 70 rows; median absolute error ≤ 10% for each task; at most two thirds "
        "of the fine-tune rows on one side.\n",
        f"Rows left out ({len(left_out)}), each with why (a setup the settings cannot express):\n",
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
        "the package compiled first as `make venv` does (`python -m compileall -q tracker`), "
        "PYTHONDONTWRITEBYTECODE as the environment sets it; seconds, median (min), and the median CPU time (user + system) of "
        f"each process; load average {cli['load_before']:.2f} before, {cli['load_after']:.2f} "
        "after.\n",
        f"- `python -c pass`: {cli['pass_median']:.3f} ({cli['pass_min']:.3f}), "
        f"CPU {cli['pass_cpu']:.3f}",
        f"- `tracker estimate CONFIG`: {cli['estimate_median']:.3f} ({cli['estimate_min']:.3f}), "
        f"CPU {cli['estimate_cpu']:.3f}",
        f"- `tracker estimate CONFIG --json`: {cli['json_median']:.3f} ({cli['json_min']:.3f}), "
        f"CPU {cli['json_cpu']:.3f}",
        f"- **ratio {cli['ratio']:.2f}× (`--json` {cli['ratio_json']:.2f}×, CPU time "
        f"{cli['ratio_cpu']:.2f}×; target ≤ 3×)**; "
        "the command imports only the estimate (no typer, rich, pydantic, PyYAML, store or Hub "
        "client: `tests/estimate/test_estimate_cli.py`).\n",
    ]
    return "\n".join(out)
