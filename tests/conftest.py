"""Shared test fixtures: a clean environment per test, state under tmp_path, and a PostgreSQL URL.

Autouse: every TRACKER_* and HF_* variable is cleared; TRACKER_STATE_DIR points at the test's
tmp_path; HF_HOME at a temp dir; HF_HUB_DISABLE_XET=1 (the replica speaks no Xet).
`pg_url`: a fresh PostgreSQL database for the test session (from TRACKER_TEST_PG_URL, default
postgresql+psycopg://postgres@127.0.0.1:5432/postgres), dropped at the end.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

PG_DEFAULT = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
_PG_ENV = os.environ.get("TRACKER_TEST_PG_URL", PG_DEFAULT)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith(("TRACKER_", "HF_", "HUGGINGFACE_")):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TRACKER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A URL to a fresh, empty PostgreSQL database, created for this session and dropped after."""
    import sqlalchemy as sa

    admin_url = sa.make_url(_PG_ENV)
    name = f"tracker_test_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    except sa.exc.OperationalError as exc:
        admin.dispose()
        pytest.fail(f"PostgreSQL at {admin_url!r} is not reachable: {exc}")
    try:
        yield admin_url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(
                sa.text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = :n AND pid <> pg_backend_pid()"
                ),
                {"n": name},
            )
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}"'))
        admin.dispose()
