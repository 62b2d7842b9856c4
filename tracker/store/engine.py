"""Engine creation (SQLite pragmas, PostgreSQL), Alembic upgrades and the one transaction helper."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from sqlmodel import Session

from tracker.errors import StoreError

MIGRATIONS = Path(__file__).with_name("migrations")


def create_engine(url: str) -> sa.Engine:
    """An engine for `url`; SQLite gets WAL, foreign keys and a 30 s busy timeout on every connection."""
    if url.startswith("sqlite"):
        db = sa.make_url(url).database
        if db and db != ":memory:":
            Path(db).parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(url, connect_args={"timeout": 30})

        @sa.event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        return engine
    return sa.create_engine(url, pool_pre_ping=True)


def upgrade(engine: sa.Engine, revision: str = "head") -> None:
    """Run the Alembic migrations (ours and those chained after "0001") up to `revision`."""
    cfg = Config()
    cfg.set_main_option("path_separator", "os")
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("version_locations", str(MIGRATIONS / "versions"))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


@contextmanager
def transaction(engine: sa.Engine, label: str) -> Iterator[Session]:
    """One transaction on `engine`: committed on success, rolled back on any error.

    SQLAlchemy errors become StoreError (prefixed with `label`); every other exception, tracker's
    own included, propagates unchanged after the rollback.
    """
    session = Session(engine, expire_on_commit=False)
    try:
        yield session
        session.commit()
    except sa.exc.SQLAlchemyError as exc:
        session.rollback()
        raise StoreError(f"{label}: {exc.__class__.__name__}: {exc}") from exc
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()
