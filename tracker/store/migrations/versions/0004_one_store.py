"""Migration 0004: one store. Aware UTC timestamps everywhere; advisory and analysis rows belong to repos and revisions.

Revision "0004" after "0003". What it does to a database of the previous release, keeping every row:
- snapshot tables: on PostgreSQL the naive UTC timestamps become `timestamp with time zone`
  (SQLite already stores UTC text in the form the new type reads); an index on `revisions.sha`.
- advisory tables (`advisories`, `advisory_versions`, `advisory_revisions`, `suppressed_changes`)
  and analysis tables (`revision_diffs`, `revision_estimates`) are rebuilt: `repo_id` text becomes
  `repo_pk` (foreign key to `repos`), every commit they name becomes a foreign key to its
  revision `(repo_pk, sha)`, RFC 3339 text times become UTC timestamps, and a diff's missing
  `before` is NULL instead of "". `advisory_counters` is unchanged.
Rows naming a repo or revision the store does not hold cannot satisfy the new foreign keys: the
migration then stops before changing anything, naming them. A revision with two stored diffs
(never written by the previous release, which diffs a revision against its fixed predecessor)
keeps the newest. The tables' definitions below are frozen here on purpose (the models may move on).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

SNAPSHOT_TIMES = {
    "ingestion_state": ("last_poll_at", "last_success_at"),
    "revisions": ("ingested_at", "analysed_at"),
    "events": ("at",),
}
# Rebuilt tables, children before parents; old indexes that are not constraints.
REBUILT = (
    "advisory_versions",
    "advisories",
    "advisory_revisions",
    "suppressed_changes",
    "revision_diffs",
    "revision_estimates",
)
OLD_INDEXES = {
    "advisories": ("ix_advisories_repo_id", "ix_advisories_modified"),
    "advisory_versions": ("ix_advisory_versions_sha",),
    "suppressed_changes": ("ix_suppressed_changes_repo_id",),
    "revision_diffs": ("ix_revision_diffs_repo_id", "ix_revision_diffs_after_sha"),
}
NEW_INDEXES = {
    "advisories": (("ix_advisories_modified", ["modified"]),),
    "advisory_versions": (("ix_advisory_versions_sha", ["sha"]),),
    "suppressed_changes": (("ix_suppressed_changes_repo_pk", ["repo_pk"]),),
}
ASIDE = "_0003"
SERIAL = ("suppressed_changes", "revision_diffs")  # integer ids from a sequence on PostgreSQL

# Rows whose commit must be a stored revision: (table, repo column, sha column, extra condition).
_REVISION_REFS = (
    ("advisories", "introduced", ""),
    ("advisory_revisions", "sha", ""),
    ("suppressed_changes", "sha", ""),
    ("revision_diffs", "after_sha", ""),
    ("revision_diffs", "before_sha", "x.before_sha <> ''"),
    ("revision_estimates", "sha", ""),
)


def _time(pg: bool) -> sa.DateTime:
    return sa.DateTime(timezone=True) if pg else sa.DateTime()


def _revision_fk(name: str, sha: str = "sha") -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["repo_pk", sha], ["revisions.repo_pk", "revisions.sha"], name=name
    )


def _repo_pk(**kw: object) -> sa.Column[int]:
    return sa.Column("repo_pk", sa.Integer, sa.ForeignKey("repos.id"), nullable=False, **kw)  # type: ignore[arg-type]


def _check_references(bind: sa.Connection) -> None:
    """Refuse (before any change) rows that name a repo or revision the store does not hold."""
    problems: list[str] = []
    for table, sha, extra in _REVISION_REFS:
        where = f"AND {extra}" if extra else ""
        q = sa.text(
            f"SELECT x.repo_id, x.{sha} FROM {table} x WHERE NOT EXISTS (SELECT 1 FROM revisions v "
            f"JOIN repos r ON r.id = v.repo_pk WHERE r.repo_id = x.repo_id AND v.sha = x.{sha}) "
            f"{where}"
        )
        rows = bind.execute(q).all()
        if rows:
            first = ", ".join(f"{r}@{s}" for r, s in rows[:3])
            problems.append(f"{len(rows)} {table}.{sha} not in the store (e.g. {first})")
    q = sa.text(
        "SELECT a.repo_id, v.sha FROM advisory_versions v JOIN advisories a ON a.id = v.advisory_id "
        "WHERE NOT EXISTS (SELECT 1 FROM revisions w JOIN repos r ON r.id = w.repo_pk "
        "WHERE r.repo_id = a.repo_id AND w.sha = v.sha)"
    )
    rows = bind.execute(q).all()
    if rows:
        first = ", ".join(f"{r}@{s}" for r, s in rows[:3])
        problems.append(f"{len(rows)} advisory_versions.sha not in the store (e.g. {first})")
    if problems:
        raise RuntimeError(
            "migration 0004 needs every advisory and analysis row to name a stored revision: "
            + "; ".join(problems)
        )


def _set_aside(bind: sa.Connection, pg: bool) -> None:
    """Rename the old tables to `<name>_0003`, out of the way of the new ones' names."""
    for table in REBUILT:
        for index in OLD_INDEXES.get(table, ()):
            op.drop_index(index, table_name=table)
        op.rename_table(table, table + ASIDE)
        if not pg:
            continue
        indexes = bind.execute(
            sa.text(
                "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() "
                "AND tablename = :t"
            ),
            {"t": table + ASIDE},
        ).scalars()
        for index in list(indexes):
            op.execute(f'ALTER INDEX "{index}" RENAME TO "{index[:57]}{ASIDE}"')
        if table in SERIAL:
            seq = bind.execute(
                sa.text("SELECT pg_get_serial_sequence(:t, 'id')"), {"t": table + ASIDE}
            ).scalar_one()
            op.execute(f"ALTER SEQUENCE {seq} RENAME TO {table}{ASIDE}_id_seq")


def _create(pg: bool) -> None:
    t = _time(pg)
    op.create_table(
        "advisories",
        sa.Column("id", sa.String(64), primary_key=True),
        _repo_pk(),
        sa.Column("package_name", sa.Text, nullable=False),
        sa.Column("introduced", sa.String(40), nullable=False),
        sa.Column("grp", sa.String(32), nullable=False),
        sa.Column("severity", sa.String(16), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("published", t, nullable=False),
        sa.Column("modified", t, nullable=False),
        sa.Column("record", sa.Text, nullable=False),
        sa.Column("pending", sa.Text, nullable=False),
        sa.UniqueConstraint("repo_pk", "introduced", "grp", name="uq_advisories_change"),
        _revision_fk("fk_advisories_introduced", "introduced"),
    )
    op.create_table(
        "advisory_versions",
        sa.Column(
            "advisory_id",
            sa.String(64),
            sa.ForeignKey("advisories.id", name="fk_advisory_versions_advisory"),
            primary_key=True,
        ),
        sa.Column("sha", sa.String(40), primary_key=True),
        _repo_pk(),
        sa.Column("pos", sa.Integer, nullable=False),
        _revision_fk("fk_advisory_versions_revision"),
    )
    op.create_table(
        "advisory_revisions",
        _repo_pk(primary_key=True, autoincrement=False),
        sa.Column("sha", sa.String(40), primary_key=True),
        sa.Column("published_at", t, nullable=False),
        _revision_fk("fk_advisory_revisions_revision"),
    )
    op.create_table(
        "suppressed_changes",
        sa.Column("id", sa.Integer, primary_key=True),
        _repo_pk(),
        sa.Column("sha", sa.String(40), nullable=False),
        sa.Column("grp", sa.String(32), nullable=False),
        sa.Column("severity", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("change", sa.Text, nullable=False),
        sa.Column("recorded_at", t, nullable=False),
        _revision_fk("fk_suppressed_changes_revision"),
    )
    op.create_table(
        "revision_diffs",
        sa.Column("id", sa.Integer, primary_key=True),
        _repo_pk(),
        sa.Column("before_sha", sa.String(40)),
        sa.Column("after_sha", sa.String(40), nullable=False),
        sa.Column("changes", sa.Text, nullable=False),
        sa.Column("created_at", t, nullable=False),
        sa.UniqueConstraint("repo_pk", "after_sha", name="uq_revision_diffs_after"),
        _revision_fk("fk_revision_diffs_after", "after_sha"),
        _revision_fk("fk_revision_diffs_before", "before_sha"),
    )
    op.create_table(
        "revision_estimates",
        _repo_pk(primary_key=True, autoincrement=False),
        sa.Column("sha", sa.String(40), primary_key=True),
        sa.Column("report", sa.Text),
        sa.Column("error", sa.Text),
        sa.Column("created_at", t, nullable=False),
        _revision_fk("fk_revision_estimates_revision"),
    )
    for table, indexes in NEW_INDEXES.items():
        for name, cols in indexes:
            op.create_index(name, table, cols)


def _ts(column: str, pg: bool) -> str:
    """SQL turning an old RFC 3339 text column into the new timestamp column's stored form."""
    if pg:
        return f"CAST({column} AS timestamptz)"
    # SQLAlchemy's SQLite DATETIME text, in UTC (SQLite's date functions read `Z` and offsets).
    return f"strftime('%Y-%m-%d %H:%M:%S', {column}) || '.000000'"


def _copy(pg: bool) -> None:
    """Fill the new tables from the set-aside ones, in SQL (no row passes through Python)."""
    a = "advisories" + ASIDE
    op.execute(
        "INSERT INTO advisories (id, repo_pk, package_name, introduced, grp, severity, state, "
        "published, modified, record, pending) "
        f"SELECT x.id, r.id, x.package_name, x.introduced, x.grp, x.severity, x.state, "
        f"{_ts('x.published', pg)}, {_ts('x.modified', pg)}, x.record, x.pending "
        f"FROM {a} x JOIN repos r ON r.repo_id = x.repo_id"
    )
    op.execute(
        "INSERT INTO advisory_versions (advisory_id, sha, repo_pk, pos) "
        f"SELECT x.advisory_id, x.sha, r.id, x.pos FROM advisory_versions{ASIDE} x "
        f"JOIN {a} y ON y.id = x.advisory_id JOIN repos r ON r.repo_id = y.repo_id"
    )
    op.execute(
        "INSERT INTO advisory_revisions (repo_pk, sha, published_at) "
        f"SELECT r.id, x.sha, {_ts('x.published_at', pg)} FROM advisory_revisions{ASIDE} x "
        "JOIN repos r ON r.repo_id = x.repo_id"
    )
    op.execute(
        "INSERT INTO suppressed_changes (id, repo_pk, sha, grp, severity, reason, change, "
        "recorded_at) "
        f"SELECT x.id, r.id, x.sha, x.grp, x.severity, x.reason, x.change, "
        f"{_ts('x.recorded_at', pg)} FROM suppressed_changes{ASIDE} x "
        "JOIN repos r ON r.repo_id = x.repo_id"
    )
    d = "revision_diffs" + ASIDE
    op.execute(
        "INSERT INTO revision_diffs (id, repo_pk, before_sha, after_sha, changes, created_at) "
        f"SELECT x.id, r.id, NULLIF(x.before_sha, ''), x.after_sha, x.changes, "
        f"{_ts('x.created_at', pg)} FROM {d} x JOIN repos r ON r.repo_id = x.repo_id "
        f"WHERE x.id = (SELECT max(y.id) FROM {d} y WHERE y.repo_id = x.repo_id "
        "AND y.after_sha = x.after_sha)"
    )
    op.execute(
        "INSERT INTO revision_estimates (repo_pk, sha, report, error, created_at) "
        f"SELECT r.id, x.sha, x.report, x.error, {_ts('x.created_at', pg)} "
        f"FROM revision_estimates{ASIDE} x JOIN repos r ON r.repo_id = x.repo_id"
    )
    if pg:
        for table in SERIAL:
            op.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                f"coalesce(max(id), 0) + 1, false) FROM {table}"
            )


def upgrade() -> None:
    bind = op.get_bind()
    pg = bind.dialect.name == "postgresql"
    _check_references(bind)
    if pg:
        for table, columns in SNAPSHOT_TIMES.items():
            for column in columns:
                op.execute(
                    f"ALTER TABLE {table} ALTER COLUMN {column} TYPE timestamptz "
                    f"USING {column} AT TIME ZONE 'UTC'"
                )
    op.create_index("ix_revisions_sha", "revisions", ["sha"])
    _set_aside(bind, pg)
    _create(pg)
    _copy(pg)
    for table in REBUILT:
        op.drop_table(table + ASIDE)


def downgrade() -> None:
    raise RuntimeError(
        "migration 0004 is not reversible in place: restore the backup taken before upgrading"
    )
