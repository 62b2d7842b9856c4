"""`tracker scan` judges remote-code advisories on the transformers version the code runs (issue 29:
"scan does not use the team's transformers version"): the team profile's with `--team NAME` where
it names one, else the exact versions pinned in the requirements and lockfiles found.

The repo is ours, on a real config (Qwen3-0.6B from the corpus), polled from a Hub replica by the
installed `tracker`: an upload whose remote code imports everywhere, then a modeling file that
starts importing `transformers.utils.import_utils.is_torch_fx_available` (gone since transformers
5.1.0; DeepSeek-V3's remote code does the same). That revision has a custom-code advisory and a
preflight import-break advisory (on 5.1.0 and 5.24.0). A training script pins the first revision:
both advisories come between the pin and HEAD. On transformers 4.57.1 (requirements.txt) the code
still imports, so both are cleared for the pin, with the reason; on the `research` team's 5.24.0
both bear on it, with the name that is missing; `--fail-on high` follows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.preflight.test_preflight_pipeline import (
    BROKEN,
    _remote_code_config,
    _upload,
)
from tests.scan.scankit import write_tree
from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo

pytestmark = [pytest.mark.replica]

ROOT = Path(__file__).resolve().parents[2]
TRACKER = Path(sys.executable).with_name("tracker")
REPO = "acme/qwen3-remote"
T0 = datetime(2025, 6, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def polled(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], list[str], Path]:
    root = tmp_path_factory.mktemp("scan-runtime")
    repo = init_repo(root / "hub", REPO)
    shas = [
        commit(repo, *_upload(_remote_code_config()), date=T0),
        commit(repo, {"modeling_x.py": BROKEN}, "use torch.fx when available", date=T0 + timedelta(days=1)),
    ]  # fmt: skip
    watchlist = root / "watchlist.yaml"
    watchlist.write_text(
        f"""defaults:
  preflight:
    transformers: ["4.57.1", "5.1.0", "5.24.0"]
repos:
  - id: {REPO}
teams:
  - name: research
    transformers: "5.24.0"
    repos:
      - id: {REPO}
        trust_remote_code: true
  - name: no-versions
    repos:
      - id: {REPO}
"""
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env.update(
        TRACKER_STATE_DIR=str(root / "state"),
        TRACKER_WATCHLIST=str(watchlist),
        TRACKER_RETRY_ATTEMPTS="1",
        TRACKER_PREFLIGHT_CACHE_DIR=str(ROOT / "state" / "cache" / "preflight"),
        TRACKER_ADVISORY_PREFIX="TRACKER",
        COLUMNS="200",
    )
    with Replica(root / "hub") as hub:
        polled = subprocess.run(
            [str(TRACKER), "poll", "--once"], env={**env, "TRACKER_HF_ENDPOINT": hub.url},
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
    assert polled.returncode == 0, polled.stderr[-3000:]
    tree = write_tree(
        root / "code",
        {
            "train.py": f'''from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained(
    "{REPO}", revision="{shas[0][:12]}", trust_remote_code=True
)
''',
            "requirements.txt": "torch==2.4.0\ntransformers==4.57.1\nvllm==0.6.3\n",
        },
    )
    return env, shas, tree


def _scan(env: dict[str, str], tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TRACKER), "scan", str(tree), *args],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def _block(stdout: str) -> list[str]:
    """The pin's lines and the runtime lines (the versions found are another test's)."""
    return [line for line in stdout.splitlines() if not line.startswith("requirements.txt:")]


PIN = "train.py:3:9  acme/qwen3-remote @ {pin}  [model, AutoModelForCausalLM.from_pretrained]"
CUSTOM = (
    "x_TRACKER-2026-1 critical (between the pin and HEAD): custom code: remote code modeling_x.py "
    "changed (imports added: transformers.utils.import_utils); now imports from transformers: "
    "transformers.utils.import_utils.is_torch_fx_available"
)
BREAK = (
    "x_TRACKER-2026-2 high (between the pin and HEAD): estimate: remote code no longer imports "
    "on transformers 5.1.0: is_torch_fx_available (not in transformers.utils.import_utils, gone "
    "since 5.1.0); and 1 more"
)


def test_the_versions_in_the_code_clear_what_does_not_break_them(polled: Any) -> None:
    env, shas, tree = polled
    done = _scan(env, tree, "--fail-on", "low")
    assert (done.returncode, done.stderr) == (0, "")
    assert _block(done.stdout) == [
        PIN.format(pin=shas[0][:12]),
        f"  watched; stale: 1 revision behind HEAD; HEAD {shas[1][:12]}",
        f"  cleared {CUSTOM}",
        "    the remote code imports on transformers 4.57.1 (requirements.txt:2:1) (it is still "
        "new code that runs under trust_remote_code: review it)",
        f"  cleared {BREAK}",
        "    the import changed on transformers 5.1.0, 5.24.0 only; the code runs 4.57.1 "
        "(requirements.txt:2:1)",
        "runs transformers: 4.57.1 (requirements.txt:2:1)",
        "runs vllm: 0.6.3 (requirements.txt:3:1)",
        "1 pins of 1 repos in 2 files; 1 behind HEAD; 0 advisory findings; 2 cleared by the "
        "transformers version",
    ]
    # a team whose profile names no version: the code's own
    assert _scan(env, tree, "--team", "no-versions").stdout == done.stdout


def test_the_team_version_decides_where_the_profile_names_one(polled: Any) -> None:
    env, shas, tree = polled
    done = _scan(env, tree, "--team", "research")
    assert (done.returncode, done.stderr) == (0, "")
    assert _block(done.stdout) == [
        PIN.format(pin=shas[0][:12]),
        f"  watched; stale: 1 revision behind HEAD; HEAD {shas[1][:12]}",
        f"  {CUSTOM}",
        "    the remote code does not import on transformers 5.24.0 (team research) (names "
        "missing: transformers.utils.import_utils.is_torch_fx_available)",
        f"  {BREAK}",
        "    the import changed on transformers 5.1.0, 5.24.0; the code runs 5.24.0 (team "
        "research)",
        "runs transformers: 5.24.0 (team research)",
        "runs vllm: 0.6.3 (requirements.txt:3:1)",
        "1 pins of 1 repos in 2 files; 1 behind HEAD; 2 advisory findings",
    ]
    failed = _scan(env, tree, "--team", "research", "--fail-on", "high")
    assert (failed.returncode, failed.stderr) == (
        1,
        "error: 2 advisories at high or worse bear on the pins: x_TRACKER-2026-1, "
        "x_TRACKER-2026-2\n",
    )
    doc = json.loads(_scan(env, tree, "--team", "research", "--format", "json").stdout)
    assert doc["runtime"] == {
        "transformers": [{"version": "5.24.0", "source": "team research"}],
        "vllm": [{"version": "0.6.3", "source": "requirements.txt:3:1"}],
    }
    [pin] = doc["pins"]
    assert ([a["id"] for a in pin["advisories"]], pin["cleared"]) == (
        ["x_TRACKER-2026-1", "x_TRACKER-2026-2"], [],
    )  # fmt: skip
    unknown = _scan(env, tree, "--team", "nobody")
    assert (unknown.returncode, unknown.stderr) == (
        3,
        "error: no team 'nobody' in the watchlist (teams: research, no-versions)\n",
    )


def test_no_exact_version_keeps_them_and_says_why(polled: Any, tmp_path: Path) -> None:
    env, _, tree = polled
    loose = write_tree(
        tmp_path / "loose",
        {
            "train.py": (tree / "train.py").read_text(),
            "requirements.txt": "transformers>=4.40\n",
        },
    )
    done = _scan(env, loose, "--format", "json")
    [pin] = json.loads(done.stdout)["pins"]
    assert [(a["id"], a["note"]) for a in pin["advisories"]] == [
        ("x_TRACKER-2026-1", "the transformers version is unknown (no team profile names it; no "
         "requirement or lockfile pins one exactly): whether the remote code imports was not "
         "checked"),
        ("x_TRACKER-2026-2", "the import changed on transformers 5.1.0, 5.24.0; the transformers "
         "version the code runs is unknown (no team profile names it; no requirement or lockfile "
         "pins one exactly)"),
    ]  # fmt: skip
