"""Migration 0003: the revision diff store (diffs per revision pair, estimates per revision).

Revision "0003" after "0002"; creates exactly the tables of `tracker.store.analysis`.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "revision_diffs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("repo_id", sa.String(200), nullable=False),
        sa.Column("before_sha", sa.String(40), nullable=False),
        sa.Column("after_sha", sa.String(40), nullable=False),
        sa.Column("changes", sa.Text, nullable=False),
        sa.Column("created_at", sa.String(32), nullable=False),
        sa.UniqueConstraint("repo_id", "before_sha", "after_sha", name="uq_diff_pair"),
    )
    op.create_index("ix_revision_diffs_repo_id", "revision_diffs", ["repo_id"])
    op.create_index("ix_revision_diffs_after_sha", "revision_diffs", ["after_sha"])
    op.create_table(
        "revision_estimates",
        sa.Column("repo_id", sa.String(200), primary_key=True),
        sa.Column("sha", sa.String(40), primary_key=True),
        sa.Column("report", sa.Text, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("created_at", sa.String(32), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("revision_estimates")
    op.drop_index("ix_revision_diffs_after_sha", table_name="revision_diffs")
    op.drop_index("ix_revision_diffs_repo_id", table_name="revision_diffs")
    op.drop_table("revision_diffs")
