"""Issue 26, item 4, through the installed `tracker` against the Hub replica: two file names that
are not UTF-8 and that the Hub's JSON lists as one (each such byte becomes U+FFFD).

Before: a read by that name answers for one of the two files, which fails the other entry's
blob-id check on every poll, so the repo's ingestion stopped for good (`poll --once` exit 1, a
publisher could hide every later change behind two such names). Now the shared name is recorded
as a per-file "could not read (name collision)", a property of the tree, and the rest of each
revision is ingested and analysed."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from reliakit import tracker

from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo

pytestmark = pytest.mark.replica
RID = "acme/names"
CONFIG = (
    Path(__file__).resolve().parents[3] / "shared/corpus/models/openai__gpt-oss-20b/config.json"
).read_bytes()
"""openai/gpt-oss-20b's real config.json."""
ENV = {**os.environ, "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@example.invalid",
       "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@example.invalid"}  # fmt: skip
SHARED = "model-\ufffd.safetensors"


def test_two_names_listed_as_one_are_recorded_and_later_changes_still_arrive(
    tmp_path: Path,
) -> None:
    bare = init_repo(tmp_path / "hub", RID)
    work = tmp_path / "work"
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True, env=ENV)
    (work / "config.json").write_bytes(CONFIG)
    (work / os.fsdecode(b"model-\xff.safetensors")).write_bytes(b"one\n")
    (work / os.fsdecode(b"model-\xfe.safetensors")).write_bytes(b"two\n")
    subprocess.run(["git", "-C", str(work), "add", "-A"], check=True, env=ENV)
    subprocess.run(["git", "-C", str(work), "commit", "-qm", "names"], check=True, env=ENV)
    subprocess.run(["git", "-C", str(work), "push", "-q", str(bare), "main"], check=True, env=ENV)
    first = subprocess.run(
        ["git", "-C", str(bare), "rev-parse", "main"], capture_output=True, text=True, check=True
    ).stdout.strip()
    doc = json.loads(CONFIG)
    second = commit(bare, {"config.json": json.dumps({**doc, "eos_token_id": 7}).encode()}, "eos")
    (tmp_path / "watchlist.yaml").write_text(f"repos:\n  - id: {RID}\n")
    state = tmp_path / "state"
    with Replica(tmp_path / "hub") as hub:
        poll = tracker(state, hub.url, "poll", "--once", "--json")
        assert poll.returncode == 0, poll.stderr[-3000:]
        (report,) = poll.json()
        assert (report["status"], report["error"]) == ("ok", None)
        assert [a["sha"] for a in report["analysed"]] == [first, second]
        # the eos change behind the collided names is published
        assert report["analysed"][1]["changes"] == 1 and report["analysed"][1]["advisories"]
        shown = tracker(state, hub.url, "show", RID, SHARED)
        assert (shown.returncode, shown.stdout) == (2, "")
        assert shown.stderr == (
            f"error: {RID}@{second}: {SHARED} could not be read: name collision: 2 files of the "
            "tree are listed under this name (names that are not UTF-8 listed with U+FFFD), so "
            "none can be read by it\n"
        )
        verify = tracker(state, hub.url, "verify")
        assert verify.returncode == 0, verify.stdout + verify.stderr
        again = tracker(state, hub.url, "poll", "--once", "--json")
        assert again.returncode == 0 and again.json()[0]["revisions_ingested"] == 0
