"""The advisory store: tables (`tables`), reads and writes (`queries`), the values it returns (`values`).

Public: `AdvisoryStore` (over the store's engine), `AdvisoryTx` (one transaction), the values
`StoredAdvisory`, `SuppressedChange`, `OpenCandidate`, `AdvisoryConflictError` and the table names
`ADVISORY_TABLES`. The tables are created by the store's migrations (`Store.open`).
"""

from __future__ import annotations

from tracker.store.advisories.queries import AdvisoryStore, AdvisoryTx
from tracker.store.advisories.tables import ADVISORY_TABLES
from tracker.store.advisories.values import (
    AdvisoryConflictError,
    OpenCandidate,
    StoredAdvisory,
    SuppressedChange,
)

__all__ = [
    "ADVISORY_TABLES",
    "AdvisoryConflictError",
    "AdvisoryStore",
    "AdvisoryTx",
    "OpenCandidate",
    "StoredAdvisory",
    "SuppressedChange",
]
