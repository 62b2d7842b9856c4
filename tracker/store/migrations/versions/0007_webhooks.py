"""Migration 0007: the push side: webhook subscriptions, the delivery outbox and its log, poll requests.

Revision "0007" after "0006"; creates exactly the tables of `tracker.store.webhooks.tables`
(new tables only: nothing existing changes).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pg = op.get_bind().dialect.name == "postgresql"

    def time() -> sa.DateTime:
        return sa.DateTime(timezone=True) if pg else sa.DateTime()

    op.create_table(
        "subscriptions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("repos", sa.Text, nullable=False),
        sa.Column("min_severity", sa.String(16), nullable=False),
        sa.Column("kinds", sa.Text, nullable=False),
        sa.Column("secrets", sa.Text, nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("enabled", sa.Boolean, nullable=False),
        sa.Column("disabled_reason", sa.Text, nullable=True),
        sa.Column("created_at", time(), nullable=False),
        sa.Column("updated_at", time(), nullable=False),
    )
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("msg_id", sa.String(64), nullable=False, unique=True),
        sa.Column(
            "subscription_id",
            sa.Integer,
            sa.ForeignKey("subscriptions.id", name="fk_webhook_deliveries_subscription"),
            nullable=False,
        ),
        sa.Column("repo_pk", sa.Integer, sa.ForeignKey("repos.id"), nullable=False),
        sa.Column("sha", sa.String(40), nullable=False),
        sa.Column("event", sa.String(64), nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("next_attempt_at", time(), nullable=False),
        sa.Column("claimed_until", time(), nullable=True),
        sa.Column("created_at", time(), nullable=False),
        sa.Column("finished_at", time(), nullable=True),
        sa.Column("last_status", sa.Integer, nullable=True),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.UniqueConstraint("subscription_id", "repo_pk", "sha", name="uq_webhook_deliveries_rev"),
        sa.ForeignKeyConstraint(
            ["repo_pk", "sha"],
            ["revisions.repo_pk", "revisions.sha"],
            name="fk_webhook_deliveries_revision",
        ),
    )
    op.create_index(
        "ix_webhook_deliveries_subscription_id", "webhook_deliveries", ["subscription_id"]
    )
    op.create_index(
        "ix_webhook_deliveries_next_attempt_at", "webhook_deliveries", ["next_attempt_at"]
    )
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
        sa.Column("started_at", time(), nullable=False),
        sa.Column("duration_ms", sa.Integer, nullable=False),
        sa.Column("status", sa.Integer, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("outcome", sa.String(16), nullable=False),
    )
    op.create_index("ix_webhook_attempts_delivery_id", "webhook_attempts", ["delivery_id"])
    op.create_table(
        "poll_requests",
        sa.Column("repo_id", sa.String(200), primary_key=True),
        sa.Column("reason", sa.String(32), nullable=False),
        sa.Column("requested_at", time(), nullable=False),
        sa.Column("requests", sa.Integer, nullable=False),
        sa.Column("claimed_until", time(), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("poll_requests")
    op.drop_index("ix_webhook_attempts_delivery_id", table_name="webhook_attempts")
    op.drop_table("webhook_attempts")
    op.drop_index("ix_webhook_deliveries_next_attempt_at", table_name="webhook_deliveries")
    op.drop_index("ix_webhook_deliveries_subscription_id", table_name="webhook_deliveries")
    op.drop_table("webhook_deliveries")
    op.drop_table("subscriptions")
