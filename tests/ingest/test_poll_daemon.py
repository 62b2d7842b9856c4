"""`tracker poll` without --once: scheduled polls with per-job log context, clean stop on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo

pytestmark = pytest.mark.replica


def test_daemon_polls_on_schedule_and_stops_on_sigterm(tmp_path: Path) -> None:
    root = tmp_path / "hub"
    repo = init_repo(root, "acme/tiny")
    commit(repo, {"config.json": b"{}"}, "one")
    (tmp_path / "watchlist.yaml").write_text("repos:\n  - id: acme/tiny\n    poll_interval: 1s\n")
    env = dict(os.environ)
    with Replica(root) as hub:
        env.update(
            TRACKER_STATE_DIR=str(tmp_path / "state"),
            TRACKER_WATCHLIST=str(tmp_path / "watchlist.yaml"),
            TRACKER_HF_ENDPOINT=hub.url,
            TRACKER_LOG_LEVEL="INFO",  # as the systemd unit sets it
        )
        with subprocess.Popen(
            [sys.executable, "-c", "from tracker.cli import main; main()", "poll"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        ) as proc:
            polled: list[dict[str, object]] = []
            deadline = time.monotonic() + 60
            assert proc.stderr is not None
            while len(polled) < 2 and time.monotonic() < deadline:
                line = proc.stderr.readline()
                if not line:
                    break
                if not line.startswith("{"):
                    continue  # stdlib logging (apscheduler) is plain text
                event = json.loads(line)  # not a TTY: structlog writes JSON lines
                if event["event"] == "repo.polled":
                    polled.append(event)
                    if len(polled) == 1:
                        commit(repo, {"README.md": b"# new\n"}, "two")
            proc.send_signal(signal.SIGTERM)
            rc = proc.wait(timeout=30)
            rest = proc.stderr.read()
    assert rc == 0
    assert [e["revisions"] for e in polled] == [1, 1]
    assert all(e["repo"] == "acme/tiny" and e["job"] == "poll" for e in polled)
    assert '"event": "poll.stopped"' in rest


def test_daemon_follows_watchlist_edits(tmp_path: Path) -> None:
    root = tmp_path / "hub"
    for name in ("acme/one", "acme/two"):
        commit(init_repo(root, name), {"config.json": b"{}"}, "init")
    watchlist = tmp_path / "watchlist.yaml"
    watchlist.write_text("repos:\n  - id: acme/one\n    poll_interval: 1h\n")
    env = dict(os.environ)
    with Replica(root) as hub:
        env.update(
            TRACKER_STATE_DIR=str(tmp_path / "state"),
            TRACKER_WATCHLIST=str(watchlist),
            TRACKER_HF_ENDPOINT=hub.url,
            TRACKER_WATCHLIST_SYNC_S="0.5",
            TRACKER_LOG_LEVEL="INFO",
        )
        with subprocess.Popen(
            [sys.executable, "-c", "from tracker.cli import main; main()", "poll"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        ) as proc:  # fmt: skip
            polled: list[str] = []
            deadline = time.monotonic() + 60
            assert proc.stderr is not None
            while "acme/two" not in polled and time.monotonic() < deadline:
                line = proc.stderr.readline()
                if not line:
                    break
                if line.startswith("{") and json.loads(line)["event"] == "repo.polled":
                    polled.append(json.loads(line)["repo"])
                    if polled == ["acme/one"]:  # added while the daemon runs
                        watchlist.write_text(
                            "repos:\n  - id: acme/one\n    poll_interval: 1h\n"
                            "  - id: acme/two\n    poll_interval: 1h\n"
                        )
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
    assert polled == ["acme/one", "acme/two"]
