"""structlog configuration, done once per process: JSON lines under systemd or when not a TTY,
coloured console output otherwise; always to stderr so `--json` output on stdout stays clean."""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import Any

import structlog

_lock = threading.Lock()
_configured = False


def _stderr_logger(*_args: Any) -> structlog.PrintLogger:
    # Resolve sys.stderr at each use: it may be replaced (pytest capture, daemon redirection).
    return structlog.PrintLogger(file=sys.stderr)


def wants_json(stream: Any = None) -> bool:
    """True under systemd (JOURNAL_STREAM/INVOCATION_ID set) or when `stream` is not a TTY."""
    stream = stream if stream is not None else sys.stderr
    if os.environ.get("JOURNAL_STREAM") or os.environ.get("INVOCATION_ID"):
        return True
    isatty = getattr(stream, "isatty", None)
    return not (callable(isatty) and isatty())


def configure(
    *, level: str | None = None, json_output: bool | None = None, force: bool = False
) -> None:
    """Configure structlog once (later calls are no-ops unless `force`).

    `level` defaults to TRACKER_LOG_LEVEL or INFO; `json_output` to `wants_json()`.
    """
    global _configured
    with _lock:
        if _configured and not force:
            return
        name = (level or os.environ.get("TRACKER_LOG_LEVEL") or "INFO").upper()
        numeric = logging.getLevelNamesMapping().get(name, logging.INFO)
        as_json = wants_json() if json_output is None else json_output
        processors: list[Any] = [
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
        ]
        if as_json:
            processors += [
                structlog.processors.format_exc_info,
                structlog.processors.JSONRenderer(sort_keys=True),
            ]
        else:
            processors.append(structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty()))
        structlog.configure(
            processors=processors,
            wrapper_class=structlog.make_filtering_bound_logger(numeric),
            logger_factory=_stderr_logger,
            cache_logger_on_first_use=False,
        )
        _configured = True
