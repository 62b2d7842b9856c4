"""The render budget is deterministic: the same template gives the same result on an idle machine and on
a saturated one (a busy process on every core), because it is counted in steps, never in seconds.

Renders go through the backstop worker (`tracker.sandbox.render_backstop.render_batch`), as the pipeline does.
The real template is the heaviest chat template in ../shared/corpus by step count (NVIDIA
Nemotron-3-Nano's, with its tool and reasoning branches).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from diffkit import make_snapshot

from tracker.diff import diff_snapshots
from tracker.diff.chat_template import render_all
from tracker.diff.conversations import CONVERSATIONS, template_variables
from tracker.diff.sandbox import (
    DEFAULT_LIMITS,
    RenderOutcome,
    RenderResult,
    render_bounded,
    render_in_process,
)
from tracker.sandbox.render_backstop import render_batch
from tracker.shared.domain import ChangeKind

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "models"
NEMOTRON = CORPUS / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16" / "chat_template.jinja"
TOKENS = {"bos_token": "<BOS>", "eos_token": "<EOS>", "unk_token": "<UNK>", "pad_token": "<PAD>"}

SPIN = "{% for i in range(100000) %}{% for j in range(100000) %}{% if i == -1 %}x{% endif %}{% endfor %}{% endfor %}"
# 110,000 additions: 88% of the budget, so a render that is heavy but legal stays legal under load
HEAVY = (
    "{% set ns = namespace(n=0) %}{% for i in range(110) %}{% for j in range(1000) %}"
    "{% set ns.n = ns.n + 1 %}{% endfor %}{% endfor %}{{ ns.n }}"
)
HEAVY_STEPS = 881_453
BUDGET_SHOWN = "<budget: rendering needs over 1,000,000 steps>"


@contextmanager
def _every_core_busy() -> Iterator[list[int]]:
    """One process spinning on every core while the block runs; yields their pids."""
    procs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(os.cpu_count() or 2)
    ]
    try:
        time.sleep(0.5)  # let them get scheduled
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait()


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _everything() -> tuple[dict[str, list[RenderResult]], tuple[object, ...]]:
    conversations = [template_variables(c, TOKENS) for c in CONVERSATIONS]
    renders = {
        "heavy": render_batch(HEAVY, conversations[:1], DEFAULT_LIMITS),
        "nemotron": render_batch(NEMOTRON.read_text(), conversations, DEFAULT_LIMITS),
    }
    good = make_snapshot({"chat_template.jinja": NEMOTRON.read_bytes()})
    evil = make_snapshot({"chat_template.jinja": SPIN.encode()}, sha="1" * 40)
    changes = diff_snapshots(good, evil, renderer=render_batch)
    return renders, changes


def test_idle_and_saturated_machines_give_the_same_results() -> None:
    idle = _everything()
    with _every_core_busy() as pids:
        loaded = _everything()
        busy = [_cpu_seconds(pid) for pid in pids]
    assert loaded == idle  # outputs, outcomes, errors and step counts; and the diff's changes
    assert all(s > 0.5 for s in busy), busy  # the load was real

    renders, changes = idle
    assert renders["heavy"] == [RenderResult("110000", "", RenderOutcome.OK, HEAVY_STEPS)]
    assert [r.outcome for r in renders["nemotron"]] == [RenderOutcome.OK] * len(CONVERSATIONS)
    assert "<|im_start|>user\nWhat is the weather in Paris?" in renders["nemotron"][3].output
    broken = [c for c in changes if c.kind is ChangeKind.BROKEN]
    assert [c.key for c in broken] == sorted(c.id for c in CONVERSATIONS)
    assert {c.after for c in broken} == {BUDGET_SHOWN}


def test_a_spinning_template_stops_at_the_budget_exactly() -> None:
    assert render_bounded(SPIN, {}) == RenderResult(
        "", "rendering needs over 1,000,000 steps", RenderOutcome.BUDGET, 1_000_007
    )


def test_the_worker_and_this_process_agree() -> None:
    """The backstop only moves the render to another process: same results, steps included."""
    source = NEMOTRON.read_text()
    conversations = [template_variables(c, TOKENS) for c in CONVERSATIONS]
    here = [render_bounded(source, v) for v in conversations]
    assert render_batch(source, conversations, DEFAULT_LIMITS) == here
    assert render_all(source, TOKENS, DEFAULT_LIMITS, render_batch) == dict(
        zip((c.id for c in CONVERSATIONS), here, strict=True)
    )


def test_real_templates_use_a_small_part_of_the_budget() -> None:
    """Every chat template in the corpus renders every conversation in under 1% of the budget."""
    import json

    sources: dict[str, str] = {}
    for model in sorted(CORPUS.iterdir()):
        for path in sorted(model.glob("*chat_template*.jinja")):
            sources[f"{model.name}/{path.name}"] = path.read_text()
        config = model / "tokenizer_config.json"
        if config.is_file():
            field = json.loads(config.read_text()).get("chat_template")
            if isinstance(field, str):
                sources[f"{model.name}/tokenizer_config.json"] = field
    assert len(sources) >= 30
    conversations = [template_variables(c, TOKENS) for c in CONVERSATIONS]
    most = {
        name: max(r.steps for r in render_in_process(src, conversations))
        for name, src in sources.items()
    }
    heaviest = max(most, key=lambda n: most[n])
    assert heaviest == f"{NEMOTRON.parent.name}/{NEMOTRON.name}"
    assert most[heaviest] < DEFAULT_LIMITS.steps // 100


@pytest.mark.parametrize(
    ("name", "source"),
    [
        (
            "nested_empty_loops",
            "{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}",
        ),
        (
            "filtered_out_items",
            "{% for i in range(1000) %}{% for j in range(1000) if j < 0 %}{% endfor %}{% endfor %}",
        ),
        (
            "exponential_macro",
            "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(40) }}",
        ),
        (
            "recursive_loop",
            "{% for x in range(1000) recursive %}{% if loop.depth < 10 %}{{ loop(range(1000)) }}{% endif %}{% endfor %}",
        ),
        (
            "big_compare",
            "{% set a = 'a' * 900000 %}{% set b = 'a' * 899999 ~ 'b' %}{% for i in range(1000) %}{% for j in range(1000) %}{% if a == b %}x{% endif %}{% endfor %}{% endfor %}",
        ),
        (
            "big_slice",
            "{% set a = 'a' * 900000 %}{% for i in range(1000) %}{% for j in range(1000) %}{% set c = a[1:] %}{% endfor %}{% endfor %}",
        ),
        (
            "big_literal_text",
            "{% for i in range(1000) %}{% for j in range(1000) %}{% set c %}"
            + "x" * 100_000
            + "{% endset %}{% endfor %}{% endfor %}",
        ),
        (
            "list_join",
            "{% set l = range(19000)|list %}{% for i in range(1000) %}{% for j in range(1000) %}{% set c = l|join(',') %}{% endfor %}{% endfor %}",
        ),
    ],
)
def test_each_kind_of_unbounded_work_runs_out_of_steps(name: str, source: str) -> None:
    """Loops, recursion and work on big values are all charged: none of them runs for free."""
    result = render_bounded(source, {})
    assert (result.outcome, result.shown()) == (RenderOutcome.BUDGET, BUDGET_SHOWN), name
