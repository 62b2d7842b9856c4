"""Engine creation (SQLite pragmas, PostgreSQL), atomic Alembic upgrades, transactions and upserts.

Transactions: SQLite connections leave transaction control to us (the driver's implicit BEGIN
only covers DML, so DDL would autocommit statement by statement). Every transaction starts with
`BEGIN`, and a writing one (`transaction(..., write=True)`, migrations) with `BEGIN IMMEDIATE`:
it takes SQLite's one write lock before it reads, waiting up to the busy timeout, so writers
queue instead of failing to upgrade a read lock (SQLITE_BUSY). PostgreSQL runs READ COMMITTED;
rows two processes can both write go through `insert_ignore` / `upsert` (ON CONFLICT), so a
concurrent writer's row is taken as the same work done, never an IntegrityError.
Migrations (`upgrade`) run in one transaction: `BEGIN IMMEDIATE` on SQLite, a transaction-level
advisory lock on PostgreSQL; a kill leaves the old schema or the new one, and concurrent first
opens run one after the other (the later ones find the schema at head and do nothing).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session as OrmSession
from sqlmodel import Session

from tracker.shared.errors import StoreError

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

MIGRATIONS = Path(__file__).with_name("migrations")
WRITE = "tracker_write"
"""Execution option: a transaction on an engine with it set takes the write lock first (SQLite)."""
MIGRATION_LOCK = int.from_bytes(b"trackmig", "big") & 0x7FFF_FFFF_FFFF_FFFF
"""The PostgreSQL advisory lock key that serialises migrations of one database."""


def create_engine(url: str) -> sa.Engine:
    """An engine for `url`; SQLite gets WAL, foreign keys and a 30 s busy timeout on every connection."""
    if url.startswith("sqlite"):
        db = sa.make_url(url).database
        if db and db != ":memory:":
            Path(db).parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(url, connect_args={"timeout": 30})

        @sa.event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # the driver emits no BEGIN; `_begin` does
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        @sa.event.listens_for(engine, "begin")
        def _begin(conn: sa.Connection) -> None:
            write = conn.get_execution_options().get(WRITE)
            conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

        return engine
    return sa.create_engine(url, pool_pre_ping=True)


def writer(engine: sa.Engine) -> sa.Engine:
    """`engine` for transactions that write (see the module docstring)."""
    return engine.execution_options(**{WRITE: True})


# Alembic (about a third of a CLI command's start) is imported only when the schema is not at
# head or a migration's id is looked up: the common open (schema at head) reads the version table
# with SQLAlchemy and compares it with the head found from the migration files' own lines.


def _alembic_config() -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("path_separator", "os")
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("version_locations", str(MIGRATIONS / "versions"))
    return cfg


def _script() -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_alembic_config())


def known_revision(revision: str) -> bool:
    """Whether `revision` is one of this code's migrations."""
    try:
        return _script().get_revision(revision) is not None
    except Exception:  # alembic's errors for an unknown id vary by version
        return False


def current_revision(engine: sa.Engine) -> str | None:
    """The schema's Alembic revision (None for an empty database): the one row of Alembic's
    version table, read as `MigrationContext.get_current_revision` reads it."""
    with engine.connect() as conn:
        if not sa.inspect(conn).has_table("alembic_version"):
            return None
        rows = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalars().all()
    if len(rows) > 1:
        raise StoreError(f"the store's schema has {len(rows)} migration heads: {sorted(rows)}")
    return str(rows[0]) if rows else None


_REVISION_LINE = re.compile(r"^(down_revision|revision)\b[^=]*=\s*(.+)$", re.MULTILINE)


@functools.cache
def head_revision() -> str:
    """The newest migration this tracker knows (Alembic `head`): the one revision no migration
    file names as its `down_revision` (tests/store/test_store_core.py checks it against
    Alembic's own `get_current_head`); Alembic decides when the files' lines are not plain."""
    revisions: set[str] = set()
    downs: set[str] = set()
    for path in sorted((MIGRATIONS / "versions").glob("*.py")):
        for name, value in _REVISION_LINE.findall(path.read_text(encoding="utf-8")):
            ids = re.findall(r"[\"']([^\"']+)[\"']", value)
            if value.strip() != "None" and not ids:
                return _alembic_head()
            (revisions if name == "revision" else downs).update(ids)
    heads = revisions - downs
    if len(heads) != 1:
        return _alembic_head()
    return heads.pop()


def _alembic_head() -> str:
    head = _script().get_current_head()
    assert head is not None
    return head


def display_url(url: str) -> str:
    """`url` as messages name a store: an SQLite file's path, else the URL without its password."""
    return sa.make_url(url).render_as_string(hide_password=True).removeprefix("sqlite:///")


def probe_revision(url: str) -> str | None:
    """The schema revision of the store at `url`, creating nothing: None when an SQLite file is
    not there, the database has no schema, or it cannot be reached (opening it says why)."""
    if url.startswith("sqlite:///"):
        path = url.removeprefix("sqlite:///").split("?", 1)[0]
        if not path or path == ":memory:" or not Path(path).is_file():
            return None
    engine = create_engine(url)
    try:
        return current_revision(engine)
    except sa.exc.SQLAlchemyError:
        return None
    finally:
        engine.dispose()


def require_schema(engine: sa.Engine, where: str) -> None:
    """Check, without writing anything, that `engine`'s schema is at head: NoStoreError when the
    database holds no schema at all (never migrated: nothing was polled into it), StoreError
    naming the step to take when it is behind (or ahead of) this tracker's migrations."""
    from tracker.shared.errors import NoStoreError

    current = current_revision(engine)
    if current is None:
        raise NoStoreError(
            f"no store at {where}: nothing has been polled into it yet (`tracker poll --once` "
            "or `tracker demo` fills it)"
        )
    head = head_revision()
    if current == head:
        return
    script = _script()
    known = {rev.revision for rev in script.walk_revisions()}
    if current not in known:
        raise StoreError(
            f"the store at {where} is at migration {current}, which this tracker does not know "
            f"(its newest is {head}): it was written by a newer tracker; upgrade tracker"
        )
    raise StoreError(
        f"the store at {where} is at migration {current}, this tracker needs {head}: read-only "
        "commands migrate nothing; `tracker migrate` (or any command that writes) migrates it"
    )


def upgrade(engine: sa.Engine, revision: str = "head") -> None:
    """Bring the schema to `revision` in one transaction, serialised against other processes.

    Already there (the common case: every command opens the store): one read, no lock.
    """
    current = current_revision(engine)
    if revision == "head" and current == head_revision():
        return
    from alembic import command

    cfg = _alembic_config()
    target = _script().as_revision_number(revision)
    if current == target:
        return
    with writer(engine).begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": MIGRATION_LOCK})
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


@contextmanager
def transaction(engine: sa.Engine, label: str, *, write: bool = False) -> Iterator[Session]:
    """One transaction on `engine`: committed on success, rolled back on any error; `write`: it
    takes the write lock first (SQLite; see the module docstring).

    SQLAlchemy errors become StoreError (prefixed with `label`); every other exception, tracker's
    own included, propagates unchanged after the rollback.
    """
    session = Session(writer(engine) if write else engine, expire_on_commit=False)
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


def _insert(session: OrmSession, table: sa.Table) -> Any:
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        return postgresql.insert(table)
    if dialect == "sqlite":
        return sqlite.insert(table)
    raise StoreError(f"unsupported database dialect {dialect!r}")  # pragma: no cover


def insert_ignore(
    session: OrmSession,
    table: sa.Table,
    values: dict[str, Any],
    conflict: Sequence[str] | None,
    *,
    where: sa.TextClause | None = None,
) -> bool:
    """INSERT `values` unless a row with the same `conflict` key (None: any unique key) exists,
    or is being inserted by a concurrent transaction, which is waited for; True when this call
    inserted the row. `where`: the condition of a partial unique index on `conflict`."""
    stmt = (
        _insert(session, table)
        .values(**values)
        .on_conflict_do_nothing(index_elements=conflict, index_where=where)
    )
    # RETURNING, not rowcount: drivers report -1 for some inserts (psycopg with ON CONFLICT).
    returned = session.execute(stmt.returning(*table.primary_key.columns)).first()
    return returned is not None


def upsert(
    session: OrmSession,
    table: sa.Table,
    values: dict[str, Any],
    conflict: Sequence[str],
    update: Sequence[str],
) -> None:
    """INSERT `values`, or UPDATE the `update` columns of the row with the same `conflict` key."""
    stmt = _insert(session, table).values(**values)
    stmt = stmt.on_conflict_do_update(
        index_elements=conflict, set_={c: stmt.excluded[c] for c in update}
    )
    session.execute(stmt)
