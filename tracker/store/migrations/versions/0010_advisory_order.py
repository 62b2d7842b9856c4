"""Migration 0010: an index on advisories (published, id), the order the HTTP API's advisory list
pages in (`tracker.store.advisories.listing`): a page walks the index instead of sorting every
advisory.

Revision "0010" after "0009"; adds one index, nothing else changes.
"""

from __future__ import annotations

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_advisories_published_id", "advisories", ["published", "id"])


def downgrade() -> None:
    op.drop_index("ix_advisories_published_id", table_name="advisories")
