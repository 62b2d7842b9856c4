"""A small store over two demo repos (Llama-2-7b-hf and chatglm2-6b, their whole demo histories),
built once per module with the Hub replica as `tracker demo` builds its own, and the installed
`tracker` run as a process against it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRACKER = Path(sys.executable).with_name("tracker")
NOW = datetime(2026, 11, 30, 9, 30, tzinfo=UTC)
WATCHLIST = """\
defaults:
  preflight:
    transformers: ["4.57.1", "5.1.0", "5.24.0"]
repos:
  - id: meta-llama/Llama-2-7b-hf
  - id: THUDM/chatglm2-6b
    advisories:  # the demo Hub holds only the files ../shared/corpus has, none of its .py code
      unlisted_code: "the demo Hub's trees leave out the code files auto_map names (the corpus has none)"
"""


@dataclass(frozen=True)
class SmallStore:
    """The state dir and watchlist of the built store, and each repo's revisions, oldest first."""

    state: Path
    watchlist: Path
    revisions: dict[str, list[str]]

    def run(
        self, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`tracker ARGS` as a process over this store."""
        base = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("TRACKER_", "HF_", "HUGGINGFACE_"))
        }
        base.update(
            TRACKER_STATE_DIR=str(self.state), TRACKER_WATCHLIST=str(self.watchlist), COLUMNS="200"
        )
        base.update(env or {})
        return subprocess.run(
            [str(TRACKER), *args], env=base, capture_output=True, text=True, timeout=120
        )


def build_small_store(root: Path, watchlist: str = WATCHLIST) -> SmallStore:
    from tracker.app import build
    from tracker.cli.demo import ensure_demo_hub
    from tracker.replica import Replica
    from tracker.replica.demo import DEMO_TOKEN
    from tracker.settings import load_settings

    ensure_demo_hub(root / "hub")
    wl = root / "watchlist.yaml"
    wl.write_text(watchlist)
    with Replica(root / "hub") as hub:
        app = build(
            load_settings(
                state_dir=root / "state",
                watchlist=wl,
                hf_endpoint=hub.url,
                hf_token=DEMO_TOKEN,
                preflight_cache_dir=ROOT / "state" / "cache" / "preflight",
            ),
            clock=lambda: NOW,
        )
        try:
            app.pipeline.run_cycle()
            revisions = {
                r.repo_id: [rev.sha for rev in app.store.revisions(r.repo_id)]
                for r in app.load_watchlist().repos
            }
        finally:
            app.close()
    return SmallStore(root / "state", wl, revisions)


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def lines_of(text: str, needle: str) -> Sequence[int]:
    """The 1-based lines of `text` holding `needle`."""
    return [i for i, line in enumerate(text.splitlines(), start=1) if needle in line]
