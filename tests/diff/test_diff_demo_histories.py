"""Replay every demo repo history (demo/repos/*/HISTORY.tsv) through diff_snapshots.

Invariants on every step: every tracked file whose parsed content changed yields at least one
change naming it, a file whose parsed content did not change yields none, summaries are one line.
Plus the demo's synthetic revisions, each with its exact expected change.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from diffkit import make_snapshot

from tracker.diff import diff_snapshots
from tracker.shared.domain import Change, Snapshot

DEMO = Path(__file__).resolve().parents[2] / "tracker" / "demo_data" / "repos"
REPOS = (
    sorted(p.name for p in DEMO.iterdir() if (p / "HISTORY.tsv").exists()) if DEMO.exists() else []
)
DIFFED = (".json", ".md", ".py", ".jinja")


def _replay(repo: str) -> list[tuple[str, Snapshot, set[str]]]:
    """(message, snapshot, paths touched) per replica commit, oldest first (weights are not in demo/)."""
    rows = (DEMO / repo / "HISTORY.tsv").read_text().splitlines()[1:]
    commits: dict[int, list[list[str]]] = {}
    for line in rows:
        cols = line.split("\t")
        commits.setdefault(int(cols[0]), []).append(cols)
    files: dict[str, bytes] = {}
    out = []
    for seq in sorted(commits):
        touched = set()
        for cols in commits[seq]:
            path, local = cols[5], cols[6]
            touched.add(path)
            if local == "-":
                files.pop(path, None)
            else:
                files[path] = (DEMO / repo / local).read_bytes()
        tracked = {
            p: b for p, b in files.items() if p.endswith(DIFFED) and not p.endswith(".index.json")
        }
        out.append((commits[seq][0][4], make_snapshot(tracked, sha=f"{seq:040d}"), touched))
    return out


def _parsed(data: bytes | None, path: str) -> object:
    if data is None or not path.endswith(".json"):
        return data
    return json.loads(data)


@pytest.mark.skipif(not REPOS, reason="demo/repos not present")
@pytest.mark.parametrize("repo", REPOS)
def test_every_real_change_is_found_and_no_op_edits_are_silent(repo: str) -> None:
    prev: Snapshot | None = None
    for message, snap, touched in _replay(repo):
        changes = diff_snapshots(prev, snap)
        for c in changes:
            assert c.summary and "\n" not in c.summary, c
            json.dumps([c.before, c.after])
        if prev is None:
            assert changes == ()
        else:
            for path in sorted(
                p for p in touched if p.endswith(DIFFED) and not p.endswith(".index.json")
            ):
                old, new = prev.files.get(path), snap.files.get(path)
                named = [c for c in changes if c.file == path]
                if _parsed(old, path) == _parsed(new, path) and path != "README.md":
                    assert named == [], (repo, message, path, named)
                elif old != new and path != "README.md":
                    assert named, (repo, message, path)
        prev = snap


def _step(repo: str, needle: str) -> tuple[Change, ...]:
    steps = _replay(repo)
    for i, (message, snap, _touched) in enumerate(steps):
        if needle in message:
            return diff_snapshots(steps[i - 1][1], snap)
    pytest.skip(f"{repo}: no revision with {needle!r}")


def _short(changes: tuple[Change, ...]) -> list[tuple[str, str, str, str, object, object]]:
    return [(c.artifact.value, c.kind.value, c.file, c.key, c.before, c.after) for c in changes]


@pytest.mark.skipif(not REPOS, reason="demo/repos not present")
def test_demo_synthetic_revisions() -> None:
    assert _step("mistralai__Mixtral-8x7B-v0.1", "re-serialise") == ()
    assert _short(_step("meta-llama__Llama-2-7b-hf", "eos_token_id 2 -> 32000")) == [
        ("special_tokens", "changed", "generation_config.json", "eos_token_id", 2, 32000)
    ]
    assert _short(_step("meta-llama__Llama-2-7b-hf", "revert eos_token_id")) == [
        ("special_tokens", "changed", "generation_config.json", "eos_token_id", 32000, 2)
    ]
    readme = _short(_step("meta-llama__Llama-2-7b-hf", "edit the body only"))
    assert [r[:4] for r in readme] == [("model_card", "changed", "README.md", "text")]
    added = _short(_step("THUDM__chatglm2-6b", "add configuration_chatglm.py"))
    assert [r[:4] for r in added] == [
        ("custom_code", "added", "configuration_chatglm.py", "configuration_chatglm.py")
    ]
    edited = _short(_step("THUDM__chatglm2-6b", "rope_ratio"))
    assert [r[:4] for r in edited] == [
        ("custom_code", "changed", "configuration_chatglm.py", "configuration_chatglm.py")
    ]
