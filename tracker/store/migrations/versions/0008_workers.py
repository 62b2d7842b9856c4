"""Migration 0008: many workers on one database: the repo schedule with its leases, the worker
registry and the rate budget.

Revision "0008" after "0007"; creates exactly the tables of `tracker.store.workers` (new tables
only: nothing existing changes).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pg = op.get_bind().dialect.name == "postgresql"

    def time() -> sa.DateTime:
        return sa.DateTime(timezone=True) if pg else sa.DateTime()

    op.create_table(
        "repo_schedule",
        sa.Column("repo_id", sa.String(200), primary_key=True),
        sa.Column("next_due", time(), nullable=False),
        sa.Column("lease_owner", sa.String(200), nullable=True),
        sa.Column("lease_job", sa.String(32), nullable=True),
        sa.Column("lease_since", time(), nullable=True),
        sa.Column("lease_expires", time(), nullable=True),
        sa.Column("requested_at", time(), nullable=True),
        sa.Column("consecutive_failures", sa.Integer, nullable=False, server_default="0"),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("last_poll", time(), nullable=True),
    )
    op.create_index("ix_repo_schedule_next_due", "repo_schedule", ["next_due"])
    op.create_table(
        "workers",
        sa.Column("id", sa.String(200), primary_key=True),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("started", time(), nullable=False),
        sa.Column("heartbeat", time(), nullable=False),
    )
    op.create_table(
        "rate_budget",
        sa.Column("bucket", sa.String(32), primary_key=True),
        sa.Column("window_start", time(), nullable=False),
        sa.Column("used", sa.Integer, nullable=False),
        sa.Column("quota", sa.Integer, nullable=False),
        sa.Column("window_s", sa.Float, nullable=False),
        sa.Column("blocked_until", time(), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("rate_budget")
    op.drop_table("workers")
    op.drop_index("ix_repo_schedule_next_due", table_name="repo_schedule")
    op.drop_table("repo_schedule")
