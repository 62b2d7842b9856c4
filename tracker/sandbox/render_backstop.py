"""The render backstop: chat templates render in a killable subprocess under a CPU rlimit.

Every render outcome is decided by `tracker.diff.sandbox.render_bounded`, deterministically (a step
budget, not a clock). This adapter only protects the process and the machine from what that budget
cannot see: a case that costs far more CPU per step than estimated, memory exhaustion, a hang in C.
The diff stage stays pure: it takes a `Renderer` (default: in this process), and the pipeline and
`tracker diff` hand it `render_batch` from here. Renders run in one long-lived worker process
(`python -m tracker.sandbox.render_backstop`), one request at a time, under:

- a CPU-time rlimit per request (`RenderLimits.backstop_cpu_s`, set afresh before each request as
  the CPU used so far plus the allowance; the kernel kills the worker with SIGXCPU past it);
- an address-space rlimit: `backstop_memory_mib` over what the worker had mapped when it started
  (a MemoryError is reported and ends the worker);
- a wall-clock wait in the caller (`backstop_wall_s`), after which the worker is killed.

A backstop hit is never a render outcome: it raises RenderBackstopError, a RetryLaterError, which
the pipeline turns into "retry later" for that revision (it stays pending, the repo shows the
reason in `tracker watch list`, the next cycle tries again). The worker is restarted on the next
request. CPU time is what the budget is sized against, so load on the machine does not move a
render towards the CPU limit; only the generous wall-clock wait can be hit by load alone, and then
the result is a retry, never a change. Starting, reading and killing the process is
`tracker.sandbox.worker_process`'s (shared with the analysis worker).

Protocol: one JSON line per request and per reply over the worker's stdin/stdout (never pickle:
the worker runs hostile templates, and its replies are data only). Template variables must be JSON
values (lists, not tuples), which is what `conversations.template_variables` builds.
"""

from __future__ import annotations

import atexit
import json
import resource
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import IO, Any

from tracker.diff.sandbox import (
    DEFAULT_LIMITS,
    RenderLimits,
    RenderOutcome,
    RenderResult,
    render_in_process,
)
from tracker.sandbox.worker_process import (
    WorkerProcess,
    address_space,
    limit_address_space,
    line_of,
    serve_until_orphaned,
)
from tracker.shared.errors import RetryLaterError

STARTUP_S = 60.0
"""How long the caller waits for a new worker to import and say it is ready."""

_READY = b'"ready"\n'


class RenderBackstopError(RetryLaterError):
    """A render hit the backstop (CPU, memory or wall-clock limit, or the worker died): not a
    property of the template's output, so the analysis is retried later, never reported as a change."""


class RenderWorker:
    """One render subprocess, started on first use and restarted after a backstop hit.

    Thread-safe: requests are serialised. `close()` stops the worker (also done at exit).
    """

    def __init__(self) -> None:
        self._worker = WorkerProcess("tracker.sandbox.render_backstop", own_group=False, quiet=True)
        self._lock = self._worker.lock

    @property
    def pid(self) -> int | None:
        """The worker's process id while one is running."""
        return self._worker.pid

    def render_batch(
        self, source: str, variables: Sequence[Mapping[str, Any]], limits: RenderLimits
    ) -> list[RenderResult]:
        """Render `source` once per variables mapping; raises RenderBackstopError on a backstop hit."""
        request = (
            json.dumps(
                {"source": source, "variables": list(variables), "limits": asdict(limits)},
                ensure_ascii=True,
            ).encode()
            + b"\n"
        )
        with self._lock:
            self._ensure()
            try:
                self._worker.send(request)
            except OSError as exc:
                self._kill()
                raise RenderBackstopError(f"render worker died before the request ({exc})") from exc
            deadline = time.monotonic() + limits.backstop_wall_s
            line = self._worker.read(deadline, line_of)
            if line is None:
                why = self._why_dead(limits, deadline)
                self._kill()
                raise RenderBackstopError(why)
            try:
                reply = json.loads(line)
                if "backstop" in reply:
                    raise RenderBackstopError(f"chat-template render stopped: {reply['backstop']}")
                return [
                    RenderResult(str(output), str(error), RenderOutcome(outcome), int(steps))
                    for output, error, outcome, steps in reply["results"]
                ]
            except (ValueError, KeyError, TypeError) as exc:
                self._kill()
                raise RenderBackstopError(f"render worker sent a malformed reply ({exc})") from exc
            except RenderBackstopError:
                self._kill()
                raise

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
        line = self._worker.read(time.monotonic() + STARTUP_S, line_of)
        if line is None or line + b"\n" != _READY:
            self._kill()
            raise RenderBackstopError("the chat-template render worker did not start")
        return proc

    def _why_dead(self, limits: RenderLimits, deadline: float) -> str:
        proc = self._worker.proc
        assert proc is not None
        wall = f"chat-template render still running after {limits.backstop_wall_s:g} s (wall-clock backstop)"
        if time.monotonic() >= deadline:
            return wall
        try:
            code = proc.wait(timeout=5.0)  # the reply pipe closed: the worker is exiting
        except subprocess.TimeoutExpired:
            return wall
        if code == -24:  # SIGXCPU
            return f"chat-template render used over {limits.backstop_cpu_s} s of CPU (backstop)"
        return f"chat-template render worker died (exit status {code})"

    def _kill(self) -> None:
        self._worker.kill()


_WORKER = RenderWorker()
atexit.register(_WORKER.close)


def render_batch(
    source: str, variables: Sequence[Mapping[str, Any]], limits: RenderLimits = DEFAULT_LIMITS
) -> list[RenderResult]:
    """Render `source` once per variables mapping in the shared worker (see the module docstring).

    Never raises for anything the template does; raises RenderBackstopError for a backstop hit.
    """
    return _WORKER.render_batch(source, variables, limits)


def render_template(
    source: str, variables: Mapping[str, Any], limits: RenderLimits = DEFAULT_LIMITS
) -> RenderResult:
    """Render one template with one set of variables in the shared worker (`render_batch`)."""
    return render_batch(source, [variables], limits)[0]


# -- the worker side ----------------------------------------------------------------------------
def _set_cpu_allowance(seconds: int) -> None:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = int(usage.ru_utime + usage.ru_stime) + 1
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = used + seconds
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _set_memory_cap(baseline: int, mib: int) -> None:
    """Let the address space grow by at most `mib` MiB over `baseline` (what imports mapped)."""
    limit_address_space(baseline, mib)


def serve(stdin: IO[bytes], stdout: IO[bytes]) -> None:
    """The worker loop: one JSON request line in, one JSON reply line out, until stdin closes."""
    baseline = address_space()
    stdout.write(_READY)
    stdout.flush()
    for line in stdin:
        request = json.loads(line)
        limits = RenderLimits(**request["limits"])
        _set_memory_cap(baseline, limits.backstop_memory_mib)
        _set_cpu_allowance(limits.backstop_cpu_s)
        try:
            results = render_in_process(request["source"], request["variables"], limits)
            reply: dict[str, Any] = {
                "results": [[r.output, r.error, r.outcome.value, r.steps] for r in results]
            }
        except MemoryError:
            reply = {"backstop": f"out of memory (over {limits.backstop_memory_mib} MiB)"}
        stdout.write(json.dumps(reply, ensure_ascii=True).encode() + b"\n")
        stdout.flush()
        if "backstop" in reply:
            return


if __name__ == "__main__":
    serve_until_orphaned(
        lambda: serve(sys.stdin.buffer, sys.stdout.buffer), sys.stdout.buffer, "render worker"
    )
