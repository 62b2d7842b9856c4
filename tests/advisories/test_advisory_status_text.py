"""A fixed advisory names its fixing commit, and a withdrawn one names the force-push that withdrew it,
in the text an on-call engineer reads (issue 11 item 2); a token id outside the vocabulary is a
regression. Through the installed `tracker` over a repo the Hub replica serves.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo, set_ref

pytestmark = pytest.mark.replica

TRACKER = Path(sys.executable).with_name("tracker")
CONFIG = Path(__file__).parents[1] / "data" / "configs" / "Qwen__Qwen2.5-1.5B.json"
RID = "acme/eos"
DAY = datetime(2025, 3, 1, 9, 30, tzinfo=UTC)


def _gen(eos: int) -> bytes:
    return json.dumps({"bos_token_id": 151643, "eos_token_id": eos}).encode()


def test_fix_and_withdrawal_are_named_in_the_text(tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    repo = init_repo(hub, RID)
    config = CONFIG.read_bytes()
    vocab = json.loads(config)["vocab_size"]
    c0 = commit(repo, {"config.json": config, "generation_config.json": _gen(151643)}, "upload",
                date=DAY)  # fmt: skip
    c1 = commit(repo, {"generation_config.json": _gen(vocab)}, "Set eos", author="Ann Lee <ann@example.com>",
                date=DAY.replace(day=2))  # fmt: skip
    c2 = commit(repo, {"generation_config.json": _gen(151643)}, "Revert eos to 151643",
                author="Bo Chen <bo@example.com>", date=DAY.replace(day=3))  # fmt: skip
    (tmp_path / "watchlist.yaml").write_text(f"repos:\n  - id: {RID}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}

    def tracker(*args: str) -> Any:
        done = subprocess.run([str(TRACKER), *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout) if "--json" in args else done.stdout

    with Replica(hub) as replica:
        env["TRACKER_HF_ENDPOINT"] = replica.url
        tracker("poll", "--once")
        (listed,) = tracker("advisories", "list", "--json")
        record = tracker("advisories", "show", listed["id"], "--json")
        d = record["details"]
        assert f"**Kind: a regression**: `eos_token_id` {vocab} in generation_config.json is " in d
        assert f"(`vocab_size` {vocab}: ids 0 to {vocab - 1})" in d
        assert "“Set eos” by Ann Lee on 2025-03-02 09:30 UTC" in d
        status = d.split("## Status\n\n", 1)[1].split("\n\n", 1)[0]
        assert status.startswith(
            f"**Fixed** by commit [`{c2[:12]}`](https://huggingface.co/{RID}/commit/{c2}) "
            "“Revert eos to 151643” by Bo Chen on 2025-03-03 09:30 UTC:"
        )
        assert f"upgrade to `{c2[:12]}` or later" in status
        set_ref(repo, "main", c0)
        c3 = commit(
            repo, {"README.md": b"---\nlicense: mit\n---\n"}, "card", date=DAY.replace(day=4)
        )
        tracker("poll", "--once")
        record = tracker("advisories", "show", listed["id"], "--json")
        assert record["withdrawn"]
        status = record["details"].split("## Status\n\n", 1)[1].split("\n\n", 1)[0]
        assert status.startswith(f"**Withdrawn** on {record['withdrawn']}: introducing commit {c1}")
        assert (
            "(the force-push to `main` seen " in status
            and f": head `{c2[:12]}` → `{c3[:12]}`, history kept up to `{c0[:12]}`)" in status
        )
        assert "**Fixed**" not in record["details"]
