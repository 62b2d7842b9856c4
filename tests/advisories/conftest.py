"""Fixtures for the advisory tests: a real SQLite store, a pinned clock, real commit shas and changes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
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
def fresh_pg(pg_database: Callable[[str], AbstractContextManager[str]]) -> Iterator[str]:
    """A URL to a new, empty PostgreSQL database of its own (the session `pg_url` one is shared)."""
    with pg_database("adv") as url:
        yield url
