"""Migration 0015: `advisories.content_modified`, when what a reader of the advisory sees (its
state, severity, summary or details) last changed, the time a feed entry's `updated` shows.

The record's `modified` moves on every commit that grows an open advisory's `versions` list
(OSV's rule: the record changed); a feed that dated its entries so resurfaced every open advisory
of a repo on each unrelated commit. Existing rows take their `modified` (the best the store
knows), and an index serves the feeds' newest-first order.

Revision "0015" after "0014". A plain ADD COLUMN (no batch copy), so SQLite keeps the
generation triggers of migration 0012.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pg = op.get_bind().dialect.name == "postgresql"
    kind = sa.DateTime(timezone=True) if pg else sa.DateTime()  # as 0004's times
    op.add_column("advisories", sa.Column("content_modified", kind, nullable=True))
    op.execute("UPDATE advisories SET content_modified = modified")
    op.create_index("ix_advisories_content_modified", "advisories", ["content_modified"])


def downgrade() -> None:
    op.drop_index("ix_advisories_content_modified", table_name="advisories")
    with op.batch_alter_table("advisories") as batch:
        batch.drop_column("content_modified")
