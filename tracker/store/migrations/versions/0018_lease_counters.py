"""Migration 0018 (ops26b): `lease_counters`, lease churn since the store was made: one row per
kind (`taken_over`: a worker claimed a repo whose holder's lease had run out; `lost`: a worker
finished a poll and found its lease taken), counted by the claim and finish transactions and
shown on /metrics as `tracker_lease_churn_total{kind}` (the `TrackerLeaseChurn` alert).

Revision "0018_lease_counters" after "0017_team29". A new, empty table.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018_lease_counters"
down_revision = "0017_team29"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lease_counters",
        sa.Column("name", sa.String(32), primary_key=True),
        sa.Column("value", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("lease_counters")
