"""The one table registry of the store and its timestamp type; every table module builds on this.

- `StoreModel`: the base of every table (snapshot, advisory, analysis, and any added later). It has
  its own SQLAlchemy registry and `METADATA`, so that importing `tracker` again in one interpreter
  cannot clash with SQLModel's global MetaData. A new table subclasses `StoreModel` in a module
  that `tracker.store.schema` imports, and gets an Alembic migration of its own.
- Timestamps, one convention: every instant the store records (poll times, ingestion and
  analysis times, event times, advisory publish/modify times, diff and estimate times) is a
  `UtcDateTime` column. It takes timezone-aware datetimes only (a naive one is refused: it is a
  bug, not a guess), stores UTC (PostgreSQL `timestamp with time zone`; SQLite ISO text in UTC,
  which sorts as time), and returns aware UTC datetimes. A commit's own date is not a recorded
  instant but data from the source: `revisions.date` keeps it as ISO 8601 text with the
  author's original offset, so that it round-trips exactly.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import registry
from sqlmodel import SQLModel


class StoreModel(SQLModel, registry=registry()):
    """Base of every store table: one registry, one MetaData (`METADATA`)."""


METADATA = StoreModel.metadata


def utc_now() -> datetime:
    """The current instant, timezone-aware UTC."""
    return datetime.now(UTC)


def whole_seconds(when: datetime) -> datetime:
    """`when` in UTC without its microseconds (OSV timestamps have whole-second precision)."""
    return when.astimezone(UTC).replace(microsecond=0)


class UtcDateTime(sa.types.TypeDecorator[datetime]):
    """A timezone-aware instant stored as UTC; see the module docstring for the convention."""

    impl = sa.DateTime
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> sa.types.TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(sa.DateTime(timezone=True))
        return dialect.type_descriptor(sa.DateTime())

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value.isoformat()} given to a UTC timestamp column")
        value = value.astimezone(UTC)
        return value if dialect.name == "postgresql" else value.replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


__all__ = ["METADATA", "StoreModel", "UtcDateTime", "utc_now", "whole_seconds"]
