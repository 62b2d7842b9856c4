"""Migration 0011: `revisions.could_not_analyse`, a revision whose analysis overran its budget.

Revision "0011" after "0010". The column holds the overrun as JSON (`kind`: time, memory or died;
`reason`; the `limits` it ran under; `at`), NULL for every other revision (`tracker.store.values.
AnalysisOverrun`). Existing rows stay NULL.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("revisions") as batch:
        batch.add_column(sa.Column("could_not_analyse", sa.JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("revisions") as batch:
        batch.drop_column("could_not_analyse")
