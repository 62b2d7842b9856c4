"""The whole schema: imports every table module so that `METADATA` holds every store table.

Migrations (`env.py`) and the schema tests compare against this. A new table module is added
to the imports here and gets its own migration.
"""

from __future__ import annotations

from tracker.store.advisories.tables import ADVISORY_TABLES
from tracker.store.analysis import ANALYSIS_TABLES
from tracker.store.base import METADATA
from tracker.store.generation import GENERATION_TABLES
from tracker.store.lineage import LINEAGE_TABLES
from tracker.store.preflight import PREFLIGHT_TABLES
from tracker.store.tables import SNAPSHOT_TABLES
from tracker.store.webhooks.tables import WEBHOOK_TABLES
from tracker.store.workers import WORKER_TABLES

ALL_TABLES: tuple[str, ...] = (
    SNAPSHOT_TABLES
    + ADVISORY_TABLES
    + ANALYSIS_TABLES
    + PREFLIGHT_TABLES
    + WEBHOOK_TABLES
    + WORKER_TABLES
    + GENERATION_TABLES
    + LINEAGE_TABLES
)
"""Every table of the store (all in `METADATA`; `METADATA.sorted_tables` orders them by dependency)."""

__all__ = ["ALL_TABLES", "METADATA", "WEBHOOK_TABLES", "WORKER_TABLES"]
