"""The analysis worker's side (`python -m tracker.sandbox.analysis_serve`): the loop that runs
`tracker.pipeline.Analyst.compute` under the memory budget for `tracker.sandbox.analysis_worker`.

The first frame is the pickled Settings; then one request frame in, one reply frame out (`ok`
with the result, `memory`, `retry` or `error` with the message), until stdin closes or a
MemoryError (the worker says so and exits). transformers and torch (seconds of CPU: 15 s on this
2-core machine under load) are imported on the first request whose config.json,
generation_config.json or tokenizer files differ from the revision before (the executed effects
need them), at the first of its effects the effect cache (`tracker.advisories.execute.EffectCache`)
cannot answer, not at start: that request's reply is preceded by WARMING and READY frames, and the import runs outside
its memory and time budget (`tracker.sandbox.analysis_worker.AnalysisWorker.run`). Before each request the soft RLIMIT_AS is set to the
address space mapped now plus `analysis_memory_mib`, and lifted after it. Frames go over a private
copy of stdout; anything printed goes to stderr. A worker whose parent is gone (its reply meets
a closed pipe) exits quietly, with one line on stderr (`worker_process.serve_until_orphaned`).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import sys
from collections.abc import Iterator
from types import TracebackType
from typing import IO, Any

import structlog

from tracker.logs import configure
from tracker.pipeline import Analyst
from tracker.sandbox.analysis_worker import HEADER, READY, WARMING
from tracker.sandbox.worker_process import address_space, limit_address_space, serve_until_orphaned
from tracker.settings import Settings
from tracker.shared.errors import RetryLaterError

log = structlog.get_logger(__name__)


def _set_memory_cap(mib: int | None) -> int:
    """Let the address space grow by at most `mib` MiB from now (None: lift the cap); returns
    the MiB it may grow by, less than `mib` where the process's hard limit is lower."""
    return limit_address_space(address_space(), mib)


def _where(tb: TracebackType | None) -> str:
    """The innermost frame of a traceback as `file:line in function`."""
    last = None
    while tb is not None:
        last, tb = tb, tb.tb_next
    if last is None:
        return "?"
    code = last.tb_frame.f_code
    return f"{code.co_filename}:{last.tb_lineno} in {code.co_name}"


def _read(stdin: IO[bytes], size: int) -> bytes | None:
    data = stdin.read(size)
    return data if data is not None and len(data) == size else None


def _write(stdout: IO[bytes], data: bytes) -> None:
    stdout.write(HEADER.pack(len(data)) + data)
    stdout.flush()


def serve(stdin: IO[bytes], stdout: IO[bytes]) -> None:
    """The worker loop: settings first, then one request frame in and one reply frame out, until
    stdin closes (or a MemoryError: the worker exits after saying so)."""
    head = _read(stdin, HEADER.size)
    if head is None:
        return
    body = _read(stdin, HEADER.unpack(head)[0])
    if body is None:
        return
    settings: Settings = pickle.loads(body)
    configure(level=settings.log_level, under_systemd=settings.under_systemd, force=True)
    analyst = Analyst.default(settings)
    budget = [0]

    @contextlib.contextmanager
    def warming() -> Iterator[None]:
        # transformers and torch are imported where the first effect the cache cannot answer
        # needs them, outside the request's budget: the cap lifted, WARMING and READY around
        # the import (the caller's clock waits for them apart), then the cap set again from there
        _set_memory_cap(None)
        _write(stdout, WARMING)
        try:
            yield
        finally:
            _write(stdout, READY)
            budget[0] = _set_memory_cap(settings.analysis_memory_mib)

    analyst.executor.warming = warming
    # The differs' deepdiff (and the numpy it maps) is imported on first use elsewhere; here it
    # is imported before any request's budget, as the rest of the analysis code is.
    import deepdiff  # noqa: F401

    _write(stdout, READY)
    while True:
        head = _read(stdin, HEADER.size)
        if head is None:
            return
        body = _read(stdin, HEADER.unpack(head)[0])
        if body is None:
            return
        reply: tuple[str, Any]
        where: TracebackType | None = None
        budget[0] = _set_memory_cap(settings.analysis_memory_mib)
        request: Any = None
        try:
            request = pickle.loads(body)
            with structlog.contextvars.bound_contextvars(
                repo=request["after"].repo_id, sha=request["after"].sha
            ):
                reply = ("ok", analyst.compute(**request))
        except MemoryError as exc:
            reply, where = ("memory", budget[0]), exc.__traceback__
        except RetryLaterError as exc:
            reply = ("retry", str(exc))
        except Exception as exc:  # the caller treats it as a failed analysis, as in-process
            reply = ("error", f"{exc.__class__.__name__}: {exc}")
        finally:
            _set_memory_cap(None)
        if where is not None:
            after = request.get("after") if isinstance(request, dict) else None
            log.warning(
                "analysis.out_of_memory",
                repo=getattr(after, "repo_id", None),
                sha=getattr(after, "sha", None),
                allowed_mib=budget[0],
                where=_where(where),
            )
            where = None
        try:
            data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        except MemoryError:
            reply, data = ("memory", budget[0]), pickle.dumps(("memory", budget[0]))
        _write(stdout, data)
        if reply[0] == "memory":
            return


def main() -> None:
    """Frames go over a private copy of stdout; anything printed goes to stderr."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    serve_until_orphaned(lambda: serve(sys.stdin.buffer, out), out, "analysis worker")


if __name__ == "__main__":
    main()
