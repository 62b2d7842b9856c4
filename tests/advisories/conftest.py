"""Fixtures for the advisory tests: a real SQLite store, a pinned clock, real commit shas and changes."""

from __future__ import annotations

from pathlib import Path

import pytest
from advkit import make_store

from tracker.store.advisories import AdvisoryStore


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'advisories.db'}"


@pytest.fixture
def store(db_url: str) -> AdvisoryStore:
    s = make_store(db_url)
    yield s
    s.engine.dispose()


@pytest.fixture
def fresh_pg(pg_url: str) -> str:
    """A URL to a new, empty PostgreSQL database of its own (the session `pg_url` one is shared)."""
    import uuid

    import sqlalchemy as sa

    base = sa.make_url(pg_url)
    name = f"{base.database}_adv_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(
                sa.text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :n AND pid <> pg_backend_pid()"
                ),
                {"n": name},
            )
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}"'))
        admin.dispose()
