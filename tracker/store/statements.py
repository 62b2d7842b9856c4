"""How many SQL statements an engine ran, for `/metrics` (`tracker_store_statements_total`): what
shows that a page or answer served again from what the HTTP API kept (`tracker.api.memo`) read
nothing. Statements run inside `uncounted()` (the metrics scrape's and the readiness probe's own
reads, in their thread) are not counted, so reading the counter does not move it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa

_local = threading.local()


@contextmanager
def uncounted() -> Iterator[None]:
    """Statements this thread runs inside the block are counted by no `StatementCount`."""
    before = getattr(_local, "off", 0)
    _local.off = before + 1
    try:
        yield
    finally:
        _local.off = before


class StatementCount:
    """Counts the statements `engine` runs from now on (any connection of its pool, any thread),
    except those run inside `uncounted()`; `close()` stops counting."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        self.n = 0
        self._lock = threading.Lock()
        sa.event.listen(engine, "before_cursor_execute", self._count)

    def _count(self, *args: Any) -> None:
        if getattr(_local, "off", 0):
            return
        with self._lock:
            self.n += 1

    def close(self) -> None:
        if sa.event.contains(self.engine, "before_cursor_execute", self._count):
            sa.event.remove(self.engine, "before_cursor_execute", self._count)


__all__ = ["StatementCount", "uncounted"]
