"""The CLI as an operator meets it (issue 11): the installed `tracker` run as a process over a copy of
the demo's store. `tracker demo` from an empty directory, read-only commands that create no store,
`estimate` of an ingested revision from the store (revisions resolved as `show` resolves them),
combined advisory filters, settings as options, Markdown for a terminal, and every table readable
at 80 columns (no repo name, id or number cut).
"""

from __future__ import annotations

import json
import os
import pty
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tracker.replica.demo import DEMO_DIR

pytestmark = pytest.mark.slow

TRACKER = Path(sys.executable).with_name("tracker")
GOLDEN = Path(__file__).parent / "demo" / "golden"
UNREACHABLE = "http://127.0.0.1:9"
REPOS = [
    str(r["id"]) for r in yaml.safe_load((DEMO_DIR / "watchlist.yaml").read_text())["repos"]
]  # (its `teams:` block lists repos too)


def _env(state: Path, **extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_", "COLUMNS"))}
    return {**base, "TRACKER_STATE_DIR": str(state), "COLUMNS": "80", **extra}


def run(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TRACKER), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def demo_state(demo_run: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the demo's store (and a link to its built Hub) in a fresh state dir."""
    state = tmp_path_factory.mktemp("operator") / "state"
    state.mkdir()
    src = sqlite3.connect(demo_run.root / "state" / "tracker.db")
    dst = sqlite3.connect(state / "tracker.db")
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    (state / "demo-hub").symlink_to(demo_run.root / "hub")
    return state


def test_demo_from_an_empty_directory_uses_the_packaged_watchlist(
    demo_state: Path, tmp_path: Path
) -> None:
    done = run(tmp_path, _env(demo_state, COLUMNS="200"), "demo")
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"polling {DEMO_DIR / 'watchlist.yaml'}" in done.stdout
    assert "nothing new: every repo is at its last ingested revision" in done.stdout
    for repo in REPOS:
        assert repo in done.stdout
    assert list(tmp_path.iterdir()) == []  # no watchlist.yaml, no state/ in the working directory


def test_read_only_commands_create_no_store(tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = _env(state)
    listed = run(tmp_path, env, "advisories", "list", "--json")
    assert (listed.returncode, listed.stdout.strip()) == (0, "[]")
    assert listed.stderr.startswith(f"note: no store at {state / 'tracker.db'}: nothing has been")
    watched = run(tmp_path, env, "watch", "list")
    assert watched.returncode == 0
    assert "note: watchlist.yaml does not exist: no repo is watched" in watched.stderr
    for args in (("history", "a/b"), ("advisories", "show", "x_TRACKER-2026-1")):
        done = run(tmp_path, env, *args)
        assert done.returncode == 3, done.stderr
        assert done.stderr.startswith(f"error: no store at {state / 'tracker.db'}")
    assert not state.exists()


def test_estimate_reads_an_ingested_revision_from_the_store(demo_state: Path) -> None:
    env = _env(demo_state, TRACKER_HF_ENDPOINT=UNREACHABLE, COLUMNS="200")
    cwd = demo_state.parent
    repo = "meta-llama/Llama-2-7b-hf"
    shown = run(cwd, env, "show", f"{repo}@HEAD~2", "config.json", "--json")
    sha = json.loads(shown.stdout)["sha"]
    for rev in ("HEAD~2", sha[:7]):
        done = run(
            cwd, env, "estimate", f"{repo}@{rev}", "--lora-rank", "8", "--train-seq-len", "4096"
        )
        assert done.returncode == 0, done.stderr
        assert f"{repo}@{sha[:12]} (ingested revision {sha}, read from the store)" in done.stdout
        assert "settings: defaults + flags --lora-rank 8, --train-seq-len 4096" in done.stdout
        assert "assumed training: 4,096-token sequences, batch 1; LoRA rank 8 on all-linear" in (
            done.stdout
        )
        assert "assumed cost: 10 epochs × 50,000 samples × 2,048 tokens = 1,024,000,000 tokens" in (
            done.stdout
        )
    as_json = json.loads(run(cwd, env, "estimate", f"{repo}@{sha[:7]}", "--json").stdout)
    assert as_json["source"]["target"].startswith(f"{repo}@{sha[:12]} (ingested revision")
    assert as_json["settings"]["lora_rank"] == 16
    missing = run(cwd, env, "estimate", f"{repo}@HEAD~99")
    assert missing.returncode == 3
    assert "HEAD~n and short shas resolve against ingested revisions only" in missing.stderr


def _golden() -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(GOLDEN.glob("x_*.json"))]


def test_advisory_filters_combine(demo_state: Path) -> None:
    env = _env(demo_state)
    repos = ("THUDM/chatglm2-6b", "Qwen/Qwen-7B-Chat")
    done = run(
        demo_state.parent,
        env,
        "advisories",
        "list",
        "--min-severity",
        "HIGH",
        "--repo",
        repos[0],
        "--repo",
        repos[1],
        "--json",
    )
    assert done.returncode == 0, done.stderr
    got = sorted(r["id"] for r in json.loads(done.stdout))
    want = sorted(
        r["id"]
        for r in _golden()
        if r["database_specific"]["repo"] in repos
        and r["database_specific"]["severity"] in ("high", "critical")
    )
    assert (
        got == want and len(want) == 10
    )  # chatglm2's model_type beside its remote AutoConfig: low (issue 24)
    exact = run(demo_state.parent, env, "advisories", "list", "--severity", "Critical", "--json")
    assert {r["severity"] for r in json.loads(exact.stdout)} == {"critical"}
    bad = run(demo_state.parent, env, "advisories", "list", "--min-severity", "urgent")
    assert bad.returncode == 2
    assert bad.stderr == (
        "error: --min-severity 'urgent' must be one of critical, high, moderate, low\n"
    )


def test_settings_as_options(demo_state: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in _env(demo_state).items() if k != "TRACKER_STATE_DIR"}
    done = run(
        tmp_path,
        env,
        "--state-dir",
        str(demo_state),
        "--watchlist",
        str(DEMO_DIR / "watchlist.yaml"),
        "watch",
        "list",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    assert [r["repo"] for r in json.loads(done.stdout)] == REPOS
    assert all(r["status"] == "ok" for r in json.loads(done.stdout))
    bad = run(tmp_path, env, "--log-level", "loud", "watch", "list")
    assert bad.returncode == 2
    assert "TRACKER_LOG_LEVEL: 'LOUD' is not one of" in bad.stderr


def test_advisory_show_is_raw_markdown_in_a_pipe_and_rendered_on_a_terminal(
    demo_state: Path,
) -> None:
    env = _env(demo_state)
    record = json.loads((GOLDEN / "x_TRACKER-2026-21.json").read_text())
    piped = run(demo_state.parent, env, "advisories", "show", "x_TRACKER-2026-21")
    assert piped.returncode == 0
    assert piped.stdout.endswith("\n\n" + record["details"] + "\n")
    main, child = pty.openpty()
    proc = subprocess.Popen(
        [str(TRACKER), "advisories", "show", "x_TRACKER-2026-21"],
        cwd=demo_state.parent,
        env={**env, "TERM": "xterm"},
        stdin=child,
        stdout=child,
        stderr=child,
    )
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait(timeout=120) == 0
    os.close(main)
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode())
    assert "## What changed" not in shown and "**Kind" not in shown  # rendered, not raw
    assert "Kind: a fix of an earlier defect" in shown
    assert "What to do" in shown


def _check_80(out: str, whole: list[str]) -> None:
    lines = out.splitlines()
    assert lines, out
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)
    for token in whole:
        assert any(token in line for line in lines), token


def test_every_table_is_readable_at_80_columns(demo_state: Path) -> None:
    env = _env(demo_state)
    cwd = demo_state.parent
    wl = ["--watchlist", str(DEMO_DIR / "watchlist.yaml")]
    watched = run(cwd, env, *wl, "watch", "list")
    _check_80(watched.stdout, [*REPOS, "revisions"])
    for row in json.loads(run(cwd, env, *wl, "watch", "list", "--json").stdout):
        assert re.search(rf"{re.escape(row['repo'])}\s+ok\s+{row['revisions']}\b", watched.stdout)
    listed = run(cwd, env, "advisories", "list")
    with_advisories = sorted({r["database_specific"]["repo"] for r in _golden()})
    _check_80(listed.stdout, [f"x_TRACKER-2026-{n} " for n in range(1, 51)] + with_advisories)
    history = run(cwd, env, "history", "meta-llama/Llama-2-7b-hf")
    _check_80(history.stdout, ["[synthetic]"])  # a title is text, never rich markup
    assert re.search(r"^\s*15\s+ef1050a86f9e\s", history.stdout, re.M)
    suppressed = run(cwd, env, "advisories", "list", "--suppressed")
    assert suppressed.returncode == 0
    demo = run(cwd, env, "demo")
    _check_80(demo.stdout, REPOS)
    assert "(not shown at 80 columns: " in demo.stdout
