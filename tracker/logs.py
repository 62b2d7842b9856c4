"""structlog configuration: JSON lines under systemd or when not a TTY, coloured console output
otherwise; always to stderr so `--json` output on stdout stays clean.

The level and the systemd marker come from `Settings` (`log_level`, `under_systemd`): the CLI
configures WARNING before settings are read, and `app.build(settings)` reconfigures from them."""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

import structlog

_lock = threading.Lock()
_configured = False


def _stderr_logger(*_args: Any) -> structlog.PrintLogger:
    # Resolve sys.stderr at each use: it may be replaced (pytest capture, daemon redirection).
    return structlog.PrintLogger(file=sys.stderr)


def wants_json(stream: Any = None, *, under_systemd: bool = False) -> bool:
    """True under systemd (`Settings.under_systemd`) or when `stream` is not a TTY."""
    stream = stream if stream is not None else sys.stderr
    if under_systemd:
        return True
    isatty = getattr(stream, "isatty", None)
    return not (callable(isatty) and isatty())


def configure(
    *,
    level: str = "WARNING",
    json_output: bool | None = None,
    under_systemd: bool = False,
    force: bool = False,
) -> None:
    """Configure structlog once (later calls are no-ops unless `force`).

    `level` is a logging level name (validated by `Settings.log_level`); `json_output` defaults
    to `wants_json(under_systemd=...)`.
    """
    global _configured
    with _lock:
        if _configured and not force:
            return
        numeric = logging.getLevelNamesMapping()[level.upper()]
        as_json = wants_json(under_systemd=under_systemd) if json_output is None else json_output
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
