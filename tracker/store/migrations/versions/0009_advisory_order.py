"""Migration 0009: an index on advisories (published, id), the order the HTTP API's advisory list
pages in (`tracker.store.advisories.listing`): a page walks the index instead of sorting every
advisory.

Revision "0009" after "0008"; adds one index, nothing else changes.
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_advisories_published_id", "advisories", ["published", "id"])


def downgrade() -> None:
    op.drop_index("ix_advisories_published_id", table_name="advisories")
