"""Migration 0012: the store's generation counters, `store_generations` (one row per domain, `n`
counts the commits that changed it), kept by triggers so no writer can forget them:

- `advisories`: any write to advisories, advisory_versions, advisory_counters, advisory_revisions,
  suppressed_changes;
- `revisions`: any write to repos, revisions, tree_entries, trees, blobs, revision_files,
  revision_diffs, revision_estimates, revision_preflight, and to ingestion_state only when a row
  comes or goes or its `cursor_sha` (what `HEAD` and the ref name resolve to) changes.

A no-change poll (ingestion_state's poll counters, the schedule, the workers, the rate budget,
events, webhook tables) moves neither, so the HTTP API's kept answers (`tracker.api.memo`)
survive it. The counter is updated in the writer's own transaction: a reader sees the new value
exactly when it can see the rows. SQLite: row triggers; PostgreSQL: statement triggers (one bump
per statement) through one plpgsql function, and a row trigger on ingestion_state's cursor.

A later migration that recreates one of these tables (SQLite batch mode) must create its
triggers again (`triggers_sql`).

Revision "0012" after "0011".
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

DOMAINS: dict[str, tuple[str, ...]] = {
    "advisories": (
        "advisories",
        "advisory_versions",
        "advisory_counters",
        "advisory_revisions",
        "suppressed_changes",
    ),
    "revisions": (
        "repos",
        "revisions",
        "tree_entries",
        "trees",
        "blobs",
        "revision_files",
        "revision_diffs",
        "revision_estimates",
        "revision_preflight",
    ),
}
OPS = ("INSERT", "UPDATE", "DELETE")


def _bump(domain: str) -> str:
    return f"UPDATE store_generations SET n = n + 1 WHERE domain = '{domain}'"


def triggers_sql(pg: bool) -> list[str]:
    """The statements that create every trigger (and, on PostgreSQL, their function)."""
    out: list[str] = []
    if pg:
        out.append(
            "CREATE OR REPLACE FUNCTION tracker_bump_generation() RETURNS trigger "
            "LANGUAGE plpgsql AS $$ BEGIN UPDATE store_generations SET n = n + 1 "
            "WHERE domain = TG_ARGV[0]; RETURN NULL; END $$"
        )
    for domain, tables in DOMAINS.items():
        for table in tables:
            for op_ in OPS:
                name = f"gen_{table}_{op_.lower()}"
                if pg:
                    out.append(
                        f"CREATE TRIGGER {name} AFTER {op_} ON {table} FOR EACH STATEMENT "
                        f"EXECUTE PROCEDURE tracker_bump_generation('{domain}')"
                    )
                else:
                    out.append(
                        f"CREATE TRIGGER {name} AFTER {op_} ON {table} BEGIN {_bump(domain)}; END"
                    )
    for op_ in ("INSERT", "DELETE"):
        name = f"gen_ingestion_state_{op_.lower()}"
        if pg:
            out.append(
                f"CREATE TRIGGER {name} AFTER {op_} ON ingestion_state FOR EACH STATEMENT "
                "EXECUTE PROCEDURE tracker_bump_generation('revisions')"
            )
        else:
            out.append(
                f"CREATE TRIGGER {name} AFTER {op_} ON ingestion_state "
                f"BEGIN {_bump('revisions')}; END"
            )
    if pg:
        out.append(
            "CREATE TRIGGER gen_ingestion_state_cursor AFTER UPDATE ON ingestion_state "
            "FOR EACH ROW WHEN (OLD.cursor_sha IS DISTINCT FROM NEW.cursor_sha) "
            "EXECUTE PROCEDURE tracker_bump_generation('revisions')"
        )
    else:
        out.append(
            "CREATE TRIGGER gen_ingestion_state_cursor AFTER UPDATE OF cursor_sha ON "
            "ingestion_state WHEN OLD.cursor_sha IS NOT NEW.cursor_sha "
            f"BEGIN {_bump('revisions')}; END"
        )
    return out


def _trigger_names() -> list[tuple[str, str]]:
    names = [
        (f"gen_{table}_{op_.lower()}", table)
        for tables in DOMAINS.values()
        for table in tables
        for op_ in OPS
    ]
    names += [
        ("gen_ingestion_state_insert", "ingestion_state"),
        ("gen_ingestion_state_delete", "ingestion_state"),
        ("gen_ingestion_state_cursor", "ingestion_state"),
    ]
    return names


def upgrade() -> None:
    pg = op.get_bind().dialect.name == "postgresql"
    table = op.create_table(
        "store_generations",
        sa.Column("domain", sa.String(32), primary_key=True),
        sa.Column("n", sa.BigInteger, nullable=False, server_default="0"),
    )
    op.bulk_insert(table, [{"domain": d, "n": 0} for d in DOMAINS])
    for statement in triggers_sql(pg):
        op.execute(statement)


def downgrade() -> None:
    pg = op.get_bind().dialect.name == "postgresql"
    for name, table in _trigger_names():
        op.execute(f"DROP TRIGGER IF EXISTS {name}" + (f" ON {table}" if pg else ""))
    if pg:
        op.execute("DROP FUNCTION IF EXISTS tracker_bump_generation()")
    op.drop_table("store_generations")
