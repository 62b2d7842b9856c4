"""Effects by execution (issue 24): the pinned transformers runs on both sides of every config.json
and generation_config.json change of the corpus histories and the demo, and each change's severity
band (and each demo advisory's) agrees with the measured effect; the reviewed table
`data/executed_labels.tsv` (change → expected band → why, grown from the issue's examples) holds."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from typing import Any

import pytest
from labelkit import HERE, Step, corpus_steps, demo_steps, with_changes

from tracker.advisories.classify import Classified, Context, classify
from tracker.advisories.execute import Executor
from tracker.shared.domain import Change, Severity

pytest.importorskip("transformers")
pytestmark = pytest.mark.slow

BAND = {
    "same": Severity.LOW,
    "unread": Severity.LOW,
    "generation-same": Severity.LOW,
    "limit": Severity.MODERATE,
    "generation": Severity.MODERATE,
    "generation-ids": Severity.HIGH,
    "model": Severity.HIGH,
    "tokenizer-same": Severity.LOW,
    "tokenizer-settings": Severity.MODERATE,
    "tokenizer-loads": Severity.MODERATE,
    "tokenizer-special": Severity.HIGH,
    "tokenizer-broken": Severity.HIGH,
    "tokenizer-text": Severity.CRITICAL,
}
"""The severity each measured effect gives (tracker.advisories.rules, `executed-*`)."""
INFERRED_OVER_EXECUTED = ("training-only:", "runtime-only:", "output-flag:", "bookkeeping:")
"""Rules that decide before a measured model effect: keys the model's code reads, but only in
training (dropout) or for speed and memory (use_cache)."""
FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.json",
)


def _labels() -> list[dict[str, str]]:
    with (HERE / "data" / "executed_labels.tsv").open(newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def _classify(
    steps: Sequence[tuple[Step, Sequence[Change]]], executor: Executor
) -> list[tuple[Step, Classified, Any]]:
    out = []
    for step, changes in steps:
        ctx = Context(step.before, step.after, executor=executor)
        for change in changes:
            if change.file in FILES and change.artifact.value != "chat_template":
                measured = ctx.executed(change)
                if measured is not None and measured.kind == "unexecuted":
                    measured = None  # not run (a remote tokenizer class): the inferred rules
                out.append((step, classify(change, context=ctx), measured))
    return out


@pytest.fixture(scope="module")
def executor() -> Executor:
    ex = Executor()
    assert ex.warm()
    return ex


@pytest.fixture(scope="module")
def corpus(executor: Executor) -> list[tuple[Step, Classified, Any]]:
    return _classify(with_changes(list(corpus_steps())), executor)


def _agrees(rows: list[tuple[Step, Classified, Any]]) -> list[str]:
    bad = []
    for step, got, measured in rows:
        where = f"{step.history}@{step.commit} {got.change.file} {got.change.key!r}"
        if measured is None:
            if got.decided_by != "inferred":
                bad.append(f"{where}: decided by {got.decided_by} without a measurement")
            continue
        if got.decided_by == "inferred":
            if not got.rule.startswith(INFERRED_OVER_EXECUTED):
                bad.append(f"{where}: measured {measured.kind} but inferred by {got.rule}")
            continue
        assert got.decided_by == f"transformers {executor_version()}"
        assert got.rationale.count(f"checked with transformers {executor_version()}") == 1
        if got.severity is not BAND[measured.kind]:
            bad.append(f"{where}: {got.severity.value}, measured {measured.kind}")
    return bad


def executor_version() -> str:
    import transformers

    return str(transformers.__version__)


def test_every_corpus_config_change_has_the_band_of_its_measured_effect(
    corpus: list[tuple[Step, Classified, Any]],
) -> None:
    assert len(corpus) == 129  # 115 config and generation changes, 14 tokenizer ones
    measured = [r for r in corpus if r[2] is not None]
    assert len(measured) == 59  # the rest: remote-code configs and tokenizers, whole files,
    # pipeline settings, tokenizers that load at neither side
    assert _agrees(corpus) == []


def test_the_reviewed_label_table_holds(
    corpus: list[tuple[Step, Classified, Any]], demo_run: Any, executor: Executor
) -> None:
    rows = corpus + _classify(demo_steps(demo_run.app), executor)
    labels = _labels()
    assert len(labels) == 18
    for label in labels:
        hits = [
            got
            for step, got, _ in rows
            if (step.history, step.commit, got.change.file, got.change.key)
            == (label["history"], label["commit"], label["file"], label["key"])
        ]
        assert hits, label
        for got in hits:
            assert (got.severity.value, got.decided_by) == (
                label["band"],
                f"transformers {executor_version()}",
            ), (label, got.rationale)


def test_demo_advisories_agree_with_the_measured_effects(demo_run: Any, executor: Executor) -> None:
    rows = _classify(demo_steps(demo_run.app), executor)
    assert _agrees(rows) == []
    checked = 0
    for path in sorted(demo_run.export_first.glob("*.json")):
        record = json.loads(path.read_text())
        db = record["database_specific"]
        bands = []
        for change in db["changes"]:
            if change["file"] not in FILES:
                continue
            assert change["decided_by"] in ("inferred", f"transformers {executor_version()}")
            if change["decided_by"] == "inferred":
                continue
            bands.append(change["severity"])
            checked += 1
        rank = {s.value: i for i, s in enumerate(reversed(list(Severity)))}
        if bands:
            assert rank[db["severity"]] >= max(rank[b] for b in bands), path.name
    assert checked >= 20
