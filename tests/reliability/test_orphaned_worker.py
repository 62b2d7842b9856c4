"""Issue 26, item 7: a helper process whose parent is gone (the daemon SIGKILLed mid-request)
exits quietly: status 0 and one line on stderr, where it printed a BrokenPipeError traceback
(and a second one, "Exception ignored", from the flush at interpreter exit) when its reply met
the closed pipe. The parent's death is played by closing the pipe it read replies from."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from dataclasses import asdict

from tracker.diff.sandbox import RenderLimits
from tracker.sandbox.analysis_worker import HEADER, READY
from tracker.settings import load_settings


def _start(module: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", module],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _orphan(proc: subprocess.Popen[bytes], request: bytes) -> tuple[int, str]:
    """Stop reading the worker's replies (the parent is gone), send `request`, close its stdin;
    the worker's exit status and its stderr."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    proc.stdin.write(request)
    proc.stdin.close()
    err = proc.stderr.read().decode()
    proc.stderr.close()
    return proc.wait(timeout=60), err


def test_an_orphaned_analysis_worker_exits_quietly() -> None:
    proc = _start("tracker.sandbox.analysis_serve")
    assert proc.stdin is not None and proc.stdout is not None
    settings = pickle.dumps(load_settings())
    proc.stdin.write(HEADER.pack(len(settings)) + settings)
    proc.stdin.flush()
    (size,) = HEADER.unpack(proc.stdout.read(HEADER.size))
    assert proc.stdout.read(size) == READY
    # a request the worker answers (an error reply: it is no pickle) into the closed pipe
    rc, err = _orphan(proc, HEADER.pack(12) + b"not a pickle")
    assert (rc, err) == (0, "analysis worker: the parent process is gone; exiting\n")


def test_an_orphaned_render_worker_exits_quietly() -> None:
    proc = _start("tracker.sandbox.render_backstop")
    assert proc.stdout is not None
    assert proc.stdout.readline() == b'"ready"\n'
    request = {"source": "{{ 1 }}", "variables": [{}], "limits": asdict(RenderLimits())}
    rc, err = _orphan(proc, json.dumps(request).encode() + b"\n")
    assert (rc, err) == (0, "render worker: the parent process is gone; exiting\n")
