"""A preflight answer that comes back after revisions without it is compared with the last
revision that had it, where users meet it: the installed `tracker` polls a Hub replica.

The history is ours, on a real config (Qwen3-Next-80B-A3B-Thinking from the corpus: 12 full- and
36 linear-attention layers; its weights a small stand-in whose header alone matters):
R1 uploads it; R2 breaks config.json (its own "could not read" advisory; the LoRA answers lost
with it are not published); R3 repairs it with every layer full attention; R4 replaces the
safetensors by a .bin (capacity lost: published); R5 brings them back in F32. Compared with the
revision just before, R3 and R5 would be low "answer found" advisories; against the last revision
that had the answer, R3 moves `q_proj` 12 → 48 and `in_proj_qkvz` 36 → 0 (high) and R5 doubles
the bytes per parameter (moderate). The hostile review of issue 15 found R3 published low.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo

from .test_preflight_pipeline import _tracker, safetensors, tracker_env

pytestmark = [pytest.mark.replica, pytest.mark.slow]

TRACKER = Path(sys.executable).with_name("tracker")
CONFIGS = Path(__file__).parents[1] / "data" / "configs"
REPO = "acme/next-since"
T0 = datetime(2025, 7, 1, tzinfo=UTC)


def _estimate_record(records: list[dict[str, Any]], sha: str) -> dict[str, Any]:
    [record] = [
        r
        for r in records
        if r["database_specific"]["group"] == "estimate"
        and r["affected"][0]["ranges"][0]["events"][0]["introduced"] == sha
    ]
    return record


def _estimate_changes(records: list[dict[str, Any]], sha: str) -> dict[str, dict[str, Any]]:
    return {c["key"]: c for c in _estimate_record(records, sha)["database_specific"]["changes"]}


def _what_to_do(record: dict[str, Any]) -> str:
    return record["details"].split("## What to do\n\n", 1)[1].split("\n", 1)[0]


def test_an_answer_back_after_an_unread_config_or_a_bin_upload_is_compared_with_the_last_known(
    tmp_path: Path,
) -> None:
    config = json.loads((CONFIGS / "Qwen__Qwen3-Next-80B-A3B-Thinking.json").read_text())
    full = {**config, "full_attention_interval": 1}
    repo = init_repo(tmp_path / "hub", REPO)
    steps: list[tuple[dict[str, bytes | None], str]] = [
        (
            {
                "config.json": json.dumps(config).encode(),
                "model.safetensors": safetensors("BF16", 2, 1000),
            },
            "upload",
        ),
        ({"config.json": b"[" * 200}, "a broken config"),
        ({"config.json": json.dumps(full).encode()}, "repaired, every layer full attention"),
        ({"pytorch_model.bin": b"\0" * 4000, "model.safetensors": None}, "weights as .bin"),
        ({"model.safetensors": safetensors("F32", 4, 1000), "pytorch_model.bin": None}, "F32"),
    ]
    shas = [
        commit(repo, files, message, date=T0 + timedelta(days=i))
        for i, (files, message) in enumerate(steps)
    ]
    watchlist = tmp_path / "watchlist.yaml"
    watchlist.write_text(
        f"repos:\n  - id: {REPO}\n    preflight:\n      lora_targets: [q_proj, in_proj_qkvz]\n"
    )
    env = tracker_env(tmp_path, watchlist)
    with Replica(tmp_path / "hub") as hub:
        env["TRACKER_HF_ENDPOINT"] = hub.url
        poll = _tracker(env, "poll", "--once")
        assert poll.returncode == 0, poll.stderr
    exported = _tracker(env, "advisories", "export", str(tmp_path / "osv"))
    assert exported.returncode == 0, exported.stderr
    records = [json.loads(p.read_text()) for p in sorted((tmp_path / "osv").glob("*.json"))]
    unread = "could not read config.json: config is not valid JSON: Expecting value: line 1 column 201 (char 200)"

    # R2: the unreadable config is its own advisory; the LoRA answers lost with it are not
    assert not [
        r
        for r in records
        if r["database_specific"]["group"] == "estimate"
        and r["affected"][0]["ranges"][0]["events"][0]["introduced"] == shas[1]
    ]
    # R3: against R1, the last revision with an answer: high moves, not low "found"
    r3 = _estimate_changes(records, shas[2])
    assert {k: (c["kind"], c["rule"], c["severity"], c["before"], c["after"]) for k, c in r3.items() if k.startswith("preflight.")} == {
        "preflight.lora.q_proj": (
            "changed", "preflight-lora-targets", "high",
            {"attention.full": 12}, {"attention.full": 48},
        ),
        "preflight.lora.in_proj_qkvz": (
            "changed", "preflight-lora-targets", "high",
            {"attention.linear": 36}, {},
        ),
    }  # fmt: skip
    assert r3["preflight.lora.q_proj"]["summary"] == (
        "`q_proj` now resolves to 48 modules in the full-attention layers (was 12) since "
        f"`{shas[0][:12]}` (unresolved at the previous revision: {unread})"
    )
    assert r3["preflight.lora.in_proj_qkvz"]["summary"] == (
        "`in_proj_qkvz` now resolves to 0 modules in the linear-attention layers (was 36) since "
        f"`{shas[0][:12]}` (unresolved at the previous revision: {unread})"
    )
    # R4: the capacity lost with the safetensors is published
    r4 = _estimate_changes(records, shas[3])
    assert (r4["preflight.capacity"]["kind"], r4["preflight.capacity"]["severity"]) == (
        "changed",
        "moderate",
    )
    # R5: against R3 (2.00 bytes/parameter), not a low "now known"
    r5 = _estimate_changes(records, shas[4])["preflight.capacity"]
    assert (r5["kind"], r5["rule"], r5["severity"]) == ("changed", "preflight-capacity", "moderate")
    assert (r5["before"]["bytes_per_param"], r5["after"]["bytes_per_param"]) == (2.0, 4.0)
    assert r5["summary"] == (
        f"what it takes to fetch and hold changed since `{shas[2][:12]}` (unknown at the previous "
        "revision: no safetensors headers (nothing to count bytes from)): 4.00 bytes/parameter: "
        "4-bit weights would take 8.0× less (was 2.00 bytes/parameter: 4-bit weights would take "
        "4.0× less); weights 0.00 GB → 0.00 GB; download 0.00 GB → 0.00 GB, 0.00 → 0.00 h at "
        "126 MB/s"
    )
    # What to do: pin the revision the answers are compared with, not the previous one (R2: an
    # unreadable config.json; R4: no safetensors), which keeps nothing of them
    lead = (
        "The previous revision `{prev}` could not answer this; the answers above are compared "
        "with `{since}`, the last revision before it that could. "
    )
    pin = '`{since}` (`revision="{full}"` in `from_pretrained`)'
    r3_text = lead + (
        "The commit calls this a fix; nothing tracker checks shows the previous revision "
        "misbehaving. To take the change, upgrade to `{new}` or later once you re-check your "
        "hardware plan against the new estimate. To keep the old behaviour, pin " + pin + "."
    )
    r5_text = lead + (
        "Stay on the last revision that had the earlier answers: pin " + pin + " until a later "
        "revision fixes this (tracker marks this advisory fixed when one does). If you have "
        "already upgraded, re-check your hardware plan against the new estimate."
    )
    for at, since, text in ((2, 0, r3_text), (4, 2, r5_text)):
        assert _what_to_do(_estimate_record(records, shas[at])) == text.format(
            prev=shas[at - 1][:12], since=shas[since][:12], full=shas[since], new=shas[at][:12]
        )
