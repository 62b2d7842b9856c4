"""End to end through the CLI: watch add/list/remove, poll --once, history, show (against the replica)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tracker.cli import exit_code_for, poll, watch
from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo
from tracker.shared.errors import TrackerError

pytestmark = pytest.mark.replica
T0 = datetime(2025, 1, 1, tzinfo=UTC)


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[Replica]:
    root = tmp_path / "hub"
    tiny = init_repo(root, "acme/tiny")
    commit(tiny, {"config.json": b'{"hidden_size": 8}'}, "one", date=T0)
    commit(tiny, {"README.md": b"# tiny\n"}, "two", date=T0 + timedelta(hours=1))
    other = init_repo(root, "acme/other")
    commit(other, {"config.json": b"{}"}, "one", date=T0)
    with Replica(root) as h:
        yield h


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


def run(tmp_path: Path, hub: Replica, *args: str) -> Result:
    """Run the CLI in-process on a fresh Typer app with our commands (errors mapped like main)."""
    env = {
        "TRACKER_STATE_DIR": str(tmp_path / "state"),
        "TRACKER_WATCHLIST": str(tmp_path / "watchlist.yaml"),
        "TRACKER_HF_ENDPOINT": hub.url,
        "TRACKER_RETRY_ATTEMPTS": "1",
    }
    app = typer.Typer()
    watch.register(app)
    poll.register(app)
    result = CliRunner().invoke(app, list(args), env=env)
    exc = result.exception
    if isinstance(exc, TrackerError):
        return Result(exit_code_for(exc), result.stdout, str(exc))
    if exc is not None and not isinstance(exc, SystemExit):
        raise exc
    return Result(result.exit_code, result.stdout, result.stderr)


def test_entry_point_maps_errors_to_exit_codes(tmp_path: Path) -> None:
    env = dict(os.environ, TRACKER_WATCHLIST=str(tmp_path / "w.yaml"))
    proc = subprocess.run(
        [sys.executable, "-c", "from tracker.cli import main; main()", "watch", "add", "a/../b"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "error: repo id 'a/../b' must be ORG/NAME" in proc.stderr


def test_cli_watch_poll_history_show(tmp_path: Path, hub: Replica) -> None:
    wl = tmp_path / "watchlist.yaml"
    wl.write_text(
        "# my repos\ndefaults:\n  poll_interval: 1h  # hourly\nrepos:\n  - id: acme/tiny\n"
    )
    assert run(tmp_path, hub, "watch", "add", "acme/other", "--backfill", "5").returncode == 0
    assert "# hourly" in wl.read_text() and "backfill: 5" in wl.read_text()
    bad = run(tmp_path, hub, "watch", "add", "acme/../etc")
    assert bad.returncode == 2 and "must be" in bad.stderr

    hub.inject_fault(r"/api/models/acme/tiny/tree/", status=200, body=b"<html><h1>oops</h1></html>",
                     headers={"Content-Type": "text/html"}, times=1)  # fmt: skip
    first = run(tmp_path, hub, "poll", "--once", "--json")
    assert first.returncode == 1, first.stderr  # a repo failed: exit 1, report still printed
    reports = {r["repo_id"]: r for r in json.loads(first.stdout)}
    assert reports["acme/tiny"]["status"] == "failing"
    assert (
        reports["acme/other"]["status"] == "ok" and reports["acme/other"]["revisions_ingested"] == 1
    )

    listed = run(tmp_path, hub, "watch", "list", "--json")
    rows = {r["repo"]: r for r in json.loads(listed.stdout)}
    assert rows["acme/tiny"]["status"] == "failing"
    assert rows["acme/tiny"]["consecutive_failures"] == 1
    assert "not valid JSON" in rows["acme/tiny"]["last_error"]
    assert rows["acme/other"]["revisions"] == 1 and rows["acme/other"]["last_error"] is None
    table = run(tmp_path, hub, "watch", "list")
    assert "failing" in table.stdout and "BadResponseError" in table.stdout

    second = run(tmp_path, hub, "poll", "--once")
    assert second.returncode == 0 and "acme/tiny" in second.stdout
    third = run(tmp_path, hub, "poll", "--once")
    assert "nothing new" in third.stdout

    hist = json.loads(run(tmp_path, hub, "history", "acme/tiny", "--json").stdout)
    assert [r["title"] for r in hist["revisions"]] == ["one", "two"]
    shown = run(tmp_path, hub, "show", "acme/tiny@HEAD~1", "config.json")
    assert shown.stdout == '{"hidden_size": 8}'
    meta = json.loads(run(tmp_path, hub, "show", "acme/tiny", "README.md", "--json").stdout)
    assert (
        meta["kind"] == "content"
        and meta["size"] == 7
        and meta["sha"] == hist["revisions"][1]["sha"]
    )
    missing = run(tmp_path, hub, "show", "acme/tiny@HEAD", "nope.json")
    assert missing.returncode == 3 and "does not exist" in missing.stderr
    unknown = run(tmp_path, hub, "show", "acme/tiny@deadbeef", "config.json")
    assert unknown.returncode == 3

    assert run(tmp_path, hub, "watch", "remove", "acme/other").returncode == 0
    assert "acme/other" not in wl.read_text() and "# my repos" in wl.read_text()
    assert [
        r["repo"] for r in json.loads(run(tmp_path, hub, "watch", "list", "--json").stdout)
    ] == ["acme/tiny"]
