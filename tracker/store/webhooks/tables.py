"""Tables of the push side: webhook subscriptions, the delivery outbox and its attempts, and the
queue of poll requests (Hub webhooks and manual triggers).

Migration 0007 creates exactly these (0009 narrows the outbox's unique key to publications).
`webhook_deliveries` is the outbox, written in the transaction that changes the advisories: one
row per (subscription, revision) for its publication, one per withdrawal of a revision's
advisories (a history rewrite), each holding the exact body every attempt sends (so a retry after a crash sends the same `webhook-id` and bytes).
`webhook_attempts` is the delivery log. `poll_requests` has one row per repo with a poll asked
for: asking again while it waits changes nothing, asking during the poll makes one more.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field

from tracker.store.base import StoreModel, UtcDateTime
from tracker.store.tables import repo_fk, revision_fk


class SubscriptionRow(StoreModel, table=True):
    __tablename__ = "subscriptions"

    id: int | None = Field(default=None, sa_column=sa.Column(sa.Integer, primary_key=True))
    url: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    repos: str = Field(sa_column=sa.Column(sa.Text, nullable=False))  # JSON list of globs
    min_severity: str = Field(sa_column=sa.Column(sa.String(16), nullable=False))
    kinds: str = Field(sa_column=sa.Column(sa.Text, nullable=False))  # JSON list; [] = all
    # JSON list of event types; NULL or [] = all (migration 0016_web27)
    events: str | None = Field(default=None, sa_column=sa.Column(sa.Text, nullable=True))
    # the watchlist team whose affected advisories it receives; NULL: no team filter (0017_team29)
    team: str | None = Field(default=None, sa_column=sa.Column(sa.Text, nullable=True))
    secrets: str = Field(sa_column=sa.Column(sa.Text, nullable=False))  # JSON [{secret, expires}]
    description: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    enabled: bool = Field(sa_column=sa.Column(sa.Boolean, nullable=False))
    disabled_reason: str | None = Field(default=None, sa_column=sa.Column(sa.Text, nullable=True))
    created_at: datetime = Field(sa_column=sa.Column(UtcDateTime, nullable=False))
    updated_at: datetime = Field(sa_column=sa.Column(UtcDateTime, nullable=False))


PUBLICATION_ONLY = "event = 'revision.advisories'"
"""The rows the outbox's unique key covers (`tracker.webhooks.events.EVENT`)."""


class DeliveryRow(StoreModel, table=True):
    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        # A revision's publication goes to a subscriber once (the publish may run again after
        # a crash); other events (withdrawals) are made once by the transaction that changes
        # the advisories' state, and may recur (withdrawn, restored, withdrawn again).
        sa.Index(
            "uq_webhook_deliveries_publication",
            "subscription_id",
            "repo_pk",
            "sha",
            unique=True,
            sqlite_where=sa.text(PUBLICATION_ONLY),
            postgresql_where=sa.text(PUBLICATION_ONLY),
        ),
        revision_fk("fk_webhook_deliveries_revision"),
    )

    id: int | None = Field(default=None, sa_column=sa.Column(sa.Integer, primary_key=True))
    msg_id: str = Field(sa_column=sa.Column(sa.String(64), nullable=False, unique=True))
    subscription_id: int = Field(
        sa_column=sa.Column(
            sa.Integer,
            sa.ForeignKey("subscriptions.id", name="fk_webhook_deliveries_subscription"),
            nullable=False,
            index=True,
        )
    )
    repo_pk: int = Field(sa_column=repo_fk())
    sha: str = Field(sa_column=sa.Column(sa.String(40), nullable=False))
    event: str = Field(sa_column=sa.Column(sa.String(64), nullable=False))
    body: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    state: str = Field(sa_column=sa.Column(sa.String(16), nullable=False))
    attempts: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    next_attempt_at: datetime = Field(sa_column=sa.Column(UtcDateTime, nullable=False, index=True))
    claimed_until: datetime | None = Field(
        default=None, sa_column=sa.Column(UtcDateTime, nullable=True)
    )
    created_at: datetime = Field(sa_column=sa.Column(UtcDateTime, nullable=False))
    finished_at: datetime | None = Field(
        default=None, sa_column=sa.Column(UtcDateTime, nullable=True)
    )
    last_status: int | None = Field(default=None, sa_column=sa.Column(sa.Integer, nullable=True))
    last_error: str | None = Field(default=None, sa_column=sa.Column(sa.Text, nullable=True))


class DeliveryAttemptRow(StoreModel, table=True):
    __tablename__ = "webhook_attempts"

    id: int | None = Field(default=None, sa_column=sa.Column(sa.Integer, primary_key=True))
    delivery_id: int = Field(
        sa_column=sa.Column(
            sa.Integer,
            sa.ForeignKey("webhook_deliveries.id", name="fk_webhook_attempts_delivery"),
            nullable=False,
            index=True,
        )
    )
    n: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    started_at: datetime = Field(sa_column=sa.Column(UtcDateTime, nullable=False))
    duration_ms: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    status: int | None = Field(default=None, sa_column=sa.Column(sa.Integer, nullable=True))
    error: str | None = Field(default=None, sa_column=sa.Column(sa.Text, nullable=True))
    outcome: str = Field(sa_column=sa.Column(sa.String(16), nullable=False))


class PollRequestRow(StoreModel, table=True):
    __tablename__ = "poll_requests"

    repo_id: str = Field(sa_column=sa.Column(sa.String(200), primary_key=True))
    reason: str = Field(sa_column=sa.Column(sa.String(32), nullable=False))
    requested_at: datetime = Field(sa_column=sa.Column(UtcDateTime, nullable=False))
    requests: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    claimed_until: datetime | None = Field(
        default=None, sa_column=sa.Column(UtcDateTime, nullable=True)
    )


WEBHOOK_TABLES = ("subscriptions", "webhook_deliveries", "webhook_attempts", "poll_requests")
