"""The store's generation: a value that changes whenever anything is committed to the store, read
in microseconds, so a reader can keep what it rendered until it changes (`tracker.api.memo`).

- SQLite: `PRAGMA data_version` on one dedicated connection, which never writes: it changes
  whenever any other connection (another process, or another connection of this one) commits.
- PostgreSQL: the current snapshot (`pg_current_snapshot()`: xmin, xmax and the transactions in
  progress): any write transaction that starts or ends changes it, so a commit made after a
  value was read always changes it (conservative: a write anywhere in the cluster counts).
Never a false "unchanged": a writer that commits after `current()` was read makes the next
`current()` differ.
"""

from __future__ import annotations

import sqlite3
import threading

import sqlalchemy as sa

from tracker.errors import StoreError


class StoreGeneration:
    """`current()`: an opaque value that changes whenever the store's contents may have."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        self._lock = threading.Lock()
        self._sqlite: sqlite3.Connection | None = None
        url = engine.url
        self._path = url.database if url.get_backend_name() == "sqlite" else None

    @property
    def local(self) -> bool:
        """Whether `current()` reads a local file (SQLite: no network, microseconds), so it may
        run on an event loop; PostgreSQL's is a query."""
        return self._path is not None

    def current(self) -> str:
        """The generation now; StoreError when the store cannot be read."""
        try:
            if self._path is None:
                with self.engine.connect() as conn:
                    query = sa.text("SELECT pg_current_snapshot()::text")
                    return str(conn.execute(query).scalar_one())
            with self._lock:
                if self._sqlite is None:
                    self._sqlite = sqlite3.connect(
                        self._path, check_same_thread=False, isolation_level=None
                    )
                return str(self._sqlite.execute("PRAGMA data_version").fetchone()[0])
        except (sqlite3.Error, sa.exc.SQLAlchemyError) as exc:
            raise StoreError(f"store generation: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            if self._sqlite is not None:
                self._sqlite.close()
                self._sqlite = None
