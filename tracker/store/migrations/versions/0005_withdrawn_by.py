"""Migration 0005: `advisories.withdrawn_by`, what withdrew a withdrawn advisory (structured).

Revision "0005" after "0004". Restoring an advisory withdrawn by a history rewrite (when a push brings
its introducing commit back) used to depend on its human-readable `withdrawn_reason` starting with
"introducing commit "; it now reads this column (`tracker.shared.domain.WithdrawnBy`). Existing rows:
every withdrawn advisory whose stored reason is the rewrite one gets `rewrite` (the only way the
previous release withdrew anything); the rest stay NULL (not withdrawn, or withdrawn for a reason
this release does not know: never restored automatically).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

# The previous release's reason, as stored: records are compact JSON with sorted keys.
_REWRITE_REASON = '%"withdrawn_reason":"introducing commit %'


def upgrade() -> None:
    with op.batch_alter_table("advisories") as batch:
        batch.add_column(sa.Column("withdrawn_by", sa.String(16), nullable=True))
    op.execute(
        sa.text(
            "UPDATE advisories SET withdrawn_by = 'rewrite' "
            "WHERE state = 'withdrawn' AND record LIKE :reason"
        ).bindparams(reason=_REWRITE_REASON)
    )


def downgrade() -> None:
    with op.batch_alter_table("advisories") as batch:
        batch.drop_column("withdrawn_by")
