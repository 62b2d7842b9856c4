"""Migration 0014: a third generation domain, `poll_outcomes`, bumped (SQLite, by a trigger) when a
repo's poll outcome as the pages show it changes: ingestion_state's `state`, `last_error` or
`consecutive_failures`. A no-change poll of a healthy repo (state `ok`, no error, no failures)
changes none of them and moves no counter; a failing poll always does (its failure count grows).

The pages (`tracker.web`) show each repo's state and last error, and are kept by the HTTP API's
memo (`tracker.api.memo`) until the generation moves: without this domain a repo that started
failing would go on showing `ok`. PostgreSQL has no counter triggers (migration 0013): its
generation is the current snapshot, which any commit moves.

Revision "0014" after "0013".
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

DOMAIN = "poll_outcomes"
TRIGGER = "gen_ingestion_state_outcome"


def trigger_sql() -> str:
    """The SQLite trigger that bumps `poll_outcomes`."""
    return (
        f"CREATE TRIGGER {TRIGGER} AFTER UPDATE OF state, last_error, consecutive_failures "
        "ON ingestion_state WHEN OLD.state IS NOT NEW.state "
        "OR OLD.last_error IS NOT NEW.last_error "
        "OR OLD.consecutive_failures IS NOT NEW.consecutive_failures "
        f"BEGIN UPDATE store_generations SET n = n + 1 WHERE domain = '{DOMAIN}'; END"
    )


def upgrade() -> None:
    table = sa.table(
        "store_generations", sa.column("domain", sa.String), sa.column("n", sa.Integer)
    )
    op.bulk_insert(table, [{"domain": DOMAIN, "n": 0}])
    if op.get_bind().dialect.name == "sqlite":
        op.execute(trigger_sql())


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute(f"DROP TRIGGER IF EXISTS {TRIGGER}")
    op.execute(f"DELETE FROM store_generations WHERE domain = '{DOMAIN}'")
