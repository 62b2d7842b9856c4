"""Exactly once, end to end: a process killed between publishing a revision's advisories and marking the
revision analysed, then restarted, ends with the same advisories as a run that never crashed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tracker.app import build
from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo
from tracker.settings import load_settings

DATA = Path(__file__).resolve().parents[1] / "data" / "configs"
REPO = "acme/llama"

CHILD = """
import os, sys
from tracker.store.store import Store
target = os.environ["CRASH_AT"]
original = Store.mark_analysed
def crash_before_marking(self, repo_id, sha, now=None):
    if sha == target:
        os._exit(9)  # killed: advisories are committed, the revision is not marked analysed
    return original(self, repo_id, sha, now=now)
if target:
    Store.mark_analysed = crash_before_marking
from tracker.app import build

from tracker.settings import load_settings
app = build(load_settings())
report = app.pipeline.run_cycle()
print(sum(r.poll.revisions_ingested for r in report.repos), len(report.advisories))
"""


def _history(root: Path) -> list[str]:
    repo = init_repo(root, REPO)
    config = json.loads((DATA / "meta-llama__Llama-2-7b-hf.json").read_text())
    gen = {
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 0,
        "transformers_version": "4.31.0",
    }
    day = datetime(2024, 1, 1, tzinfo=UTC)
    shas = [
        commit(repo, {"config.json": json.dumps(config, indent=2).encode(),
                      "generation_config.json": json.dumps(gen).encode()},
               "initial upload", date=day),
        commit(repo, {"generation_config.json": json.dumps({**gen, "eos_token_id": 32000}).encode()},
               "new eos", date=day.replace(day=2)),
        commit(repo, {"config.json": json.dumps({**config, "num_hidden_layers": 40}).encode()},
               "deeper", date=day.replace(day=3)),
        commit(repo, {"generation_config.json": json.dumps(gen).encode()},
               "restore eos", date=day.replace(day=4)),
    ]  # fmt: skip
    return shas


def _run(
    state: Path, watchlist: Path, hub: Replica, crash_at: str = ""
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env.update(
        TRACKER_STATE_DIR=str(state),
        TRACKER_WATCHLIST=str(watchlist),
        TRACKER_HF_ENDPOINT=hub.url,
        HF_HUB_DISABLE_XET="1",
        HF_HOME=str(state / "hf"),
        CRASH_AT=crash_at,
    )
    return subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300
    )


def _advisories(state: Path) -> list[tuple[str, str, str, str, tuple[str, ...]]]:
    app = build(load_settings(state_dir=state))
    try:
        out = []
        for a in app.advisories.list_advisories(repo_id=REPO):
            events = a.record["affected"][0]["ranges"][0]["events"]
            fixed = tuple(e["fixed"] for e in events if "fixed" in e)
            out.append((a.id, a.introduced, a.group, a.severity.value, fixed))
        return out
    finally:
        app.close()


@pytest.mark.replica
def test_kill_between_publish_and_mark_then_restart_gives_no_duplicates(tmp_path: Path) -> None:
    root = tmp_path / "hub"
    shas = _history(root)
    watchlist = tmp_path / "watchlist.yaml"
    watchlist.write_text(f"repos:\n  - id: {REPO}\n")
    with Replica(root) as hub:
        clean = _run(tmp_path / "clean", watchlist, hub)
        assert clean.returncode == 0, clean.stderr
        crashed = _run(tmp_path / "crashed", watchlist, hub, crash_at=shas[1])
        assert crashed.returncode == 9, crashed.stderr
        after_crash = _advisories(tmp_path / "crashed")
        # The advisory of the eos change was committed before the kill.
        assert [a[1] for a in after_crash] == [shas[1]]
        resumed = _run(tmp_path / "crashed", watchlist, hub)
        assert resumed.returncode == 0, resumed.stderr
        # It re-analyses shas[1] (its existing advisory is returned, not re-made) and the rest.
        assert resumed.stdout.split() == ["0", str(len(_advisories(tmp_path / "clean")))]
        again = _run(tmp_path / "crashed", watchlist, hub)
        assert again.stdout.split() == ["0", "0"]  # polling again adds nothing

    expected = _advisories(tmp_path / "clean")
    got = _advisories(tmp_path / "crashed")
    assert got == expected  # same ids, revisions, groups, severities and fixed events
    assert len({a[0] for a in got}) == len(got)
    assert len({(a[1], a[2]) for a in got}) == len(got)
    # The eos change at shas[1] is high and fixed by the restore at shas[3].
    eos = [a for a in got if a[1] == shas[1]]
    assert [(a[2], a[3], a[4]) for a in eos] == [("special_tokens", "high", (shas[3],))]
