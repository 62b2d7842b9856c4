"""Read-only commands create and migrate nothing, on SQLite and PostgreSQL alike (issue 11 item 10):
the installed `tracker` run as a process. A database without a schema is "no store" (the same
line and exit code on both backends); a store behind on migrations is one line that says
`tracker migrate` migrates it (exit 6), and the schema is left where it was.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
import sqlalchemy as sa

from tracker.store.engine import create_engine, current_revision, head_revision, upgrade

TRACKER = Path(sys.executable).with_name("tracker")
OLD = "0006"

READS: list[tuple[tuple[str, ...], int]] = [
    (("history", "acme/tiny"), 3),
    (("show", "acme/tiny@HEAD", "config.json"), 3),
    (("advisories", "show", "x_TRACKER-2026-1"), 3),
    (("estimate", "acme/tiny@HEAD~1"), 3),
]
"""Read-only commands that need the store, and their exit status when there is none."""


def run(tmp: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env |= {
        "TRACKER_STATE_DIR": str(tmp / "state"),
        "TRACKER_DATABASE_URL": url,
        "TRACKER_WATCHLIST": str(tmp / "watchlist.yaml"),
        "TRACKER_HF_ENDPOINT": "http://127.0.0.1:9",
        "TRACKER_RETRY_ATTEMPTS": "1",
    }
    return subprocess.run(
        [str(TRACKER), *args], env=env, cwd=tmp, capture_output=True, text=True, timeout=120
    )


def tables(url: str) -> set[str]:
    engine = sa.create_engine(url)
    try:
        return set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_db(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    pg_database: Callable[[str], AbstractContextManager[str]],
) -> Iterator[tuple[str, str]]:
    """(URL, how the "no store" line names it) of an empty database: an SQLite file of zero
    bytes, or a PostgreSQL database just created."""
    if request.param == "sqlite":
        path = tmp_path / "empty.db"
        path.touch()
        yield f"sqlite:///{path}", str(path)
        return
    with pg_database("cli_ro") as url:
        yield url, sa.make_url(url).render_as_string(hide_password=True)


def test_empty_database_is_no_store_and_stays_empty(
    tmp_path: Path, empty_db: tuple[str, str]
) -> None:
    url, where = empty_db
    (tmp_path / "watchlist.yaml").write_text("repos:\n  - id: acme/tiny\n")
    no_store = (
        f"no store at {where}: nothing has been polled into it yet (`tracker poll --once` or "
        "`tracker demo` fills it)"
    )
    listed = run(tmp_path, url, "advisories", "list", "--json")
    assert (listed.returncode, listed.stdout, listed.stderr) == (0, "[]\n", f"note: {no_store}\n")
    watched = run(tmp_path, url, "watch", "list", "--json")
    assert (watched.returncode, watched.stderr) == (0, f"note: {no_store}\n")
    assert '"repo": "acme/tiny"' in watched.stdout
    for args, code in READS:
        done = run(tmp_path, url, *args)
        assert done.returncode == code, (args, done.stderr)
        if args[0] != "estimate":  # estimate falls back to "no ingested revision matches"
            assert done.stderr == f"error: {no_store}\n", args
    assert tables(url) == set()
    assert not (tmp_path / "state").exists()


def test_store_behind_on_migrations_is_one_line_and_not_migrated(
    tmp_path: Path, empty_db: tuple[str, str]
) -> None:
    url, where = empty_db
    engine = create_engine(url)
    try:
        upgrade(engine, OLD)
    finally:
        engine.dispose()
    (tmp_path / "watchlist.yaml").write_text("repos: []\n")
    head = head_revision()
    line = (
        f"error: the store at {where} is at migration {OLD}, this tracker needs {head}: "
        "read-only commands migrate nothing; `tracker migrate` (or any command that writes) "
        "migrates it\n"
    )
    for args in (("advisories", "list"), READS[0][0]):
        done = run(tmp_path, url, *args)
        assert (done.returncode, done.stderr) == (6, line), args
    engine = create_engine(url)
    try:
        assert current_revision(engine) == OLD
        migrated = run(tmp_path, url, "migrate")
        assert (migrated.returncode, migrated.stdout) == (
            0,
            f"the store at {where}: migration {OLD} -> {head}\n",
        )
        assert current_revision(engine) == head
        again = run(tmp_path, url, "migrate", "--json")
        assert again.stdout == f'{{"store": "{where}", "from": "{head}", "to": "{head}"}}\n'
    finally:
        engine.dispose()
    listed = run(tmp_path, url, "advisories", "list", "--json")
    assert (listed.returncode, listed.stdout, listed.stderr) == (0, "[]\n", "")
