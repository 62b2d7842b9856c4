"""Migration 0002 creates exactly the advisory tables of tracker.store.advisories (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlmodel import SQLModel

from tracker.store.advisories import ADVISORY_TABLES
from tracker.store.store import create_engine, upgrade


def _diffs(engine: sa.Engine) -> list[object]:
    upgrade(engine)
    with engine.connect() as conn:
        ctx = MigrationContext.configure(
            conn, opts={"compare_type": True, "compare_server_default": True}
        )
        diffs = compare_metadata(ctx, SQLModel.metadata)
    mine = set(ADVISORY_TABLES)

    def table_of(d: object) -> str | None:
        item = d[0] if isinstance(d, list) else d
        for part in item[1:] if isinstance(item, tuple) else ():
            name = getattr(part, "name", None) if not isinstance(part, str) else None
            table = getattr(part, "table", None)
            if table is not None:
                return str(table.name)
            if name in mine:
                return str(name)
            if isinstance(part, str) and part in mine:
                return part
        return None

    return [d for d in diffs if table_of(d) in mine]


def test_migration_matches_tables_on_sqlite(tmp_path) -> None:  # type: ignore[no-untyped-def]
    engine = create_engine(f"sqlite:///{tmp_path / 'm.db'}")
    try:
        assert _diffs(engine) == []
        assert set(ADVISORY_TABLES) <= set(sa.inspect(engine).get_table_names())
        with engine.connect() as conn:
            assert (
                conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar_one()
                >= "0002"
            )
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_migration_matches_tables_on_postgres(fresh_pg: str) -> None:
    engine = create_engine(fresh_pg)
    try:
        assert _diffs(engine) == []
        assert set(ADVISORY_TABLES) <= set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()
