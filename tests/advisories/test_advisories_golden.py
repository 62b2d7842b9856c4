"""Replay real histories (frozen diff + estimate outputs) through publish; expected severities and golden records.

Golden files in `golden/` are the byte-exact export of the replay (clock and ids pinned).
Regenerate with `UPDATE_GOLDEN=1 pytest tests/advisories/test_advisories_golden.py` and review the diff.
"""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from advkit import HUB, NOW, commit, publish, snap

from tracker.advisories.effects import Context
from tracker.advisories.export import export
from tracker.advisories.schema import validate_record
from tracker.advisories.service import withdraw_rewritten
from tracker.shared.domain import Change, Estimate, RepoId, Sha
from tracker.store.advisories import AdvisoryStore

HERE = Path(__file__).parent
GOLDEN = HERE / "golden"
INPUTS: dict[str, list[dict[str, Any]]] = json.loads((HERE / "data" / "inputs.json").read_text())
R1, MIXTRAL = RepoId("deepseek-ai/DeepSeek-R1"), RepoId("mistralai/Mixtral-8x7B-v0.1")
GRANITE = RepoId("ibm-granite/granite-3.1-1b-a400m-instruct")


CORPUS = HERE.parents[1].parent / "shared" / "corpus" / "histories"
SOURCES = {
    R1: ("deepseek-ai__DeepSeek-R1", "tokenizer_config.json"),
    MIXTRAL: ("mistralai__Mixtral-8x7B-v0.1", "config.json"),
    GRANITE: ("ibm-granite__granite-3.1-1b-a400m-instruct", "tokenizer_config.json"),
}


def _change(raw: dict[str, Any]) -> Change:
    return Change.from_json(raw)


def _snapshots(repo: RepoId) -> dict[str, Any]:
    """The file each revision of `repo`'s frozen inputs was diffed from, as classification reads it."""
    name, file = SOURCES[repo]
    out = {}
    for line in (CORPUS / name / "HISTORY.tsv").read_text().splitlines():
        nn, sha, *_, path = line.split("\t")
        if path == file:
            out[sha] = snap({file: (CORPUS / name / f"{nn}_{sha[:8]}_{file}").read_bytes()}, sha)
    return out


def replay(store: AdvisoryStore) -> dict[str, list[str]]:
    """Publish R1, Mixtral, then Granite, one revision an hour; returns sha -> ids made at it."""
    made: dict[str, list[str]] = {}
    step = 0
    for repo in (R1, MIXTRAL, GRANITE):
        before = None
        snaps = _snapshots(repo)
        for rev in INPUTS[repo]:
            sha, prev = Sha(rev["sha"]), rev["previous"]
            after = Estimate.from_json(rev["estimate"]) if rev.get("estimate") else None
            advs = publish(
                store,
                repo_id=repo,
                commit=commit(sha, prev),
                previous=prev,
                changes=[_change(c) for c in rev["changes"]],
                estimate_before=before,
                estimate_after=after,
                repo_url=f"{HUB}/{repo}",
                overrides=None,
                prefix="TRACKER",
                now=NOW + timedelta(hours=step),
                context=Context(snaps.get(prev) if prev else None, snaps[sha]),
            )
            made[sha] = [f"{a.id} {a.group} {a.severity.value}" for a in advs]
            before = after
            step += 1
    return made


def test_replay_gives_the_expected_advisories(store: AdvisoryStore) -> None:
    made = replay(store)
    assert made == {
        "abf9bba58b8180037a228a50ed7ac547905e415d": [],
        "7bae4bacd0f64d020364cc43d9560588893e94cc": [
            "x_TRACKER-2026-1 tokenizer high"
        ],  # add_bos_token off
        "cb48aa8cb28c160ec8d853707278e0402c9ad01a": [],  # add_bos_token back on: fixes -1
        "5802963a855a4bbe1c7c0bad462759cc4c0cb1d5": [],
        "4dd4b0f2d577d7b74152732d5543a92201481fe2": [
            "x_TRACKER-2026-2 config high",  # model_type mistral -> mixtral
            "x_TRACKER-2026-3 estimate high",  # 7.2B -> 46.7B parameters, cards no longer fit
        ],
        # output_router_logits: training only
        "c56a162543a9560c9f352687e46c8416e6292da6": ["x_TRACKER-2026-4 config low"],
        # sliding_window removed (4096 -> MixtralConfig's default null): a local window, high
        "2e54f233da37e9911a9b5a45f83df0b734337bb4": ["x_TRACKER-2026-5 config high"],
        # sliding_window: null added: MixtralConfig's default, the model reads the same
        "41c1fe324a57f555d8df74b85a1353a583746532": ["x_TRACKER-2026-6 config low"],
        "ccf7a6502058c82841f1be65cf7e35764be35318": [],  # sliding_window back to 4096: fixes -5
        "c2b2ae2f1f9532c7c50045bc57d643f46acf8d30": ["x_TRACKER-2026-7 config high"],
        # 32768 -> null restores -6's value (null) but from a third value: a change of its own
        "58301445dc1378584211722b7ebf8743ec4e192b": ["x_TRACKER-2026-8 config high"],
        "0a854d48947ba295cc76a294b46d5f55f26c4bf4": [],
        # "Updated chat template": the system prompt was rendered twice before
        "c4f8e0dd19f0ce00bca6c9742751d1827e8fa03a": ["x_TRACKER-2026-9 chat_template high"],
    }
    state = {
        a.id: (
            "withdrawn"
            if a.record.get("withdrawn")
            else a.record["affected"][0]["ranges"][0]["events"][1:]
        )
        for a in store.list_advisories()
    }
    assert state["x_TRACKER-2026-1"] == [{"fixed": "cb48aa8cb28c160ec8d853707278e0402c9ad01a"}]
    assert state["x_TRACKER-2026-5"] == [{"fixed": "ccf7a6502058c82841f1be65cf7e35764be35318"}]
    assert state["x_TRACKER-2026-6"] == [{"fixed": "58301445dc1378584211722b7ebf8743ec4e192b"}]
    assert [k for k, v in state.items() if v == []] == [
        "x_TRACKER-2026-2",
        "x_TRACKER-2026-3",
        "x_TRACKER-2026-4",
        "x_TRACKER-2026-7",
        "x_TRACKER-2026-8",
        "x_TRACKER-2026-9",
    ]
    for a in store.list_advisories():
        validate_record(a.record)


def test_golden_records(store: AdvisoryStore, tmp_path: Path) -> None:
    replay(store)
    # a force-push that drops the last two Mixtral commits withdraws what they introduced
    withdraw_rewritten(
        store,
        MIXTRAL,
        [
            Sha("c2b2ae2f1f9532c7c50045bc57d643f46acf8d30"),
            Sha("58301445dc1378584211722b7ebf8743ec4e192b"),
        ],
        NOW + timedelta(days=3),
    )
    out = tmp_path / "export"
    export(store.list_advisories(), out)
    produced = {p.name: p.read_bytes() for p in sorted(out.iterdir())}
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.mkdir(exist_ok=True)
        for old in GOLDEN.iterdir():
            old.unlink()
        for name, data in produced.items():
            (GOLDEN / name).write_bytes(data)
    expected = {p.name: p.read_bytes() for p in sorted(GOLDEN.iterdir())}
    assert sorted(produced) == sorted(expected)
    for name, data in produced.items():
        assert data == expected[name], (
            f"{name} differs from golden/{name} (UPDATE_GOLDEN=1 to regenerate)"
        )
    assert json.loads(produced["x_TRACKER-2026-8.json"])["withdrawn"] == "2026-12-03T09:30:00Z"
    granite = json.loads(produced["x_TRACKER-2026-9.json"])
    assert granite["summary"] == (
        "ibm-granite/granite-3.1-1b-a400m-instruct: chat template renders differently (2 conversations)"
    )
    assert (
        "-<|start_of_role|>system<|end_of_role|>You are a helpful assistant." in granite["details"]
    )


@pytest.mark.postgres
def test_replay_on_postgres_matches_sqlite(fresh_pg: str, store: AdvisoryStore) -> None:
    from advkit import make_store

    pg = make_store(fresh_pg)
    try:
        assert replay(pg) == replay(store)
        assert [a.record for a in pg.list_advisories()] == [
            a.record for a in store.list_advisories()
        ]
    finally:
        pg.engine.dispose()
