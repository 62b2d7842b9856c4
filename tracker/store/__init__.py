"""The store (SQLite or PostgreSQL via SQLAlchemy/SQLModel/Alembic); the only package that imports them.

One database, one schema, three stores over it:
- `Store` (open with `Store.open(url)`, which migrates to head): repos, revisions, trees, files,
  blobs, events; its values `StoredRevision`, `RepoState`, `RepoStatus`, `Event`, `EventKind`,
  `FileVersion`, `FileKind`.
- `tracker.store.advisories.AdvisoryStore`: OSV records and their lifecycle (tables / queries).
- `tracker.store.analysis.AnalysisStore`: the revision diff store (diffs and estimates).
Every table derives from `base.StoreModel` (one registry, `schema.METADATA`); rows that belong to
a repo or a revision have foreign keys to it; every recorded instant is a timezone-aware UTC
`UtcDateTime` (convention in `tracker.store.base`). A repo, revision or advisory the store does not
hold raises `StoreNotFoundError`; any other database failure `StoreError`. A new table: a
`StoreModel` subclass in a module imported by `tracker.store.schema`, plus a migration in
`migrations/versions/`.
"""

from __future__ import annotations

from sqlalchemy import Engine

from tracker.store.engine import create_engine, upgrade
from tracker.store.store import Store
from tracker.store.values import (
    AnalysisOverrun,
    Event,
    EventKind,
    FileKind,
    FileVersion,
    RepoState,
    RepoStatus,
    StoredRevision,
)

__all__ = [
    "AnalysisOverrun",
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
