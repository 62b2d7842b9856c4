"""Migration 0016 (web27): `subscriptions.events`, the event types a subscription receives
(a JSON list of `revision.advisories`, `advisory.withdrawn`, `advisory.reopened`,
`advisory.restored`; NULL or empty: all of them), as GitHub's and Stripe's webhooks filter by
event type. Existing subscriptions receive every type, as before.

Revision "0016_web27" after "0015". A plain ADD COLUMN of a nullable column (no batch copy).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016_web27"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("subscriptions", sa.Column("events", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("subscriptions") as batch:
        batch.drop_column("events")
