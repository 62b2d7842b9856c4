"""Migration 0017 (team29): `subscriptions.team`, the watchlist team a subscription is filtered
to (issue 29, "webhook subscriptions filtered to affects this team"): it receives only the
advisories that affect that team (`tracker.teams.audience`). NULL: no team filter; existing
subscriptions receive what they received before.

Revision "0017_team29" after "0016_web27". A plain ADD COLUMN of a nullable column.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017_team29"
down_revision = "0016_web27"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("subscriptions", sa.Column("team", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("subscriptions") as batch:
        batch.drop_column("team")
