"""A chat-template render that hits its backstop defers the revision ("retry later"): nothing is published,
the revision stays pending, `tracker watch list` says why, and the next cycle analyses it.

Through the installed `tracker` executable, on a local git repo (`watch add --git`). The backstop is
made to fire with a tiny wall-clock allowance (TRACKER_RENDER_BACKSTOP_WALL_S), standing in for a
machine too loaded to answer in time; the template is one that spins until the step budget stops it.
The first chat template is Qwen3-0.6B's (../shared/corpus/models).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from tracker.diff.conversations import CONVERSATIONS
from tracker.replica.repos import commit, init_repo

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "models"
QWEN = CORPUS / "Qwen__Qwen3-0.6B" / "chat_template.jinja"
SPIN = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
TRACKER = str(Path(sys.executable).with_name("tracker"))


def _tracker(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {
        k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_", "HUGGINGFACE_"))
    }
    base.update(
        TRACKER_STATE_DIR=str(tmp_path / "state"),
        TRACKER_WATCHLIST=str(tmp_path / "watchlist.yaml"),
        **env,
    )
    return subprocess.run([TRACKER, *args], env=base, capture_output=True, text=True, timeout=300)


def test_a_backstop_hit_defers_the_revision_and_the_next_cycle_publishes(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "git", "acme/chat")
    day = datetime(2025, 5, 1, tzinfo=UTC)
    commit(repo, {"chat_template.jinja": QWEN.read_bytes()}, "upload", date=day)
    spin_sha = commit(
        repo, {"chat_template.jinja": SPIN.encode()}, "new template", date=day.replace(day=2)
    )
    assert _tracker(tmp_path, "watch", "add", "acme/chat", "--git", str(repo)).returncode == 0

    first = _tracker(tmp_path, "poll", "--once", TRACKER_RENDER_BACKSTOP_WALL_S="0.05")
    assert first.returncode == 1, first.stderr
    (row,) = json.loads(_tracker(tmp_path, "watch", "list", "--json").stdout)
    assert row["status"] == "failing"
    assert row["revisions"] == 2
    assert row["last_error"] == (
        f"analysis of {spin_sha} deferred (retry later): "
        "chat-template render still running after 0.05 s (wall-clock backstop)"
    )
    listed = _tracker(tmp_path, "advisories", "list", "--json")
    assert (listed.returncode, json.loads(listed.stdout)) == (0, [])

    second = _tracker(tmp_path, "poll", "--once")
    assert second.returncode == 0, second.stderr
    (row,) = json.loads(_tracker(tmp_path, "watch", "list", "--json").stdout)
    assert (row["status"], row["last_error"]) == ("ok", None)
    (advisory,) = json.loads(_tracker(tmp_path, "advisories", "list", "--json").stdout)
    shown = _tracker(tmp_path, "advisories", "show", advisory["id"], "--json")
    record = json.loads(shown.stdout)
    assert record["affected"][0]["ranges"][0]["events"] == [{"introduced": spin_sha}]
    broken = [c for c in record["database_specific"]["changes"] if c["kind"] == "broken"]
    assert [c["key"] for c in broken] == sorted(c.id for c in CONVERSATIONS)
    assert {c["after"] for c in broken} == {"<budget: rendering needs over 1,000,000 steps>"}
    assert {c["severity"] for c in broken} == {"high"}
