"""SIGTERM while a download stalls (issue 26: "SIGTERM ends a run within its documented stop time").

The installed `tracker poll` daemon reads a repo through the fault proxy, which sends every file
download one byte every 0.5 s (a body that never trips a per-read timeout; the stall detector
needs a whole TRACKER_HTTP_TIMEOUT_S window, 20 s, and then the call is retried up to
TRACKER_REQUEST_DEADLINE_S, 120 s). SIGTERM arrives while it trickles. The daemon exits 0 within
15 s (its documented stop: at once, or within one read timeout of a body that sends nothing); the
revision is not stored (left for the next poll: no "could not read", `tracker verify` all match),
the repo is not marked failing, and the next `poll --once` through a clean proxy ingests it.

Before: the fetch ran on, under the stall detector and the call's deadline, for 20 s and more
after the SIGTERM."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from workkit import Daemon, commit_eos, env_for, run, until

from tracker.replica import Replica
from tracker.replica.faultproxy import Fault, FaultProxy, Mode
from tracker.replica.repos import init_repo

pytestmark = pytest.mark.replica


def test_sigterm_while_a_download_stalls_ends_the_daemon_at_once(tmp_path: Path) -> None:
    root = tmp_path / "hub"
    repo = init_repo(root, "acme/stall")
    sha = commit_eos(repo, 2)
    (tmp_path / "watchlist.yaml").write_text("repos:\n  - id: acme/stall\n")
    with Replica(root) as hub, FaultProxy(hub.url, seed=1) as proxy:
        proxy.add(Fault(Mode.TRICKLE, path=r"/resolve/", chunk=1, interval_s=0.5))
        env = env_for(
            tmp_path,
            proxy.url,
            TRACKER_HTTP_TIMEOUT_S="20",
            TRACKER_REQUEST_DEADLINE_S="120",
        )
        daemon = Daemon(env)
        try:
            until(lambda: sum(proxy.applied().values()) >= 1, timeout=180, step=0.2)
            time.sleep(1.5)  # the download is under way, a byte every 0.5 s
            started = time.monotonic()
            rc = daemon.stop(timeout=60)
            took = time.monotonic() - started
        finally:
            if daemon.proc.poll() is None:
                daemon.kill()
        assert rc == 0, daemon.plain[-20:]
        assert took < 15, took
        assert daemon.of("repo.fetch_abandoned", repo="acme/stall")
        assert not daemon.of("revision.stored")

        listed = json.loads(run(env, "watch", "list", "--json").stdout)
        assert [(r["repo"], r["status"] == "failing", r["last_error"]) for r in listed] == [
            ("acme/stall", False, None)
        ]
        verify = run(env, "verify")
        assert verify.returncode == 0, verify.stdout + verify.stderr

        proxy.clear()
        again = run(env, "poll", "--once", timeout=300)
        assert again.returncode == 0, again.stderr[-2000:]
        history = json.loads(run(env, "history", "acme/stall", "--json").stdout)
        assert [(r["sha"], r["analysed"]) for r in history["revisions"]] == [(sha, True)]
