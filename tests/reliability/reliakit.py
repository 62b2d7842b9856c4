"""Helpers of the reliability tests: the installed `tracker` run as a process, under limits."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TRACKER = Path(sys.executable).with_name("tracker")
GiB = 1024**3


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def tracker(
    state: Path,
    endpoint: str,
    *args: str,
    watchlist: Path | None = None,
    memory_limit: int | None = None,
    timeout: float = 300,
    env: dict[str, str] | None = None,
) -> Run:
    """Run `.venv/bin/tracker ARGS` with its state in `state`, reading the Hub at `endpoint`.

    `memory_limit` caps the process's address space (RLIMIT_AS, bytes): a run that needs more
    fails the way it would on a machine that small, instead of taking the test machine's memory.
    """
    full = dict(os.environ)
    full.update(
        TRACKER_STATE_DIR=str(state),
        TRACKER_HF_ENDPOINT=endpoint,
        TRACKER_WATCHLIST=str(watchlist or state.parent / "watchlist.yaml"),
        TRACKER_RETRY_ATTEMPTS="2",
        TRACKER_HTTP_TIMEOUT_S="10",
    )
    full.update(env or {})

    def limit() -> None:
        if memory_limit is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))

    proc = subprocess.run(
        [str(TRACKER), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=full,
        preexec_fn=limit,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)
