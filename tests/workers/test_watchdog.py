"""systemd's watchdog and an idle worker (issue 13 review, item 4): with `WatchdogSec=2`
(WATCHDOG_USEC=2000000) and a `queue_check_s` of 20 s, the `tracker poll` daemon, idle, still
sends WATCHDOG=1 to NOTIFY_SOCKET at least every half of the watchdog period (before: only once
per claim-loop tick, every 20 s, so systemd would have restarted a healthy idle worker)."""

from __future__ import annotations

import contextlib
import socket
import tempfile
import time
from pathlib import Path

import pytest
from workkit import Daemon, commit_eos, env_for, until

from tracker.replica import Replica
from tracker.replica.repos import init_repo

pytestmark = [pytest.mark.replica]

WATCHDOG_S, QUEUE_CHECK_S, IDLE_S = 2.0, 20, 7.0


def test_an_idle_worker_pings_the_watchdog_every_half_period(tmp_path: Path) -> None:
    root = tmp_path / "hub"
    commit_eos(init_repo(root, "acme/w"), 2)
    (tmp_path / "watchlist.yaml").write_text("repos:\n  - id: acme/w\n    poll_interval: 1h\n")
    with tempfile.TemporaryDirectory(prefix="nfy") as short, Replica(root) as hub:
        path = str(Path(short) / "notify")  # a unix socket path must stay short
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)
        sock.settimeout(0.2)
        env = {
            **env_for(tmp_path, hub.url, NOTIFY_SOCKET=path),
            "WATCHDOG_USEC": str(int(WATCHDOG_S * 1e6)),
            "TRACKER_QUEUE_CHECK_S": str(QUEUE_CHECK_S),
        }
        daemon = Daemon(env)
        got: list[tuple[float, str]] = []
        try:
            until(lambda: daemon.of("repo.polled"), timeout=60)  # then idle for an hour
            idle_from = time.monotonic()
            while time.monotonic() < idle_from + IDLE_S:
                with contextlib.suppress(TimeoutError):
                    got.append((time.monotonic(), sock.recv(4096).decode()))
            assert daemon.stop() == 0
        finally:
            if daemon.proc.poll() is None:
                daemon.kill()
            sock.close()
    pings = [t for t, msg in got if msg == "WATCHDOG=1"]
    assert len(pings) >= IDLE_S / (WATCHDOG_S / 2) - 1, got
    gaps = [b - a for a, b in zip([idle_from, *pings], pings, strict=False)]
    assert max(gaps) <= WATCHDOG_S / 2 + 0.3, gaps  # half the period, with a loaded machine's slack
