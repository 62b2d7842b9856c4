"""Migration 0002: advisory tables (records, versions index, id counters, revision markers, suppressions).

Revision "0002" after "0001"; creates exactly the tables of `tracker.store.advisories`.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "advisories",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("repo_id", sa.String(200), nullable=False),
        sa.Column("package_name", sa.Text, nullable=False),
        sa.Column("introduced", sa.String(40), nullable=False),
        sa.Column("grp", sa.String(32), nullable=False),
        sa.Column("severity", sa.String(16), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("published", sa.String(32), nullable=False),
        sa.Column("modified", sa.String(32), nullable=False),
        sa.Column("record", sa.Text, nullable=False),
        sa.Column("pending", sa.Text, nullable=False),
        sa.UniqueConstraint("repo_id", "introduced", "grp", name="uq_advisories_change"),
    )
    op.create_index("ix_advisories_repo_id", "advisories", ["repo_id"])
    op.create_index("ix_advisories_modified", "advisories", ["modified"])
    op.create_table(
        "advisory_versions",
        sa.Column("advisory_id", sa.String(64), sa.ForeignKey("advisories.id"), primary_key=True),
        sa.Column("sha", sa.String(40), primary_key=True),
        sa.Column("pos", sa.Integer, nullable=False),
    )
    op.create_index("ix_advisory_versions_sha", "advisory_versions", ["sha"])
    op.create_table(
        "advisory_counters",
        sa.Column("prefix", sa.String(16), primary_key=True),
        sa.Column("year", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("next_n", sa.Integer, nullable=False),
    )
    op.create_table(
        "advisory_revisions",
        sa.Column("repo_id", sa.String(200), primary_key=True),
        sa.Column("sha", sa.String(40), primary_key=True),
        sa.Column("published_at", sa.String(32), nullable=False),
    )
    op.create_table(
        "suppressed_changes",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("repo_id", sa.String(200), nullable=False),
        sa.Column("sha", sa.String(40), nullable=False),
        sa.Column("grp", sa.String(32), nullable=False),
        sa.Column("severity", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("change", sa.Text, nullable=False),
        sa.Column("recorded_at", sa.String(32), nullable=False),
    )
    op.create_index("ix_suppressed_changes_repo_id", "suppressed_changes", ["repo_id"])


def downgrade() -> None:
    op.drop_index("ix_suppressed_changes_repo_id", "suppressed_changes")
    op.drop_table("suppressed_changes")
    op.drop_table("advisory_revisions")
    op.drop_table("advisory_counters")
    op.drop_index("ix_advisory_versions_sha", "advisory_versions")
    op.drop_table("advisory_versions")
    op.drop_index("ix_advisories_modified", "advisories")
    op.drop_index("ix_advisories_repo_id", "advisories")
    op.drop_table("advisories")
