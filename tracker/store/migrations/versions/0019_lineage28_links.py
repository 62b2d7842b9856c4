"""Migration 0019 (lineage28): `lineage_links`, each watched derivative's base models (from its
card's `base_model` and its GGUF files' `general.base_model.*`) and how far tracker compared the
derivative with each base (`tracker.store.lineage`).

Revision "0019_lineage28" after "0018_lease_counters". A new table only.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019_lineage28"
down_revision = "0018_lease_counters"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pg = op.get_bind().dialect.name == "postgresql"
    op.create_table(
        "lineage_links",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("repo_pk", sa.Integer(), sa.ForeignKey("repos.id"), nullable=False),
        sa.Column("base_id", sa.String(200), nullable=False),
        sa.Column("relation", sa.String(32), nullable=True),
        sa.Column("via", sa.String(16), nullable=False),
        sa.Column("read_at", sa.String(40), nullable=False),
        sa.Column("base_sha", sa.String(40), nullable=True),
        sa.Column("base_values", sa.Text(), nullable=True),
        sa.Column("base_error", sa.Text(), nullable=True),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True) if pg else sa.DateTime(), nullable=False
        ),
        sa.UniqueConstraint("repo_pk", "base_id", name="uq_lineage_links_base"),
    )
    op.create_index("ix_lineage_links_repo_pk", "lineage_links", ["repo_pk"])
    op.create_index("ix_lineage_links_base_id", "lineage_links", ["base_id"])


def downgrade() -> None:
    op.drop_index("ix_lineage_links_base_id", table_name="lineage_links")
    op.drop_index("ix_lineage_links_repo_pk", table_name="lineage_links")
    op.drop_table("lineage_links")
