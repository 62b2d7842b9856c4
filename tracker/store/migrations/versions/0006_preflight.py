"""Migration 0006: `revision_preflight`, the preflight answers of each revision (issue 15).

Revision "0006" after "0005"; creates exactly the table of `tracker.store.preflight` (one row per
analysed revision: the preflight JSON, or the reason there is none). Existing revisions get no
row: they were analysed before preflight existed, and the first revision analysed after the
upgrade is compared with nothing (no `preflight.*` change from a missing answer).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pg = op.get_bind().dialect.name == "postgresql"
    op.create_table(
        "revision_preflight",
        sa.Column(
            "repo_pk",
            sa.Integer,
            sa.ForeignKey("repos.id"),
            primary_key=True,
            autoincrement=False,
        ),
        sa.Column("sha", sa.String(40), primary_key=True),
        sa.Column("report", sa.Text, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        # UtcDateTime's storage, frozen here (see 0004): aware on PostgreSQL, UTC text on SQLite
        sa.Column("created_at", sa.DateTime(timezone=pg), nullable=False),
        sa.ForeignKeyConstraint(
            ["repo_pk", "sha"],
            ["revisions.repo_pk", "revisions.sha"],
            name="fk_revision_preflight_revision",
        ),
    )


def downgrade() -> None:
    op.drop_table("revision_preflight")
