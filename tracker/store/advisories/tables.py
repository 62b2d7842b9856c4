"""Tables of the advisory store: records, versions lists, id counters, per-revision markers, suppressions.

Migration 0004 creates exactly these (0002 made their first form; 0005 adds `withdrawn_by`; 0010
the (published, id) index the API's advisory list pages in; 0015 `content_modified`, when what a
reader sees last changed: not moved by a versions list growing). Every row that belongs to a
repo carries its `repo_pk` (foreign key to `repos`), and every row that names one of its commits
references that revision by `(repo_pk, sha)`, so an advisory can only exist for a stored
revision. Times are `UtcDateTime` (see `tracker.store.base`); `published`/`modified` have the
whole-second precision of the records' RFC 3339 strings. A record's `versions` list lives in
`advisory_versions` rows (ordered by `pos`) and its `modified` in the column; both are spliced
into the stored JSON on read.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field

from tracker.store.base import StoreModel, UtcDateTime
from tracker.store.tables import repo_fk, revision_fk


class AdvisoryRow(StoreModel, table=True):
    __tablename__ = "advisories"
    __table_args__ = (
        sa.UniqueConstraint("repo_pk", "introduced", "grp", name="uq_advisories_change"),
        revision_fk("fk_advisories_introduced", "introduced"),
        sa.Index("ix_advisories_published_id", "published", "id"),  # 0010: the API's list order
    )

    id: str = Field(sa_column=sa.Column(sa.String(64), primary_key=True))
    repo_pk: int = Field(sa_column=repo_fk())
    package_name: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    introduced: str = Field(sa_column=sa.Column(sa.String(40), nullable=False))
    grp: str = Field(sa_column=sa.Column(sa.String(32), nullable=False))
    severity: str = Field(sa_column=sa.Column(sa.String(16), nullable=False))
    state: str = Field(sa_column=sa.Column(sa.String(16), nullable=False))
    withdrawn_by: str | None = Field(
        default=None, sa_column=sa.Column(sa.String(16), nullable=True)
    )
    published: datetime = Field(sa_column=sa.Column(UtcDateTime, nullable=False))
    modified: datetime = Field(sa_column=sa.Column(UtcDateTime, nullable=False, index=True))
    record: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    pending: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    content_modified: datetime | None = Field(  # 0015: when state, severity or text last moved
        default=None, sa_column=sa.Column(UtcDateTime, nullable=True, index=True)
    )


class AdvisoryVersionRow(StoreModel, table=True):
    __tablename__ = "advisory_versions"
    __table_args__ = (revision_fk("fk_advisory_versions_revision"),)

    advisory_id: str = Field(
        sa_column=sa.Column(
            sa.String(64),
            sa.ForeignKey("advisories.id", name="fk_advisory_versions_advisory"),
            primary_key=True,
        )
    )
    sha: str = Field(sa_column=sa.Column(sa.String(40), primary_key=True, index=True))
    repo_pk: int = Field(sa_column=repo_fk())
    pos: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))


class AdvisoryCounterRow(StoreModel, table=True):
    __tablename__ = "advisory_counters"

    prefix: str = Field(sa_column=sa.Column(sa.String(16), primary_key=True))
    year: int = Field(sa_column=sa.Column(sa.Integer, primary_key=True, autoincrement=False))
    next_n: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))


class AdvisoryRevisionRow(StoreModel, table=True):
    __tablename__ = "advisory_revisions"
    __table_args__ = (revision_fk("fk_advisory_revisions_revision"),)

    repo_pk: int = Field(
        sa_column=sa.Column(
            sa.Integer, sa.ForeignKey("repos.id"), primary_key=True, autoincrement=False
        )
    )
    sha: str = Field(sa_column=sa.Column(sa.String(40), primary_key=True))
    published_at: datetime = Field(sa_column=sa.Column(UtcDateTime, nullable=False))


class SuppressedChangeRow(StoreModel, table=True):
    __tablename__ = "suppressed_changes"
    __table_args__ = (revision_fk("fk_suppressed_changes_revision"),)

    id: int | None = Field(default=None, sa_column=sa.Column(sa.Integer, primary_key=True))
    repo_pk: int = Field(sa_column=repo_fk(index=True))
    sha: str = Field(sa_column=sa.Column(sa.String(40), nullable=False))
    grp: str = Field(sa_column=sa.Column(sa.String(32), nullable=False))
    severity: str = Field(sa_column=sa.Column(sa.String(16), nullable=False))
    reason: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    change: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    recorded_at: datetime = Field(sa_column=sa.Column(UtcDateTime, nullable=False))


ADVISORY_TABLES = (
    "advisories",
    "advisory_versions",
    "advisory_counters",
    "advisory_revisions",
    "suppressed_changes",
)
