"""SIGTERM during an analysis (issue 26, item 6: systemd's stop timeout, 120 s in the units, is
shorter than the analysis budget, 300 s): the daemon hands the analysis back instead of waiting
for it. The installed `tracker poll` analyses two revisions, its analysis worker is then
frozen (SIGSTOP: an analysis that would run its whole budget), a third revision is stored and
sent to it, and SIGTERM arrives. The daemon exits 0 within seconds, the revision is neither
analysed nor recorded as "could not analyse", and the next `poll --once` analyses it.

Before: the daemon waited out the analysis budget (here 60 s) and then recorded the revision as
could not analyse (kind `time`), a false record that keeps it from ever being analysed under
that budget."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path

import pytest
from workkit import Daemon, commit_eos, env_for, run, until

from tracker.replica import Replica
from tracker.replica.repos import init_repo

pytestmark = pytest.mark.replica


def _analysis_worker(pid: int) -> int | None:
    """The pid of `pid`'s child running `tracker.sandbox.analysis_serve` (None: not started)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            if b"tracker.sandbox.analysis_serve" in cmdline:
                return int(child)
    return None


def test_sigterm_hands_the_analysis_back(tmp_path: Path) -> None:
    root = tmp_path / "hub"
    repo = init_repo(root, "acme/slow")
    first = commit_eos(repo, 2)
    (tmp_path / "watchlist.yaml").write_text("repos:\n  - id: acme/slow\n    poll_interval: 1s\n")
    with Replica(root) as hub:
        env = env_for(
            tmp_path,
            hub.url,
            TRACKER_EFFECTS_CACHE_DIR=str(tmp_path / "effects"),
            TRACKER_ANALYSIS_TIMEOUT_S="60",
        )
        daemon = Daemon(env)
        worker: int | None = None
        try:
            until(lambda: daemon.of("revision.stored", sha=first), timeout=120)
            until(lambda: daemon.of("repo.polled", repo="acme/slow"), timeout=180)
            second = commit_eos(repo, 3)  # analysed: the worker runs from then on
            until(lambda: daemon.of("revision.stored", sha=second), timeout=60)

            def analysed(sha: str) -> bool:
                done = run(env, "history", "acme/slow", "--json")
                revs = json.loads(done.stdout)["revisions"] if done.returncode == 0 else []
                return any(r["sha"] == sha and r["analysed"] for r in revs)

            until(lambda: analysed(second), timeout=240, step=1.0)
            worker = _analysis_worker(daemon.proc.pid)
            assert worker is not None
            os.kill(worker, signal.SIGSTOP)  # every later analysis runs its whole budget
            third = commit_eos(repo, 4)
            until(lambda: daemon.of("revision.stored", sha=third), timeout=60)
            time.sleep(1.0)  # the request is sent to the frozen worker
            started = time.monotonic()
            rc = daemon.stop(timeout=40)
            took = time.monotonic() - started
            worker_left = Path(f"/proc/{worker}").exists()
        finally:
            if worker is not None:  # never left stopped, holding the daemon's stderr
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker, signal.SIGKILL)
            if daemon.proc.poll() is None:
                daemon.kill()
        assert rc == 0, daemon.plain[-20:]
        assert not worker_left  # the daemon killed and reaped it
        assert took < 15, took
        assert daemon.of("revision.analysis_handed_back", sha=third)
        assert not daemon.of("revision.could_not_analyse")

        history = json.loads(run(env, "history", "acme/slow", "--json").stdout)
        by_sha = {r["sha"]: r for r in history["revisions"]}
        assert (by_sha[third]["analysed"], by_sha[third]["could_not_analyse"]) == (False, None)
        assert (by_sha[second]["analysed"], by_sha[second]["could_not_analyse"]) == (True, None)

        again = run(env, "poll", "--once", timeout=300)
        assert again.returncode == 0, again.stderr[-2000:]
        history = json.loads(run(env, "history", "acme/slow", "--json").stdout)
        assert [(r["sha"], r["analysed"]) for r in history["revisions"]] == [
            (first, True), (second, True), (third, True),
        ]  # fmt: skip
