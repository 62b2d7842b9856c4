"""The daemon's signal handler takes no lock (`Daemon.on_signal`): it runs in the main thread
between two bytecodes, and the main thread may hold a lock that is not reentrant (apscheduler's
loop submitting a job to its thread pool, a structlog write to stderr). The former handler logged
and shut the scheduler down itself, and could wait on such a lock forever: a fresh-clone `make
test` once saw the daemon still running 60 s after SIGTERM. The race cannot be forced from
outside; this pins the handler's contract, and test_poll_daemon.py the stop end to end."""

from __future__ import annotations

import os
import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import structlog

from tracker.app import build
from tracker.scheduler import Daemon
from tracker.settings import load_settings


def test_the_handler_returns_while_this_thread_holds_the_locks_it_once_took(
    tmp_path: Path,
) -> None:
    (tmp_path / "watchlist.yaml").write_text("repos:\n  - id: acme/tiny\n")
    app = build(load_settings(state_dir=tmp_path / "state", watchlist=tmp_path / "watchlist.yaml"))
    try:
        daemon = Daemon(app)
        read = daemon.signal_pipe()
        pool = ThreadPoolExecutor(1)
        write_lock = structlog.PrintLogger(file=sys.stderr)._lock
        returned = threading.Event()

        def interrupted_main_thread() -> None:
            with write_lock, pool._shutdown_lock:  # as mid-write, mid-submit
                daemon.on_signal(signal.SIGTERM, None)
                daemon.on_signal(signal.SIGHUP, None)
                returned.set()

        t = threading.Thread(target=interrupted_main_thread, daemon=True)
        t.start()
        t.join(10)
        assert returned.is_set(), "the handler waited on a lock its own thread held"
        assert os.read(read, 16) == bytes([signal.SIGTERM, signal.SIGHUP])
        assert not daemon.stopping.is_set()  # the signals thread acts on it, not the handler
        pool.shutdown()
    finally:
        app.close()
