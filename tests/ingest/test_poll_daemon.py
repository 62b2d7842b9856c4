"""`tracker poll` without --once: scheduled polls with per-job log context, clean stop on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
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


def _daemon(tmp_path: Path, url: str, **env: str) -> subprocess.Popen[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    full.update(
        TRACKER_STATE_DIR=str(tmp_path / "state"),
        TRACKER_WATCHLIST=str(tmp_path / "watchlist.yaml"),
        TRACKER_HF_ENDPOINT=url,
        TRACKER_RETRY_ATTEMPTS="1",
        PYTHONFAULTHANDLER="1",  # SIGABRT dumps every thread's stack (`_stopped`)
        **env,
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", "from tracker.cli import main; main()", "poll"],
        env=full, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    watchdog = threading.Timer(90, proc.kill)  # a hung daemon fails the test, never the suite
    watchdog.daemon = True
    watchdog.start()
    return proc


def _stopped(proc: subprocess.Popen[str], timeout: float = 60) -> str:
    """The daemon's stderr once it exits after SIGTERM; a daemon still running after `timeout`
    seconds fails the test with every thread's stack (SIGABRT, faulthandler), so a stop that
    hangs says where (a fresh-clone run at e181eed once waited past 60 s; 206 reruns did not)."""
    try:
        return proc.communicate(timeout=timeout)[1]
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        dump = proc.communicate(timeout=30)[1]
        raise AssertionError(f"the daemon did not stop within {timeout} s:\n{dump}") from None


def _events(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_daemon_logs_failing_repos_at_warning_and_nothing_else_by_default(tmp_path: Path) -> None:
    root = tmp_path / "hub"
    commit(init_repo(root, "acme/tiny"), {"config.json": b"{}"}, "one")
    (tmp_path / "watchlist.yaml").write_text(
        "repos:\n  - id: acme/tiny\n    poll_interval: 1h\n  - id: acme/gone\n    poll_interval: 1h\n"
    )
    with Replica(root) as hub, _daemon(tmp_path, hub.url) as proc:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # the default level (WARNING) prints only the failure
        proc.send_signal(signal.SIGTERM)
        rest = _stopped(proc)
    first = json.loads(line)
    assert (first["event"], first["level"], first["repo"]) == ("repo.gone", "warning", "acme/gone")
    assert "repo not found" in str(first["error"])
    assert proc.returncode == 0
    assert _events(rest) == []  # no info events (poll.started, repo.polled, poll.stopped)


def test_nothing_is_logged_as_processed_after_poll_stopped(tmp_path: Path) -> None:
    root = tmp_path / "hub"
    repo = init_repo(root, "acme/tiny")
    config = {"model_type": "llama", "vocab_size": 32000, "hidden_size": 64}
    for i in range(8):
        config["vocab_size"] += 1
        commit(repo, {"config.json": json.dumps(config).encode()}, f"c{i}")
    (tmp_path / "watchlist.yaml").write_text("repos:\n  - id: acme/tiny\n    poll_interval: 1h\n")
    with Replica(root) as hub, _daemon(tmp_path, hub.url, TRACKER_LOG_LEVEL="INFO") as proc:
        assert proc.stderr is not None
        seen: list[str] = []
        while "revision.stored" not in seen:  # stop while the job is under way
            line = proc.stderr.readline()
            assert line, "the daemon ended before storing a revision"
            seen += [str(e["event"]) for e in _events(line)]
        proc.send_signal(signal.SIGTERM)
        rest = [str(e["event"]) for e in _events(_stopped(proc))]
    assert proc.returncode == 0
    assert "poll.stopping" in rest
    assert rest[-1] == "poll.stopped", rest
    # the job under way stopped between two revisions (the rest is left for the next run):
    # everything it stored or analysed was logged before poll.stopped, nothing after
    events = seen + rest
    stored, analysed = events.count("revision.stored"), events.count("revision.analysed")
    assert 1 <= stored <= 8 and analysed <= stored
    if "poll.interrupted" in events:  # the usual case: SIGTERM came before the last revision
        assert analysed < 8
        assert events.index("poll.interrupted") < events.index("poll.stopped")
        after = events[events.index("poll.interrupted") :]
        assert "revision.stored" not in after and "revision.analysed" not in after
    else:  # a fast machine finished all eight before the signal
        assert stored == analysed == 8
