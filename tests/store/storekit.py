"""Helpers of the store tests: the installed `tracker` run as a process, on a state dir of its own.

A plain module (not conftest) so that test files import it by name.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

TRACKER = Path(sys.executable).with_name("tracker")


def tracker_env(state: Path, **extra: str) -> dict[str, str]:
    """The environment of a `tracker` process: this one's, minus TRACKER_*/HF_*, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env.update(
        TRACKER_STATE_DIR=str(state),
        TRACKER_WATCHLIST=str(state.parent / "watchlist.yaml"),
        TRACKER_RETRY_ATTEMPTS="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HUB_DISABLE_XET="1",
        HF_HOME=str(state.parent / "hf-home"),
    )
    env.update(extra)
    return env


def tracker(
    env: Mapping[str, str], *args: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run `.venv/bin/tracker ARGS` to completion (never raises on a non-zero exit)."""
    return subprocess.run(
        [str(TRACKER), *args],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def head_revision() -> str:
    """The newest migration of this tree (what a migrated store's `alembic_version` must say)."""
    from alembic.script import ScriptDirectory

    from tracker.store.engine import MIGRATIONS

    head = ScriptDirectory(str(MIGRATIONS)).get_current_head()
    assert head is not None
    return head
