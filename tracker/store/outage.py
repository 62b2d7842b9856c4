"""A store outage as the polling daemon lives through it: `StoreOutage` gates the daemon's loops.

While the store cannot be reached (a connection refused, reset or lost; a pool that hands out
nothing in time; SQLite's file locked: `unreachable`), one caller at a time probes it again
(`SELECT 1`, then its own work), after a backoff step that starts at `FIRST_STEP_S` and doubles
up to `MAX_STEP_S`; every other caller skips its turn without touching the store. Only a probe
that answered ends the outage (a call begun before it that happens to succeed does not). The outage is logged once per step
(`store.unreachable`, with the step, the attempt and the first line of the error, no traceback)
and its end once (`store.reachable`, how long it lasted and how many calls it skipped). A 30 s
outage is some 6 lines per worker, not a traceback per loop tick.

Errors that are not an outage (a bug, a constraint) are logged with their traceback, each time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
import structlog

log = structlog.get_logger(__name__)

FIRST_STEP_S = 1.0
"""The first wait after the store failed, before it is tried again."""
MAX_STEP_S = 30.0
"""The longest wait between two tries (each step doubles the last)."""

_UNREACHABLE = (sa.exc.OperationalError, sa.exc.InterfaceError, sa.exc.TimeoutError)


def unreachable(exc: BaseException) -> bool:
    """True when `exc`, or an error it was raised from, says the store cannot be reached (not
    that it refused what was asked)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, _UNREACHABLE):
            return True
        if isinstance(cur, sa.exc.DBAPIError) and cur.connection_invalidated:
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def first_line(exc: BaseException) -> str:
    """`Type: the error's first line` (at most 300 characters), for a log line without a traceback."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"[:300]


class StoreOutage:
    """See the module docstring. Thread-safe; `clock` is monotonic seconds."""

    def __init__(
        self,
        engine: sa.Engine,
        *,
        first_s: float = FIRST_STEP_S,
        max_s: float = MAX_STEP_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.engine = engine
        self.first_s = first_s
        self.max_s = max_s
        self.clock = clock
        self._lock = threading.Lock()
        self._down_since: float | None = None
        self._step = 0.0
        self._retry_at = 0.0
        self._probing = False
        self._attempts = 0
        self._skipped = 0

    @property
    def down(self) -> bool:
        with self._lock:
            return self._down_since is not None

    def call(self, fn: Callable[[], Any], event: str) -> bool:
        """Run `fn` unless the store is down and not due for a try (True: it ran and returned).
        An outage error is `failed`; any other error is logged as `event` with its traceback."""
        with self._lock:
            probe = self._down_since is not None
            if probe:
                if self._probing or self.clock() < self._retry_at:
                    self._skipped += 1
                    return False
                self._probing = True
        try:
            if probe:
                self._ping()
                self._recovered()
            fn()
        except Exception as exc:
            if unreachable(exc):
                self.failed(exc, event, probe=probe)
            else:
                log.exception(event)
            return False
        finally:
            if probe:
                with self._lock:
                    self._probing = False
        return True

    def _ping(self) -> None:
        with self.engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))

    def failed(self, exc: BaseException, event: str, *, probe: bool = False) -> None:
        """Note an outage error that `event` met (`probe`: a try after a backoff step). The
        first error of an outage and each failed try log `store.unreachable` and set the next
        try a step later (each step twice the last); others are counted, not logged."""
        with self._lock:
            now = self.clock()
            if self._down_since is None:
                self._down_since = now
                self._step = self.first_s
            elif probe and self._probing:
                self._step = min(self._step * 2, self.max_s)
            else:
                self._skipped += 1
                return
            self._attempts += 1
            self._retry_at = now + self._step
            step, attempt = self._step, self._attempts
        log.error(
            "store.unreachable",
            during=event,
            error=first_line(exc),
            attempt=attempt,
            retry_in_s=round(step, 3),
        )

    def _recovered(self) -> None:
        with self._lock:
            if self._down_since is None:
                return
            down_s = self.clock() - self._down_since
            attempts, skipped = self._attempts, self._skipped
            self._down_since, self._attempts, self._skipped, self._step = None, 0, 0, 0.0
        log.warning("store.reachable", down_s=round(down_s, 3), attempts=attempts, skipped=skipped)
