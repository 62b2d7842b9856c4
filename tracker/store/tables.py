"""Tables of the snapshot store; rows never leave `tracker.store` (it returns domain values).

Layout (migrations 0001 and 0004 create exactly these; a test compares the schema with them):
- `repos`: one row per watched repo (source kind, url, ref).
- `ingestion_state`: per repo cursor, last poll/success, consecutive failures, last error, state.
- `revisions`: one row per ingested commit (parents JSON, ISO date with its own offset, seq,
  previous sha, ingested/analysed timestamps, rewritten_away flag; rows are never deleted). Rows
  of other tables that belong to a revision reference it by `(repo_pk, sha)`.
- `tree_entries` + `trees`: trees stored compactly. Each distinct entry (path, blob id, size, LFS oid,
  security) of a repo is stored once; a tree is the JSON list of its entry ids, deduplicated by a
  hash of that list. A 163-shard repo where one small file changes adds one entry row and one
  ~1 KB list, not 163 rows.
- `blobs`: content-addressed bytes (sha256 → bytes): identical content is stored once.
- `revision_files`: per revision and tracked path, the file's blob, the safetensors header (stored
  as canonical JSON in `blobs`) or why it could not be read.
- `events`: force-pushes, deleted refs, gone/gated repos, with time and details.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field

from tracker.store.base import StoreModel, UtcDateTime


def repo_fk(*, index: bool = False) -> sa.Column[int]:
    """A `repo_pk` column: the repo a row belongs to (rows of other stores use it)."""
    return sa.Column(sa.Integer, sa.ForeignKey("repos.id"), nullable=False, index=index)


def revision_fk(name: str, sha: str = "sha") -> sa.ForeignKeyConstraint:
    """`(repo_pk, <sha>)` of a row references a stored revision of the same repo."""
    return sa.ForeignKeyConstraint(
        ["repo_pk", sha], ["revisions.repo_pk", "revisions.sha"], name=name
    )


class RepoRow(StoreModel, table=True):
    __tablename__ = "repos"

    id: int | None = Field(default=None, primary_key=True)
    repo_id: str = Field(sa_column=sa.Column(sa.String(200), nullable=False, unique=True))
    source_kind: str = Field(sa_column=sa.Column(sa.String(16), nullable=False))
    url: str | None = Field(default=None, sa_column=sa.Column(sa.Text, nullable=True))
    ref: str = Field(sa_column=sa.Column(sa.String(255), nullable=False))


class IngestionStateRow(StoreModel, table=True):
    __tablename__ = "ingestion_state"

    repo_pk: int = Field(
        sa_column=sa.Column(
            sa.Integer, sa.ForeignKey("repos.id", ondelete="CASCADE"), primary_key=True
        )
    )
    cursor_sha: str | None = Field(default=None, sa_column=sa.Column(sa.String(40)))
    last_poll_at: datetime | None = Field(default=None, sa_column=sa.Column(UtcDateTime))
    last_success_at: datetime | None = Field(default=None, sa_column=sa.Column(UtcDateTime))
    consecutive_failures: int = Field(
        default=0, sa_column=sa.Column(sa.Integer, nullable=False, server_default="0")
    )
    last_error: str | None = Field(default=None, sa_column=sa.Column(sa.Text))
    state: str = Field(
        default="new", sa_column=sa.Column(sa.String(16), nullable=False, server_default="new")
    )
    # Operations counters (migration 0009; `tracker.store.ops` reads them for /metrics): every
    # poll recorded, those that did not end OK, and the ingest seconds of each as a histogram
    # (sum, and counts per upper bound: JSON {"0.1": n, ...}, cumulative as Prometheus has them).
    polls: int = Field(
        default=0, sa_column=sa.Column(sa.Integer, nullable=False, server_default="0")
    )
    poll_failures: int = Field(
        default=0, sa_column=sa.Column(sa.Integer, nullable=False, server_default="0")
    )
    ingest_seconds_sum: float = Field(
        default=0.0, sa_column=sa.Column(sa.Float, nullable=False, server_default="0")
    )
    ingest_seconds_buckets: str = Field(
        default="{}", sa_column=sa.Column(sa.Text, nullable=False, server_default="{}")
    )


class RevisionRow(StoreModel, table=True):
    __tablename__ = "revisions"
    __table_args__ = (
        sa.UniqueConstraint("repo_pk", "sha", name="uq_revisions_repo_sha"),
        sa.UniqueConstraint("repo_pk", "seq", name="uq_revisions_repo_seq"),
    )

    id: int | None = Field(default=None, primary_key=True)
    repo_pk: int = Field(
        sa_column=sa.Column(
            sa.Integer, sa.ForeignKey("repos.id", ondelete="CASCADE"), nullable=False, index=True
        )
    )
    sha: str = Field(sa_column=sa.Column(sa.String(40), nullable=False, index=True))
    parents: list[str] = Field(sa_column=sa.Column(sa.JSON, nullable=False))
    date: str = Field(sa_column=sa.Column(sa.String(40), nullable=False))
    title: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    message: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    authors: list[str] = Field(sa_column=sa.Column(sa.JSON, nullable=False))
    seq: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    previous_sha: str | None = Field(default=None, sa_column=sa.Column(sa.String(40)))
    tree_hash: str = Field(
        sa_column=sa.Column(sa.String(64), sa.ForeignKey("trees.tree_hash"), nullable=False)
    )
    ingested_at: datetime = Field(sa_column=sa.Column(UtcDateTime, nullable=False))
    analysed_at: datetime | None = Field(default=None, sa_column=sa.Column(UtcDateTime))
    could_not_analyse: dict[str, Any] | None = Field(
        default=None, sa_column=sa.Column(sa.JSON(none_as_null=True), nullable=True)
    )
    rewritten_away: bool = Field(
        default=False,
        sa_column=sa.Column(sa.Boolean, nullable=False, server_default=sa.false()),
    )


class TreeEntryRow(StoreModel, table=True):
    __tablename__ = "tree_entries"
    __table_args__ = (sa.UniqueConstraint("repo_pk", "entry_key", name="uq_tree_entries_key"),)

    id: int | None = Field(default=None, primary_key=True)
    repo_pk: int = Field(
        sa_column=sa.Column(
            sa.Integer, sa.ForeignKey("repos.id", ondelete="CASCADE"), nullable=False
        )
    )
    entry_key: str = Field(sa_column=sa.Column(sa.String(64), nullable=False))
    path: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    blob_id: str = Field(sa_column=sa.Column(sa.String(64), nullable=False))
    size: int = Field(sa_column=sa.Column(sa.BigInteger, nullable=False))
    lfs_sha256: str | None = Field(default=None, sa_column=sa.Column(sa.String(64)))
    security: dict[str, Any] | None = Field(default=None, sa_column=sa.Column(sa.JSON))


class TreeRow(StoreModel, table=True):
    __tablename__ = "trees"

    tree_hash: str = Field(sa_column=sa.Column(sa.String(64), primary_key=True))
    entry_ids: list[int] = Field(sa_column=sa.Column(sa.JSON, nullable=False))


class BlobRow(StoreModel, table=True):
    __tablename__ = "blobs"

    sha256: str = Field(sa_column=sa.Column(sa.String(64), primary_key=True))
    size: int = Field(sa_column=sa.Column(sa.BigInteger, nullable=False))
    data: bytes = Field(sa_column=sa.Column(sa.LargeBinary, nullable=False))


class RevisionFileRow(StoreModel, table=True):
    __tablename__ = "revision_files"

    revision_pk: int = Field(
        sa_column=sa.Column(
            sa.Integer, sa.ForeignKey("revisions.id", ondelete="CASCADE"), primary_key=True
        )
    )
    path: str = Field(sa_column=sa.Column(sa.String(1000), primary_key=True))
    kind: str = Field(sa_column=sa.Column(sa.String(16), nullable=False))
    blob_sha256: str | None = Field(
        default=None, sa_column=sa.Column(sa.String(64), sa.ForeignKey("blobs.sha256"))
    )
    reason: str | None = Field(default=None, sa_column=sa.Column(sa.Text))
    fetched: bool = Field(
        default=False,
        sa_column=sa.Column(sa.Boolean, nullable=False, server_default=sa.false()),
    )


class EventRow(StoreModel, table=True):
    __tablename__ = "events"

    id: int | None = Field(default=None, primary_key=True)
    repo_pk: int = Field(
        sa_column=sa.Column(
            sa.Integer, sa.ForeignKey("repos.id", ondelete="CASCADE"), nullable=False, index=True
        )
    )
    at: datetime = Field(sa_column=sa.Column(UtcDateTime, nullable=False))
    kind: str = Field(sa_column=sa.Column(sa.String(32), nullable=False))
    details: dict[str, Any] = Field(sa_column=sa.Column(sa.JSON, nullable=False))


SNAPSHOT_TABLES = (
    "repos",
    "ingestion_state",
    "revisions",
    "tree_entries",
    "trees",
    "blobs",
    "revision_files",
    "events",
)
