"""The store's generation: a value that changes whenever something a rendered answer of the HTTP
API is made from is committed, read in microseconds, so a reader can keep what it rendered until
it changes (`tracker.api.memo`).

It is the domain counters of `store_generations` (migration 0012): triggers bump `advisories`
or `revisions` in the very transaction that writes those tables, and `poll_outcomes` (migration
0014) when a repo's state, last error or failure count changes, so a no-change poll of a healthy
repo (which commits only ingestion_state's poll time and counters, the schedule, the workers, the
rate budget) moves none of them and the kept answers stay current.

- SQLite: `PRAGMA data_version` on one dedicated connection, which never writes, is the fast
  path: it changes whenever any other connection commits; unchanged, the counters read last are
  still the counters; changed, they are read again (one indexed read of two rows).
- PostgreSQL: the current snapshot (`pg_current_snapshot()`: xmin, xmax and the transactions in
  progress), lock-free: any write transaction that starts or ends changes it (conservative: any
  write in the cluster counts, a no-change poll included). Counters bumped by triggers locked a
  row per domain until commit and deadlocked concurrent pollers (migration 0013 drops them there).
Never a false "unchanged": a writer that commits a change after `current()` was read makes the
next `current()` differ.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field

from tracker.shared.errors import StoreError
from tracker.store.base import StoreModel


class StoreGenerationRow(StoreModel, table=True):
    __tablename__ = "store_generations"

    domain: str = Field(sa_column=sa.Column(sa.String(32), primary_key=True))
    n: int = Field(
        default=0, sa_column=sa.Column(sa.BigInteger, nullable=False, server_default="0")
    )


GENERATION_TABLES = ("store_generations",)
_COUNTERS = "SELECT domain, n FROM store_generations ORDER BY domain"


class StoreGeneration:
    """`current()`: an opaque value that changes whenever the store's rendered contents may have."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        self._lock = threading.Lock()
        self._sqlite: sqlite3.Connection | None = None
        self._last: tuple[int, str] | None = None  # SQLite: (data_version, counters) read last
        self.counter_reads = 0  # how often the counters were read (the fast path missed)
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
                version = int(self._sqlite.execute("PRAGMA data_version").fetchone()[0])
                if self._last is not None and self._last[0] == version:
                    return self._last[1]
                counters = _text(self._sqlite.execute(_COUNTERS).fetchall())
                self.counter_reads += 1
                self._last = (version, counters)
                return counters
        except (sqlite3.Error, sa.exc.SQLAlchemyError) as exc:
            raise StoreError(f"store generation: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            if self._sqlite is not None:
                self._sqlite.close()
                self._sqlite = None
            self._last = None


def _text(rows: Sequence[Any]) -> str:
    text = ",".join(f"{d}={n}" for d, n in rows)
    if not text:
        raise StoreError("store generation: store_generations is empty (run tracker migrate)")
    return text


__all__ = ["GENERATION_TABLES", "StoreGeneration", "StoreGenerationRow"]
