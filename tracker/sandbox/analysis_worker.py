"""The analysis budget: each revision is analysed in a worker process under a wall-clock deadline
and an address-space cap (`Settings.analysis_timeout_s`, `Settings.analysis_memory_mib`).

The pipeline hands the worker the pure part of analysing a revision (`tracker.pipeline.Analyst`:
the diffs with their chat-template renders, both estimates and their delta, both preflights and
their delta) and stores, publishes and marks the result itself. The worker is one long-lived
process (`python -m tracker.sandbox.analysis_serve`), started on first use, one request at a time:

- before each request its soft `RLIMIT_AS` is set to what it has mapped now plus
  `analysis_memory_mib`; a MemoryError ends the request (and the worker) as a memory overrun;
- the caller waits `analysis_timeout_s` for the reply, then kills the worker's process group (the
  worker and its chat-template render worker) and reports a time overrun;
- a worker that dies otherwise (a signal, an abort in C under memory pressure) is an overrun of
  kind `died`.

An overrun raises AnalysisOverrunError; the pipeline records it on the revision as "could not
analyse" (kind, reason, the limits it ran under), publishes nothing for it, and goes on with the
next revision. It is tried again only once a limit is raised (`AnalysisLimits.raised_over`). Any
other failure inside the worker comes back as the error it was (a RetryLaterError stays one), so
the pipeline treats it as before: the revision stays pending and the repo shows the reason.

Startup (imports) is paid once per process, transformers and torch only on the first request
that executes config or generation code (WARMING); a request costs pickling its two snapshots and the
result (bench/RESULTS.md, "Analysis budget"). Frames are an 8-byte big-endian length and a pickle.
Starting, reading and killing the process is `tracker.sandbox.worker_process`'s (shared with the render
worker).
The worker runs no upstream code: templates render in the render worker
(`tracker.sandbox.render_backstop`), which speaks JSON; everything else the worker does to upstream bytes
is parsing under the bounds of `tracker.shared.bounded`.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import signal
import struct
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Any

from tracker.sandbox.worker_process import WorkerProcess
from tracker.settings import Settings
from tracker.shared.errors import RetryLaterError, TrackerError

STARTUP_S = 120.0
"""How long the caller waits for a new worker to import and say it is ready (not charged to any
revision's budget)."""

HEADER = struct.Struct(">Q")
"""A frame: this 8-byte big-endian length, then that many bytes (a pickle, or READY)."""
READY = b"ready"
WARMING = b"warming"
"""Sent before a request's reply when the worker first imports transformers and torch (the
executed effects need them); READY follows once imported, then the reply. The import is given
STARTUP_S, and the request's time budget starts after it."""


@dataclass(frozen=True)
class AnalysisLimits:
    """The budget one revision's analysis ran (or runs) under."""

    timeout_s: float
    memory_mib: int

    @classmethod
    def from_settings(cls, settings: Settings) -> AnalysisLimits:
        return cls(settings.analysis_timeout_s, settings.analysis_memory_mib)

    def raised_over(self, other: AnalysisLimits) -> bool:
        """True when this budget is larger than `other` in time or memory (a revision that
        overran `other` is worth another try)."""
        return self.timeout_s > other.timeout_s or self.memory_mib > other.memory_mib


class AnalysisHandedBackError(RetryLaterError):
    """The daemon is stopping (SIGTERM): the analysis under way was killed, or one waiting for
    the worker never started; the revision stays pending for the next run (nothing recorded)."""

    def __init__(self) -> None:
        super().__init__("the daemon is stopping: the analysis is handed back to the next run")


class AnalysisOverrunError(TrackerError):
    """The analysis of a revision exceeded its budget (`kind`: `time`, `memory` or `died`)."""

    def __init__(self, message: str, *, kind: str, limits: AnalysisLimits) -> None:
        super().__init__(message)
        self.kind = kind
        self.limits = limits


class AnalysisWorkerError(TrackerError):
    """An exception other than an overrun, raised inside the worker (its class and message)."""


class AnalysisWorker:
    """The analysis worker process of one pipeline (see the module docstring). Thread-safe:
    requests are serialised; `close()` stops the worker (also done at exit)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.limits = AnalysisLimits.from_settings(settings)
        # its own process group: a kill takes its render worker too
        self._worker = WorkerProcess("tracker.sandbox.analysis_serve", own_group=True, quiet=False)
        self._lock = self._worker.lock
        self._abandoned = threading.Event()
        atexit.register(self.close)

    @property
    def pid(self) -> int | None:
        """The worker's process id while one is running."""
        return self._worker.pid

    def start(self) -> None:
        """Start the worker now (else the first request does)."""
        with self._lock:
            self._ensure()

    def run(self, request: dict[str, Any]) -> Any:
        """Send `request` (keyword arguments of `Analyst.compute`) and return its result; raises
        AnalysisOverrunError, RetryLaterError or AnalysisWorkerError."""
        payload = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
        limits = self.limits
        if self._abandoned.is_set():
            raise AnalysisHandedBackError
        with self._lock:
            if self._abandoned.is_set():  # it waited for another thread's analysis
                raise AnalysisHandedBackError
            proc = self._ensure()
            try:
                # two writes: joining them would copy the payload (a fresh-clone run under a
                # 1.5 GiB address-space limit hit MemoryError there on a hostile revision)
                self._worker.send(HEADER.pack(len(payload)))
                self._worker.send(payload)
            except OSError:
                self._handed_back()
                why = self._why_dead(proc, limits)
                raise AnalysisOverrunError(why, kind="died", limits=limits) from None
            frame = self._worker.read(time.monotonic() + limits.timeout_s, _frame_of)
            if frame == WARMING:  # imports first, outside the budget
                if self._worker.read(time.monotonic() + STARTUP_S, _frame_of) != READY:
                    self._handed_back()
                    self._kill()
                    raise RetryLaterError("the analysis worker could not import transformers")
                frame = self._worker.read(time.monotonic() + limits.timeout_s, _frame_of)
            if frame is None:
                self._handed_back()
                if proc.poll() is None:
                    self._kill()
                    raise AnalysisOverrunError(
                        f"analysis still running after {limits.timeout_s:g} s (the time budget)",
                        kind="time",
                        limits=limits,
                    )
                why = self._why_dead(proc, limits)
                raise AnalysisOverrunError(why, kind="died", limits=limits)
            status, value = pickle.loads(frame)
        if status == "ok":
            return value
        if status == "memory":
            self.close()  # the worker exits after a MemoryError
            allowed = int(value) if isinstance(value, int) else limits.memory_mib
            why = f"analysis needed over {limits.memory_mib} MiB (the memory budget)"
            if allowed < limits.memory_mib:  # the process's own RLIMIT_AS was lower
                why = (
                    f"analysis needed over {allowed} MiB (the process's address-space limit, "
                    f"below the memory budget of {limits.memory_mib} MiB)"
                )
            raise AnalysisOverrunError(why, kind="memory", limits=limits)
        if status == "retry":
            raise RetryLaterError(str(value))
        raise AnalysisWorkerError(str(value))

    def abandon(self) -> None:
        """Hand the analyses back (the daemon's SIGTERM; from any thread): the one under way
        is killed (the worker's process group; the thread waiting for it reaps it) and ends in
        AnalysisHandedBackError, as does every later `run`. Nothing is recorded about the
        revision: it stays pending, so the stop never waits for an analysis budget."""
        self._abandoned.set()
        pid = self._worker.pid
        if pid is not None:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)

    def _handed_back(self) -> None:
        """AnalysisHandedBackError (the worker reaped) when `abandon` ended the request."""
        if self._abandoned.is_set():
            self._kill()
            raise AnalysisHandedBackError

    def close(self) -> None:
        """Stop the worker (a later request starts a new one)."""
        with self._lock:
            self._kill()

    # -- internals ------------------------------------------------------------------------------
    def _ensure(self) -> subprocess.Popen[bytes]:
        proc = self._worker.running()
        if proc is not None:
            return proc
        proc = self._worker.spawn()
        settings = pickle.dumps(self.settings, protocol=pickle.HIGHEST_PROTOCOL)
        with contextlib.suppress(OSError):
            self._worker.send(HEADER.pack(len(settings)) + settings)
        if self._worker.read(time.monotonic() + STARTUP_S, _frame_of) != READY:
            self._kill()
            raise RetryLaterError("the analysis worker did not start")
        return proc

    def _why_dead(self, proc: subprocess.Popen[bytes], limits: AnalysisLimits) -> str:
        try:
            code = proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            code = None
        self._kill()
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = str(-code)
            return f"the analysis worker died ({name}; memory budget {limits.memory_mib} MiB)"
        return f"the analysis worker died (exit status {code})"

    def _kill(self) -> None:
        self._worker.kill()


def _frame_of(buf: bytearray) -> tuple[bytes, int] | None:
    """`Split` for this protocol's frames: an 8-byte big-endian length, then that many bytes."""
    if len(buf) < HEADER.size:
        return None
    need = HEADER.size + HEADER.unpack_from(buf)[0]
    return (bytes(buf[HEADER.size : need]), need) if len(buf) >= need else None
