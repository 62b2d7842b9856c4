"""The snapshot store (SQLite or PostgreSQL via SQLAlchemy/SQLModel); the only package that imports them.

Public: `Store` (open with `Store.open(url)`), its values (`StoredRevision`, `RepoState`,
`RepoStatus`, `Event`, `EventKind`, `FileVersion`, `FileKind`) and `upgrade(engine)`.
"""

from __future__ import annotations

from sqlalchemy import Engine

from tracker.store.engine import create_engine, upgrade
from tracker.store.store import Store
from tracker.store.values import (
    Event,
    EventKind,
    FileKind,
    FileVersion,
    RepoState,
    RepoStatus,
    StoredRevision,
)

__all__ = [
    "Engine",
    "Event",
    "EventKind",
    "FileKind",
    "FileVersion",
    "RepoState",
    "RepoStatus",
    "Store",
    "StoredRevision",
    "create_engine",
    "upgrade",
]
