"""Migration 0013: on PostgreSQL, drop 0012's generation triggers (and their function).

Their `UPDATE store_generations` locked a domain's counter row until the writer committed, so two
concurrent pollers could deadlock: one holding a counter row and waiting on a row the other held
(found by tests/store/test_store_concurrency.py, 3 processes: "deadlock detected … while updating
tuple in relation store_generations"). PostgreSQL's generation is the lock-free current snapshot
again (`tracker.store.generation`); SQLite, one writer at a time, keeps its triggers.

Revision "0013" after "0012".
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def _m0012() -> ModuleType:
    path = Path(__file__).with_name("0012_store_generations.py")
    spec = importlib.util.spec_from_file_location("tracker_migration_0012", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for name, table in _m0012()._trigger_names():
        op.execute(f"DROP TRIGGER IF EXISTS {name} ON {table}")
    op.execute("DROP FUNCTION IF EXISTS tracker_bump_generation()")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for statement in _m0012().triggers_sql(True):
        op.execute(statement)
