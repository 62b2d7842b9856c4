"""The estimate across all of transformers: every config class with a base or causal-LM model class.

Section of `make bench` (`python -m bench.run sweep`). For every config class of the pinned
transformers (5.24.0) whose model_type has a causal-LM class (else a base-model class), its default
config as `save_pretrained` writes it (the diff against `PreTrainedConfig`'s defaults), with
`architectures` set to that class (the full `to_dict`, as `to_json_string(use_diff=False)` writes
it: transformers 5.24 cannot read back some of its own diff-form configs), is counted on torch's meta device (the oracle) and estimated by
`tracker.estimate.estimate`. The oracle's counts are cached in TABLE, which
`python -m bench.sweep --generate` writes (torch and transformers, a few minutes); the section and
`tests/estimate/test_estimate_sweep.py` read it, and the test rebuilds a sample of it live.

Each class falls in one outcome: `exact` (difference 0), `within-1%` (0 < |delta| ≤ 1%),
`unverified` (more than 1% off and marked unverified, with its reasons), `refused` (a one-line
EstimateError), `not-built` (transformers itself cannot build the default config) or
`silently-wrong` (more than 1% off while not marked unverified: the one outcome the test
forbids). Exact and within-1% results keep their status (verified, checked, derived or
unverified) beside them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sys
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracker.estimate import estimate
from tracker.shared.errors import EstimateError
from tracker.shared.estimate_values import VerificationStatus

TRANSFORMERS_VERSION = "5.24.0"
ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "tests" / "data" / "estimate" / f"sweep-transformers-{TRANSFORMERS_VERSION}.jsonl"
"""One JSON object a line, sorted by model_type: `model_type`, `architecture`, `config` (the
config.json as written), `count` (the meta-device count; null where transformers cannot build it)
and `error` (transformers' one-line error where it cannot; else null) and `mapping` (`causal-lm` or
`base`: the auto mapping the class came from)."""
CLASSES = ROOT / "tracker" / "estimate" / f"transformers-{TRANSFORMERS_VERSION}-classes.json"
"""The model class names of the pinned transformers (`tracker.estimate.classes` reads it)."""
PER_CLASS = ROOT / "bench" / "SWEEP.md"
TOLERANCE_PCT = 1.0

OUTCOMES = ("exact", "within-1%", "unverified", "refused", "not-built", "silently-wrong")


@dataclass(frozen=True)
class Row:
    """One config class of the sweep, as TABLE holds it."""

    model_type: str
    architecture: str
    config: dict[str, Any]
    count: int | None
    error: str | None
    mapping: str


@dataclass(frozen=True)
class Result:
    """The estimate of one Row against the oracle."""

    row: Row
    outcome: str
    derived: int | None
    delta_pct: float | None
    status: str
    why: str


def load_table(path: Path = TABLE) -> list[Row]:
    """The rows of TABLE."""
    rows = []
    for line in path.read_text().splitlines():
        d = json.loads(line)
        rows.append(
            Row(
                d["model_type"],
                d["architecture"],
                d["config"],
                d["count"],
                d["error"],
                d["mapping"],
            )
        )
    return rows


def classify(row: Row, derived: int | None, status: str, why: str) -> Result:
    """The outcome of estimate (`derived`, `status`, `why`; derived None: refused with `why`)
    against the oracle's count in `row`."""
    if row.count is None:
        return Result(row, "not-built", derived, None, status, row.error or "")
    if derived is None:
        return Result(row, "refused", None, None, status, why)
    delta = (derived - row.count) / row.count * 100 if row.count else float("inf")
    if derived == row.count:
        outcome = "exact"
    elif abs(delta) <= TOLERANCE_PCT:
        outcome = "within-1%"
    elif status == VerificationStatus.UNVERIFIED.value:
        outcome = "unverified"
    else:
        outcome = "silently-wrong"
    return Result(row, outcome, derived, delta, status, why)


def estimate_row(row: Row) -> Result:
    """Estimate `row.config` in this process and classify it."""
    try:
        e = estimate(row.config).to_json()
    except EstimateError as exc:
        return classify(row, None, "refused", str(exc))
    v = e["verification"]
    return classify(row, e["params"]["total"], v["status"], "; ".join(v["reasons"]))


def oracle_row(model_type: str, architecture: str, mapping: str) -> Row:
    """The Row of one class, built live with transformers on the meta device."""
    import torch
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    config_cls = CONFIG_MAPPING[model_type]
    config: dict[str, Any] = {"model_type": model_type, "architectures": [architecture]}
    try:
        cfg = config_cls()
        cfg.architectures = [architecture]
        config = json.loads(cfg.to_json_string(use_diff=False))
        config.pop("transformers_version", None)
        cls = getattr(transformers, architecture)
        with torch.device("meta"):
            model = cls._from_config(cfg)
        count: int | None = sum(p.numel() for p in model.parameters())
        error = None
    except Exception as exc:  # the oracle's own failure is a recorded outcome, not a crash
        count = None
        error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
    return Row(model_type, architecture, config, count, error, mapping)


def classes() -> list[tuple[str, str, str]]:
    """(model_type, class, mapping) for every config class with a causal-LM class (preferred) or a
    base-model class in the pinned transformers' auto mappings, sorted by model_type."""
    from transformers.models.auto import modeling_auto as m
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    out = []
    for model_type in sorted(CONFIG_MAPPING_NAMES):
        for kind, mapping in (
            ("causal-lm", m.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES),
            ("base", m.MODEL_MAPPING_NAMES),
        ):
            name = mapping.get(model_type)
            if name:
                out.append((model_type, name if isinstance(name, str) else name[0], kind))
                break
    return out


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Silence transformers' logger and Python warnings for the block."""
    import transformers

    level = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        transformers.logging.set_verbosity(level)


def model_class_names() -> list[str]:
    """The model class names the installed transformers exports: every class its auto mappings
    name that it exports, and every exported name shaped like a model class (`…Model`,
    `…For…`, `…Encoder`, `…Decoder`, `…Backbone`; not `PreTrained…` or `…Config`)."""
    import transformers
    from transformers.models.auto import modeling_auto

    exported = {n for n in dir(transformers) if re.fullmatch(r"[A-Za-z]\w*", n)}
    names = {
        n
        for n in exported
        if re.search(r"(Model|For[A-Z]\w*|Encoder|Decoder|Backbone)$", n)
        and "pretrained" not in n.lower()
        and not n.endswith("Config")
    }
    for attr in dir(modeling_auto):
        mapping = getattr(modeling_auto, attr)
        if (
            attr.startswith("MODEL_")
            and attr.endswith("_MAPPING_NAMES")
            and isinstance(mapping, dict)
        ):
            for value in mapping.values():
                for name in [value] if isinstance(value, str) else value:
                    if name in exported:
                        names.add(name)
    return sorted(names)


def generate(path: Path = TABLE) -> None:
    """Write TABLE and CLASSES from the installed transformers (which must be the pinned one)."""
    import transformers

    if transformers.__version__ != TRANSFORMERS_VERSION:
        raise SystemExit(
            f"transformers {transformers.__version__} is installed, not {TRANSFORMERS_VERSION}"
        )
    lines = []
    with quiet_transformers():
        for model_type, arch, mapping in classes():
            row = oracle_row(model_type, arch, mapping)
            print(f"{model_type:40} {arch:50} {row.count or row.error}", file=sys.stderr)
            lines.append(json.dumps(row.__dict__, sort_keys=True, separators=(",", ":")))
    path.write_text("\n".join(lines) + "\n")
    body = {"transformers": TRANSFORMERS_VERSION, "classes": model_class_names()}
    CLASSES.write_text(json.dumps(body, indent=0) + "\n")


def sweep(rows: list[Row] | None = None) -> list[Result]:
    """Every row of TABLE (or `rows`) estimated in this process."""
    return [estimate_row(r) for r in (rows if rows is not None else load_table())]


def is_causal(row: Row) -> bool:
    """Whether the row's class is its model_type's causal-LM class."""
    return row.mapping == "causal-lm"


def summary(results: list[Result]) -> dict[str, Counter[str]]:
    """Outcome counts over all classes and over the causal-LM classes."""
    return {
        "all": Counter(r.outcome for r in results),
        "causal": Counter(r.outcome for r in results if is_causal(r.row)),
    }


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def per_class_table(results: list[Result]) -> str:
    """The Markdown of PER_CLASS: one row per class, its outcome, counts and reasons."""
    lines = [
        f"# The estimate across transformers {TRANSFORMERS_VERSION}, per class\n",
        "Written by `make bench` (`python -m bench.run sweep`; summary in bench/RESULTS.md). "
        "Outcomes: `exact`, `within-1%` (0 < |delta| ≤ 1%), `unverified` (more than 1% off, "
        "marked unverified), `refused` (one-line error naming the model_type that has no "
        "reader and the key the general reader could not size it by: without a count of the "
        "stack no number can be given honestly, so none is), `not-built` (transformers cannot build "
        "the default config either), `silently-wrong` (more than 1% off and not marked "
        "unverified). The reasons are the estimate's verification reasons (or its error, or "
        "transformers').\n",
        "| model_type | class | mapping | outcome | status | meta-device count | estimate | "
        "delta | reasons |",
        "|---|---|---|---|---|---:|---:|---:|---|",
    ]
    for r in results:
        count = f"{r.row.count:,}" if r.row.count is not None else ""
        derived = f"{r.derived:,}" if r.derived is not None else ""
        delta = f"{r.delta_pct:+.3f}%" if r.delta_pct is not None else ""
        lines.append(
            f"| {r.row.model_type} | {r.row.architecture} | {r.row.mapping} | {r.outcome} | "
            f"{r.status} | {count} | {derived} | {delta} | {_cell(r.why)} |"
        )
    return "\n".join(lines) + "\n"


def run() -> str:
    """The bench section: outcome counts (all classes, causal-LM classes) and PER_CLASS."""
    results = sweep()
    PER_CLASS.write_text(per_class_table(results))
    counts = summary(results)
    built = {k: sum(v for o, v in c.items() if o != "not-built") for k, c in counts.items()}
    rows = []
    for outcome in OUTCOMES:
        a, c = counts["all"][outcome], counts["causal"][outcome]
        rows.append(f"| {outcome} | {a} | {c} |")
    within = {k: c["exact"] + c["within-1%"] for k, c in counts.items()}
    statuses = Counter(r.status for r in results if r.outcome in ("exact", "within-1%"))
    return "\n".join(
        [
            f"## Sweep of transformers {TRANSFORMERS_VERSION} (`python -m bench.run sweep`)\n",
            "Every config class of the pinned transformers with a causal-LM (else base) model "
            "class: its default config, `architectures` set to that class, counted on the meta "
            f"device (cached in `{TABLE.relative_to(ROOT)}`, made by "
            "`python -m bench.sweep --generate`) and estimated by `tracker.estimate.estimate`. "
            "The test `tests/estimate/test_estimate_sweep.py` fails on any `silently-wrong`. "
            f"Per class, with the reasons: [bench/SWEEP.md](SWEEP.md).\n",
            "| outcome | all classes | causal-LM classes |",
            "|---|---:|---:|",
            *rows,
            f"| **total** | {len(results)} | {sum(counts['causal'].values())} |",
            "",
            f"Within 1% (exact included): {within['all']} of {built['all']} built classes "
            f"({within['all'] / built['all']:.0%}); causal-LM classes {within['causal']} of "
            f"{built['causal']} ({within['causal'] / built['causal']:.0%}). Status of those: "
            + ", ".join(f"{n} {k}" for k, n in sorted(statuses.items()))
            + ".",
        ]
    )


if __name__ == "__main__":
    if sys.argv[1:] != ["--generate"]:
        raise SystemExit("usage: python -m bench.sweep --generate")
    generate()
