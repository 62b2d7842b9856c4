"""Severity by effect where users meet it: the installed `tracker` polls a Hub replica and
`tracker advisories list/show --json` show the severities and the words that explain them.

The repo is google/t5-v1_1-base from ../shared/corpus/models (real config.json and
generation_config.json). Its history here is a stand-in: the real repo's revisions are not in the
corpus, so the edits (a re-indent, `num_beams` in config.json, the FFN switched from gated-gelu
to relu, generation_config.json added, `num_beams` changed again) are ours, on the real files.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo

pytestmark = pytest.mark.replica

MODEL = (
    Path(__file__).resolve().parents[2].parent
    / "shared"
    / "corpus"
    / "models"
    / "google__t5-v1_1-base"
)
REPO = "google/t5-v1_1-base"
T0 = datetime(2025, 3, 1, tzinfo=UTC)
TRACKER = Path(sys.executable).with_name("tracker")


def _tracker(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TRACKER), *args], env=env, capture_output=True, text=True, timeout=300
    )


def test_poll_then_advisories_show_severity_by_effect(tmp_path: Path) -> None:
    config_bytes = (MODEL / "config.json").read_bytes()
    config = json.loads(config_bytes)
    repo = init_repo(tmp_path / "hub", REPO)
    shas = []
    for day, (files, message) in enumerate(
        [
            ({"config.json": config_bytes}, "upload"),
            ({"config.json": json.dumps(config, indent=4).encode()}, "re-indent"),
            ({"config.json": json.dumps({**config, "num_beams": 4}, indent=2).encode()}, "beams"),
            (
                {
                    "config.json": json.dumps(
                        {**config, "num_beams": 4, "feed_forward_proj": "relu"}, indent=2
                    ).encode()
                },
                "relu FFN",
            ),
            (
                {"generation_config.json": (MODEL / "generation_config.json").read_bytes()},
                "generation config",
            ),
            (
                {
                    "config.json": json.dumps(
                        {**config, "num_beams": 1, "feed_forward_proj": "relu"}, indent=2
                    ).encode()
                },
                "beams again",
            ),
        ]
    ):
        shas.append(commit(repo, files, message, date=T0 + timedelta(days=day)))
    (tmp_path / "watchlist.yaml").write_text(f"repos:\n  - id: {REPO}\n")
    with Replica(tmp_path / "hub") as hub:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("TRACKER_", "HF_", "HUGGINGFACE_"))
        }
        env |= {
            "TRACKER_STATE_DIR": str(tmp_path / "state"),
            "TRACKER_WATCHLIST": str(tmp_path / "watchlist.yaml"),
            "TRACKER_HF_ENDPOINT": hub.url,
            "TRACKER_RETRY_ATTEMPTS": "1",
        }
        poll = _tracker(env, "poll", "--once", "--json")
    assert poll.returncode == 0, poll.stderr
    (report,) = json.loads(poll.stdout)
    per_revision = {a["sha"]: len(a["advisories"]) for a in report["analysed"]}
    assert [per_revision[s] for s in shas] == [0, 0, 1, 2, 1, 1]  # the re-indent publishes nothing

    listed = _tracker(env, "advisories", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    # (the estimate's own figures are the estimate's business: only its wording is checked here)
    summaries = [
        re.sub(r"estimate: parameters .*", "estimate: parameters …", r["summary"]) for r in rows
    ]
    assert list(zip([r["severity"] for r in rows], summaries, strict=True)) == [
        ("moderate", f"{REPO}: config: num_beams added: 4"),
        ("high", f'{REPO}: config: feed_forward_proj changed: "gated-gelu" → "relu"'),
        # the FFN switch also moves what LoRA's `all-linear` resolves to (wi_0/wi_1 → wi): high
        ("high", f"{REPO}: estimate: parameters …"),
        ("moderate", f"{REPO}: generation defaults: generation_config.json added"),
        ("low", f"{REPO}: config: num_beams changed: 4 → 1"),
    ]
    changes = [_changes(env, r["id"]) for r in rows]
    # issue 24: each decided by running transformers 5.24.0 on both revisions
    assert changes[0]["num_beams"]["rule"] == "executed-generation"
    assert changes[0]["num_beams"]["decided_by"] == "transformers 5.24.0"
    assert (
        "checked with transformers 5.24.0: generate() defaults change (greedy → beam search "
        "(4 beams); `num_beams` 1 → 4), from config.json (no generation_config.json)"
        in changes[0]["num_beams"]["rationale"]
    )
    # the T5 FFN is built with another module type
    assert changes[1]["feed_forward_proj"]["rule"] == "executed-model"
    assert "T5DenseGatedActDense → T5DenseActDense" in changes[1]["feed_forward_proj"]["rationale"]
    assert changes[3][""]["rule"] == "file-added"
    assert changes[3][""]["decided_by"] == "inferred"
    # generation_config.json governs now: config.json's num_beams is not read
    assert changes[4]["num_beams"]["rule"] == "executed-no-effect"
    assert (
        "the effective GenerationConfig (from generation_config.json) is the same"
        in changes[4]["num_beams"]["rationale"]
    )


def _changes(env: dict[str, str], advisory_id: str) -> dict[str, Any]:
    shown = _tracker(env, "advisories", "show", advisory_id, "--json")
    assert shown.returncode == 0, shown.stderr
    record = json.loads(shown.stdout)
    return {c["key"]: c for c in record["database_specific"]["changes"]}
