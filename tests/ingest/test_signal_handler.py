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
from typing import Any

import pytest
import structlog

from tracker.app import build
from tracker.daemon.scheduler import Daemon
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


def test_a_second_sigterm_while_leases_are_released_is_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon's handlers stay installed until `poll.stopped`: a SIGTERM landing while the
    run hands its claims back reached the previous handler (the default one kills the process,
    leases unreleased) when the handlers were restored before the release."""
    (tmp_path / "watchlist.yaml").write_text("repos:\n  - id: acme/tiny\n    poll_interval: 1h\n")
    monkeypatch.setenv("TRACKER_HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("TRACKER_RETRY_ATTEMPTS", "1")
    app = build(load_settings(state_dir=tmp_path / "state", watchlist=tmp_path / "watchlist.yaml"))
    previous: list[int] = []

    def recorder(signum: int, _frame: Any) -> None:
        previous.append(signum)

    old = signal.signal(signal.SIGTERM, recorder)
    try:
        daemon = Daemon(app)
        release = daemon.work.release
        unregister = daemon.work.unregister
        calls: list[str] = []

        def release_under_sigterm(claims: Any) -> Any:
            os.kill(os.getpid(), signal.SIGTERM)  # handled before os.kill returns
            calls.append("release")
            return release(claims)

        def unregister_seen(worker: str) -> Any:
            calls.append("unregister")
            return unregister(worker)

        monkeypatch.setattr(daemon.work, "release", release_under_sigterm)
        monkeypatch.setattr(daemon.work, "unregister", unregister_seen)
        stop = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM))
        stop.start()
        daemon.run()
        stop.join()
        assert previous == []  # neither SIGTERM reached the handler the run replaced
        assert calls == ["release", "unregister"]
        assert signal.getsignal(signal.SIGTERM) is recorder  # restored once the run ended
    finally:
        signal.signal(signal.SIGTERM, old)
        app.close()
