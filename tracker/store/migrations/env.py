"""Alembic environment: runs migrations on the connection `tracker.store` hands in (online only).

`Store.open` calls `alembic.command.upgrade(cfg, "head")` with `cfg.attributes["connection"]` set;
run by hand (`alembic -c ...`) it falls back to `sqlalchemy.url` from the config.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context

from tracker.store.schema import METADATA

config = context.config
target_metadata = METADATA


def _run(connection: sa.Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = sa.create_engine(config.get_main_option("sqlalchemy.url") or "")
    try:
        with engine.connect() as conn:
            _run(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise RuntimeError("tracker migrations run online only (Store.open upgrades on open)")
run_migrations_online()
