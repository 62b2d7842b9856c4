"""Logging: every record, structlog's and the standard library's (APScheduler, uvicorn,
psycopg, SQLAlchemy, warnings), goes through structlog's formatter to stderr: JSON lines under
systemd (`JOURNAL_STREAM`/`INVOCATION_ID`) or when stderr is not a TTY, coloured console output
otherwise; never stdout, so `--json` output there stays clean.

A standard-library record becomes an event like structlog's own: `event` is its message,
`logger` its logger's name, `level` and `timestamp` as structlog writes them, a traceback under
`exception`. uvicorn's access records (`uvicorn.access`) also carry `client`, `method`, `path`,
`http_version` and `status` as fields.

The level and the systemd marker come from `Settings` (`log_level`, `under_systemd`): the CLI
configures WARNING before settings are read, and `app.build(settings)` reconfigures from them."""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

import structlog
from structlog.typing import EventDict, WrappedLogger

_lock = threading.Lock()
_configured = False

UVICORN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi")
CHATTY_LOGGERS = (
    "apscheduler",
    "sqlalchemy",
    "alembic",
    "psycopg",
    "httpx",
    "httpx2",
    "httpcore",
    "urllib3",
    "filelock",
)
"""Libraries whose INFO records are per call (SQLAlchemy's are its statements, APScheduler's one
per job run, httpx's one per request, alembic's two per store opened): WARNING and above only,
whatever the level."""
QUIET_LOGGERS = ("apscheduler.scheduler", "apscheduler.executors")
"""APScheduler's warnings are routine for the daemon's sub-second queue checks (a run skipped
while the last one is still going, a run coalesced after a busy moment): ERROR only (a job that
raised)."""


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler on whatever `sys.stderr` is at each record (pytest capture, a daemon's
    redirection replace it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def wants_json(stream: Any = None, *, under_systemd: bool = False) -> bool:
    """True under systemd (`Settings.under_systemd`) or when `stream` is not a TTY."""
    stream = stream if stream is not None else sys.stderr
    if under_systemd:
        return True
    isatty = getattr(stream, "isatty", None)
    return not (callable(isatty) and isatty())


def _access_fields(_logger: WrappedLogger, _name: str, event: EventDict) -> EventDict:
    """uvicorn's access record (`%s - "%s %s HTTP/%s" %d`) as fields too."""
    record = event.get("_record")
    if record is not None and record.name == "uvicorn.access":
        args = record.args if isinstance(record.args, tuple) else ()
        positional = event.pop("positional_args", None)
        args = args or (positional if isinstance(positional, tuple) else ())
        if len(args) == 5:
            event.update(
                client=args[0], method=args[1], path=args[2], http_version=args[3], status=args[4]
            )
    event.pop("positional_args", None)
    return event


def configure(
    *,
    level: str = "WARNING",
    json_output: bool | None = None,
    under_systemd: bool = False,
    force: bool = False,
) -> None:
    """Configure structlog and the standard library's root logger once (later calls are no-ops
    unless `force`).

    `level` is a logging level name (validated by `Settings.log_level`); `json_output` defaults
    to `wants_json(under_systemd=...)`.
    """
    global _configured
    with _lock:
        if _configured and not force:
            return
        numeric = logging.getLevelNamesMapping()[level.upper()]
        as_json = wants_json(under_systemd=under_systemd) if json_output is None else json_output
        shared: list[Any] = [
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
        ]
        renderer: Any
        if as_json:
            tail: list[Any] = [
                structlog.processors.format_exc_info,
                structlog.processors.JSONRenderer(sort_keys=True),
            ]
        else:
            tail = [structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())]
        # structlog's events go through the standard library too, so one handler (one lock)
        # writes every line: two writers on stderr interleaved lines under load
        structlog.configure(
            processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
            wrapper_class=structlog.make_filtering_bound_logger(numeric),
            logger_factory=structlog.stdlib.LoggerFactory(),
            cache_logger_on_first_use=False,
        )
        renderer = tail[-1]
        formatter = structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
            processors=[
                _access_fields,
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                *tail[:-1],
                renderer,
            ],
            pass_foreign_args=True,
        )
        handler = StderrHandler()
        handler.setFormatter(formatter)
        root = logging.getLogger()
        for old in list(root.handlers):
            root.removeHandler(old)
        root.addHandler(handler)
        root.setLevel(numeric)
        for name in CHATTY_LOGGERS:
            logging.getLogger(name).setLevel(max(numeric, logging.WARNING))
        for name in QUIET_LOGGERS:
            logging.getLogger(name).setLevel(max(numeric, logging.ERROR))
        for name in UVICORN_LOGGERS:  # uvicorn's own handlers (its dictConfig) are dropped
            lib = logging.getLogger(name)
            lib.handlers.clear()
            lib.propagate = True
        logging.captureWarnings(True)
        _configured = True
