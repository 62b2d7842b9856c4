"""Migration 0009: operations counters per repo, and the outbox keyed by event type too.

Revision "0009" after "0008".
- `ingestion_state` gets `polls`, `poll_failures`, `ingest_seconds_sum` and
  `ingest_seconds_buckets` (a JSON histogram), which `record_poll` keeps and `/metrics` reads, so
  the numbers are the store's (one truth for `tracker poll` and `tracker serve`, kept across
  restarts). Existing rows start at zero: polls before this release were not counted.
- `webhook_deliveries`' unique key (subscription, repo, sha) becomes a partial unique index over
  publications only (`event = 'revision.advisories'`): a revision's advisories withdrawn by a
  history rewrite get a delivery of their own (`advisory.withdrawn`), as often as that happens
  (withdrawn, restored by a later push, withdrawn again). Existing rows are kept as they are.

SQLite rebuilds the outbox table to change its key (see `_rekey`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

_OLD_KEY = "uq_webhook_deliveries_rev"
PUBLICATION_ONLY = "event = 'revision.advisories'"
_COUNTERS = (
    ("polls", sa.Integer, "0"),
    ("poll_failures", sa.Integer, "0"),
    ("ingest_seconds_sum", sa.Float, "0"),
    ("ingest_seconds_buckets", sa.Text, "{}"),
)


def _attempts_table() -> None:
    """`webhook_attempts` exactly as migration 0007 creates it (on SQLite)."""
    op.create_table(
        "webhook_attempts",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "delivery_id",
            sa.Integer,
            sa.ForeignKey("webhook_deliveries.id", name="fk_webhook_attempts_delivery"),
            nullable=False,
        ),
        sa.Column("n", sa.Integer, nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("duration_ms", sa.Integer, nullable=False),
        sa.Column("status", sa.Integer, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("outcome", sa.String(16), nullable=False),
    )
    op.create_index("ix_webhook_attempts_delivery_id", "webhook_attempts", ["delivery_id"])


def _sqlite_rebuild(change: Callable[[Any], None]) -> None:
    """Rebuild the outbox table on SQLite (batch mode) with `change` applied. Dropping the old
    table would break the delivery log's references to it (within a transaction SQLite cannot
    turn foreign keys off), so the log is set aside first and put back, row for row, once the
    new table has the old one's name."""
    op.execute("CREATE TABLE _webhook_attempts_0009 AS SELECT * FROM webhook_attempts")
    op.drop_index("ix_webhook_attempts_delivery_id", table_name="webhook_attempts")
    op.drop_table("webhook_attempts")
    with op.batch_alter_table("webhook_deliveries") as batch:
        change(batch)
    _attempts_table()
    op.execute(
        "INSERT INTO webhook_attempts (id, delivery_id, n, started_at, duration_ms, status, "
        "error, outcome) SELECT id, delivery_id, n, started_at, duration_ms, status, error, "
        "outcome FROM _webhook_attempts_0009"
    )
    op.drop_table("_webhook_attempts_0009")


def _publication_index() -> None:
    op.create_index(
        "uq_webhook_deliveries_publication",
        "webhook_deliveries",
        ["subscription_id", "repo_pk", "sha"],
        unique=True,
        sqlite_where=sa.text(PUBLICATION_ONLY),
        postgresql_where=sa.text(PUBLICATION_ONLY),
    )


def upgrade() -> None:
    with op.batch_alter_table("ingestion_state") as batch:
        for name, kind, default in _COUNTERS:
            batch.add_column(sa.Column(name, kind(), nullable=False, server_default=default))
    if op.get_bind().dialect.name == "sqlite":
        _sqlite_rebuild(lambda b: b.drop_constraint(_OLD_KEY, type_="unique"))
    else:
        op.drop_constraint(_OLD_KEY, "webhook_deliveries", type_="unique")
    _publication_index()


def downgrade() -> None:
    # Withdrawal deliveries have no place under the old key: they go (with their log).
    op.execute(
        "DELETE FROM webhook_attempts WHERE delivery_id IN "
        f"(SELECT id FROM webhook_deliveries WHERE NOT ({PUBLICATION_ONLY}))"
    )
    op.execute(f"DELETE FROM webhook_deliveries WHERE NOT ({PUBLICATION_ONLY})")
    op.drop_index("uq_webhook_deliveries_publication", table_name="webhook_deliveries")
    columns = ["subscription_id", "repo_pk", "sha"]
    if op.get_bind().dialect.name == "sqlite":
        _sqlite_rebuild(lambda b: b.create_unique_constraint(_OLD_KEY, columns))
    else:
        op.create_unique_constraint(_OLD_KEY, "webhook_deliveries", columns)
    with op.batch_alter_table("ingestion_state") as batch:
        for name, _, _ in reversed(_COUNTERS):
            batch.drop_column(name)
