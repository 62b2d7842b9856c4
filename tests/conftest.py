"""Shared test fixtures: a clean environment per test, state under tmp_path, and a PostgreSQL URL.

Autouse: every TRACKER_* and HF_* variable is cleared; TRACKER_STATE_DIR points at the test's
tmp_path; HF_HOME at a temp dir; HF_HUB_DISABLE_XET=1 (the replica speaks no Xet).
`pg_url`: a fresh PostgreSQL database for the test session (from TRACKER_TEST_PG_URL, default
postgresql+psycopg://postgres@127.0.0.1:5432/postgres), dropped at the end; `pg_database`: more
databases of their own, each dropped when its `with` block ends.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

PG_DEFAULT = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
_PG_ENV = os.environ.get("TRACKER_TEST_PG_URL", PG_DEFAULT)


@pytest.fixture(scope="session")
def _user_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tests' user cache dir (XDG_CACHE_HOME): one per run, shared by its xdist workers (the
    run's base temp dir), so the executed-effects cache (tracker.advisories.execute.EffectCache)
    starts empty on every run, as on a fresh machine, and is never ~/.cache."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    return base / "xdg-cache"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, _user_cache: Path) -> None:
    for name in list(os.environ):
        if name.startswith(("TRACKER_", "HF_", "HUGGINGFACE_")):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(_user_cache))
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


@pytest.fixture(scope="session")
def pg_database(pg_url: str) -> Callable[[str], AbstractContextManager[str]]:
    """`with pg_database("label") as url:` a new, empty PostgreSQL database of its own (next to
    the session's `pg_url` one), dropped on exit even while connections to it are open."""
    import sqlalchemy as sa

    base = sa.make_url(pg_url)

    @contextmanager
    def database(label: str) -> Iterator[str]:
        name = f"{base.database}_{label}_{uuid.uuid4().hex[:8]}"
        admin = sa.create_engine(base, isolation_level="AUTOCOMMIT")
        try:
            with admin.connect() as conn:
                conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
            yield base.set(database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect() as conn:
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            admin.dispose()

    return database


DEMO_NOW = datetime(2026, 11, 30, 9, 30, 0, tzinfo=UTC)
"""The pinned clock of `demo_run`: every timestamp the demo cycle writes is this instant."""


@dataclass(frozen=True)
class DemoRun:
    """`make demo`'s poll cycle, run once per session: the app (open), both cycles' reports, and
    the advisory export after each cycle (through `tracker advisories export`, then in-process)."""

    app: Any
    root: Path
    first: Any
    second: Any
    export_first: Path
    export_second: Path


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoRun]:
    """Poll the top-level watchlist.yaml (the demo's repos) against the bundled demo Hub twice, with
    the clock pinned at DEMO_NOW, exporting the advisories after each cycle.

    The first export is made by the installed `tracker advisories export` over the demo's store (as
    a user would), the second in-process with the same exporter. Shared by the demo tests so the
    demo runs once per session.
    """
    import subprocess
    import sys

    from tracker.advisories.export import export
    from tracker.app import build
    from tracker.cli.demo import ensure_demo_hub
    from tracker.replica import Replica
    from tracker.replica.demo import DEMO_TOKEN
    from tracker.settings import load_settings

    root = tmp_path_factory.mktemp("demo-run")
    ensure_demo_hub(root / "hub")
    watchlist = Path(__file__).resolve().parents[1] / "watchlist.yaml"
    with Replica(root / "hub") as hub:
        settings = load_settings(
            state_dir=root / "state",
            # the watchlist's preflight versions: tables from this checkout's cache, the one
            # tests/preflight fills (fetched once per clone, never per session)
            preflight_cache_dir=Path(__file__).resolve().parents[1]
            / "state"
            / "cache"
            / "preflight",
            watchlist=watchlist,
            hf_endpoint=hub.url,
            hf_token=DEMO_TOKEN,
            hub_public_url="https://huggingface.co",
            advisory_prefix="TRACKER",
        )
        app = build(settings, clock=lambda: DEMO_NOW)
        try:
            first = app.pipeline.run_cycle()
            env = {
                k: v
                for k, v in os.environ.items()
                if not k.startswith(("TRACKER_", "HF_", "HUGGINGFACE_"))
            }
            env["TRACKER_STATE_DIR"] = str(root / "state")
            tracker = Path(sys.executable).with_name("tracker")
            done = subprocess.run(
                [str(tracker), "advisories", "export", str(root / "export-1")],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, done.stderr
            second = app.pipeline.run_cycle()
            export(app.advisories.list_advisories(), root / "export-2")
            yield DemoRun(
                app=app,
                root=root,
                first=first,
                second=second,
                export_first=root / "export-1",
                export_second=root / "export-2",
            )
        finally:
            app.close()
