"""The systemd units as systemd reads them, and `tracker poll` as systemd runs it.

`systemd-analyze verify` accepts every unit (Debian's systemd package; the test set-up installs
it when missing) with ExecStart pointed at this checkout's installed `tracker` (the units name
/opt/tracker, the README's install path; everything else is verified as written), and
`systemd-analyze security` scores each 2.0 or better. Under `Type=notify` the daemon reports
READY=1 once it is working, WATCHDOG=1 every half of WatchdogSec, STOPPING=1 on SIGTERM.
"""

from __future__ import annotations

import itertools
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tracker.replica.repos import commit, init_repo

UNITS = Path(__file__).resolve().parents[1] / "systemd"
TRACKER = Path(sys.executable).with_name("tracker")
NAMES = ["tracker-poll.service", "tracker-poll@.service", "tracker-api.service"]


def _analyze() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:  # the test set-up installs Debian's systemd package
        subprocess.run(["apt-get", "install", "-y", "-q", "systemd"], check=True,
                       capture_output=True, timeout=600)  # fmt: skip
        found = shutil.which("systemd-analyze")
    assert found is not None
    return found


@pytest.fixture(scope="module")
def units(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("units")
    for name in NAMES:
        text = (UNITS / name).read_text()
        assert "ExecStart=/opt/tracker/.venv/bin/tracker " in text
        (out / name).write_text(text.replace("/opt/tracker/.venv/bin/tracker", str(TRACKER)))
    return out


def test_the_units_are_the_three_named() -> None:
    assert sorted(p.name for p in UNITS.glob("*.service")) == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_systemd_analyze_verify_accepts_the_unit(units: Path, name: str) -> None:
    done = subprocess.run([_analyze(), "verify", str(units / name)], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert (done.returncode, done.stderr) == (0, ""), done.stderr


@pytest.mark.parametrize("name", NAMES)
def test_systemd_analyze_security_scores_the_unit_2_or_better(units: Path, name: str) -> None:
    done = subprocess.run([_analyze(), "security", "--offline=true", str(units / name)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    m = re.search(r"Overall exposure level for \S+: (\d+\.\d)", done.stdout + done.stderr)
    assert m is not None, done.stdout[-500:] + done.stderr[-500:]
    assert float(m.group(1)) <= 2.0, done.stdout


def test_poll_units_are_notify_with_a_watchdog_and_reload_by_sighup() -> None:
    for name in ["tracker-poll.service", "tracker-poll@.service"]:
        lines = set((UNITS / name).read_text().splitlines())
        assert {"Type=notify", "WatchdogSec=60", "ExecReload=/bin/kill -HUP $MAINPID"} <= lines


def test_the_daemon_speaks_sd_notify(tmp_path: Path) -> None:
    git = init_repo(tmp_path / "git", "acme/local")
    commit(git, {"config.json": b"{}"}, "init")
    (tmp_path / "watchlist.yaml").write_text(
        f"repos:\n  - id: acme/local\n    git: {git}\n    poll_interval: 1h\n"
    )
    path = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(60)
    env = {
        "PATH": "/usr/bin:/bin",
        "TRACKER_STATE_DIR": str(tmp_path / "state"),
        "TRACKER_WATCHLIST": str(tmp_path / "watchlist.yaml"),
        "HF_HOME": str(tmp_path / "hf-home"),
        "NOTIFY_SOCKET": str(path),
        "WATCHDOG_USEC": "400000",  # WatchdogSec=0.4: a ping every quarter of it, 0.1 s
    }
    proc = subprocess.Popen([str(TRACKER), "poll"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        messages: list[tuple[float, str]] = []
        while sum(m == "WATCHDOG=1" for _, m in messages) < 5:
            messages.append((time.monotonic(), sock.recv(4096).decode()))
        proc.send_signal(signal.SIGTERM)
        messages.append((time.monotonic(), sock.recv(4096).decode()))
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        assert proc.stderr is not None
        proc.stderr.close()
        sock.close()
    texts = [m for _, m in messages]
    assert texts[0].startswith("READY=1\nSTATUS=worker ") and texts[0].endswith(": 1 repos")
    assert texts[1:-1] == ["WATCHDOG=1"] * 5
    assert texts[-1] == "STOPPING=1"
    pings = [t for t, m in messages if m == "WATCHDOG=1"]
    mean = (pings[-1] - pings[0]) / (len(pings) - 1)  # as received: a busy test reads late
    # every 0.1 s, never a busy loop; the upper bound leaves room for a loaded machine's late reads
    assert 0.05 <= mean <= 1.0, [b - a for a, b in itertools.pairwise(pings)]


def test_the_stop_timeout_covers_a_hub_call_and_not_the_analysis_budget() -> None:
    """SIGTERM hands the analysis under way back (tests/reliability/
    test_stop_hands_back_analysis.py), so the stop timeout need not cover the analysis budget;
    it covers the Hub call a revision's fetch is on (`request_deadline_s`)."""
    from tracker.settings import Settings

    fields = Settings.model_fields
    for name in ["tracker-poll.service", "tracker-poll@.service"]:
        [timeout] = [
            float(line.removeprefix("TimeoutStopSec="))
            for line in (UNITS / name).read_text().splitlines()
            if line.startswith("TimeoutStopSec=")
        ]
        assert timeout >= fields["request_deadline_s"].default
