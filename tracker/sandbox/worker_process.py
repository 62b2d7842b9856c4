"""The plumbing of tracker's long-lived helper processes (`python -m MODULE` speaking over its stdin
and stdout pipes): the analysis worker (`tracker.sandbox.analysis_worker`, pickle frames) and the chat-
template render worker (`tracker.sandbox.render_backstop`, JSON lines). What each says, its limits and
what a dead worker means stay with them; this module starts, reads, and kills.

Caller side, `WorkerProcess`: started on demand (a forked child forgets its parent's pipes), one
message read at a time under a deadline (`select` on the pipe; `split` says where a message ends
in the bytes read so far), killed with its process group when it has one. Worker side:
`address_space()` and `limit_address_space()`, the RLIMIT_AS cap both workers set before a request,
and `serve_until_orphaned`, a quiet exit when the parent is gone.
"""

from __future__ import annotations

import contextlib
import os
import resource
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import IO

Split = Callable[[bytearray], tuple[bytes, int] | None]
"""Where the first whole message ends in the bytes read so far: (the message, the bytes it took),
or None while it is incomplete."""


def line_of(buf: bytearray) -> tuple[bytes, int] | None:
    """`Split` for newline-terminated messages (the newline is not part of the message)."""
    end = buf.find(b"\n")
    return None if end < 0 else (bytes(buf[:end]), end + 1)


class WorkerProcess:
    """One `python -P -m MODULE` process with piped stdin and stdout; not thread-safe by itself
    (`lock` is for the owner, who serialises requests)."""

    def __init__(self, module: str, *, own_group: bool, quiet: bool) -> None:
        """`own_group`: start a new session and kill the whole process group (the worker and
        anything it started); `quiet`: its stderr goes to /dev/null instead of ours."""
        self.module = module
        self.own_group = own_group
        self.quiet = quiet
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = None
        self._pid_of_parent = os.getpid()
        self._buf = bytearray()

    @property
    def pid(self) -> int | None:
        """The worker's process id while one is running."""
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    def running(self) -> subprocess.Popen[bytes] | None:
        """The live process, or None (in a forked child the pipes belong to the parent: they are
        forgotten, not used)."""
        if self._pid_of_parent != os.getpid():
            self.proc, self._buf, self._pid_of_parent = None, bytearray(), os.getpid()
        if self.proc is not None and self.proc.poll() is None:
            return self.proc
        return None

    def spawn(self) -> subprocess.Popen[bytes]:
        """Kill any earlier process and start a new one."""
        self.kill()
        proc = subprocess.Popen(
            [sys.executable, "-P", "-m", self.module],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL if self.quiet else None,
            close_fds=True,
            start_new_session=self.own_group,
        )
        self.proc = proc
        return proc

    def send(self, data: bytes) -> None:
        """Write `data` to the worker's stdin; OSError when the worker is gone."""
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def read(self, deadline: float, split: Split) -> bytes | None:
        """The next message, or None when the worker closed its stdout (it died) or the monotonic
        `deadline` passed. Bytes read past the message are kept for the next one."""
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while True:
            found = split(self._buf)
            if found is not None:
                message, used = found
                del self._buf[:used]
                return message
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return None
            self._buf += chunk

    def kill(self) -> None:
        """SIGKILL the worker (its process group with `own_group`), reap it, close its pipes."""
        proc, self.proc, self._buf = self.proc, None, bytearray()
        if proc is None:
            return
        if proc.poll() is None:
            if self.own_group:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    proc.kill()
            else:
                proc.kill()
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()


# -- the worker side ----------------------------------------------------------------------------
def address_space() -> int:
    """This process's current virtual size in bytes (0 where /proc is not available)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0
    return pages * resource.getpagesize()


def limit_address_space(base: int, mib: int | None) -> int:
    """Set the soft RLIMIT_AS to `base` bytes plus `mib` MiB (None: lift it to the hard limit),
    never over the hard limit; returns the MiB that leaves over `base` (0 for None)."""
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = hard if mib is None else base + (mib << 20)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    return max(0, cap - base) >> 20 if mib is not None else 0


__all__ = ["Split", "WorkerProcess", "address_space", "limit_address_space", "line_of"]


def serve_until_orphaned(serve: Callable[[], None], stdout: IO[bytes], name: str) -> None:
    """Worker side: run `serve()`; when the parent is gone (writing a reply to its pipe raises
    BrokenPipeError) exit quietly with status 0 and at most one line on stderr, instead of a
    BrokenPipeError traceback and a second one from the flush at interpreter exit. An orphaned
    worker's reply has no reader: there is nothing else to do."""
    try:
        serve()
    except BrokenPipeError:
        # the reply left in the buffer would fail again when the interpreter flushes it
        devnull = os.open(os.devnull, os.O_WRONLY)
        with contextlib.suppress(OSError):
            os.dup2(devnull, stdout.fileno())
        os.close(devnull)
        with contextlib.suppress(OSError):
            sys.stderr.write(f"{name}: the parent process is gone; exiting\n")
            sys.stderr.flush()
        raise SystemExit(0) from None
