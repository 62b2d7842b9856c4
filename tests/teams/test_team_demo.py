"""The demo's own three teams (watchlist.yaml's `teams:`) over the demo's whole poll: the installed
`tracker team affected` gives each its own affected set of the same advisories, with reasons."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _affected(demo_run: Any, team: str) -> dict[str, tuple[str, str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env.update(
        TRACKER_STATE_DIR=str(demo_run.root / "state"),
        TRACKER_WATCHLIST=str(ROOT / "watchlist.yaml"),
    )
    done = subprocess.run(
        [str(Path(sys.executable).with_name("tracker")), "team", "affected", team, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return {r["advisory"]: (r["impact"], r["reason"]) for r in json.loads(done.stdout)}


def x(n: int) -> str:
    return f"x_TRACKER-2026-{n}"


def test_the_demo_teams_see_the_same_advisories_differently(demo_run: Any) -> None:
    bot, research, ev = (_affected(demo_run, t) for t in ("support-bot", "research", "eval"))

    def hit(impacts: dict[str, tuple[str, str]]) -> list[int]:
        return sorted(
            int(a.rsplit("-", 1)[1])
            for a, (impact, _) in impacts.items()
            if impact in ("affected", "affects your next upgrade")
        )

    # Llama-2 is x-1 … x-13, granite x-21 (chat template) and x-22 (weights), chatglm2 x-24 … x-32
    assert hit(bot) == [1, 3, 5, 9, 10]
    assert hit(research) == [5, 9, 21, 22, 24, 25, 29, 30, 31, 32]
    assert hit(ev) == [5, 22]
    assert research[x(21)] == (
        "affected",
        "the team applies the chat template, which renders differently",
    )
    assert ev[x(21)] == ("not affected", "the team does not apply the chat template")
    assert research[x(25)][1] == (
        "LoRA r=64, 4096 tokens, batch 2 no longer fits 1 × A100/H100 80 GB (largest batch 2 → 1)"
    )
