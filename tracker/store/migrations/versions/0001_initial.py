"""Migration 0001: the snapshot store (repos, ingestion state, revisions, trees, blobs, files, events).

Revision "0001"; helper migrations chain after it ("0002" advisories, "0003" ...).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "repos",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("repo_id", sa.String(200), nullable=False, unique=True),
        sa.Column("source_kind", sa.String(16), nullable=False),
        sa.Column("url", sa.Text, nullable=True),
        sa.Column("ref", sa.String(255), nullable=False),
    )
    op.create_table(
        "ingestion_state",
        sa.Column(
            "repo_pk", sa.Integer, sa.ForeignKey("repos.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("cursor_sha", sa.String(40)),
        sa.Column("last_poll_at", sa.DateTime),
        sa.Column("last_success_at", sa.DateTime),
        sa.Column("consecutive_failures", sa.Integer, nullable=False, server_default="0"),
        sa.Column("last_error", sa.Text),
        sa.Column("state", sa.String(16), nullable=False, server_default="new"),
    )
    op.create_table(
        "trees",
        sa.Column("tree_hash", sa.String(64), primary_key=True),
        sa.Column("entry_ids", sa.JSON, nullable=False),
    )
    op.create_table(
        "revisions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "repo_pk", sa.Integer, sa.ForeignKey("repos.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("sha", sa.String(40), nullable=False),
        sa.Column("parents", sa.JSON, nullable=False),
        sa.Column("date", sa.String(40), nullable=False),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("authors", sa.JSON, nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("previous_sha", sa.String(40)),
        sa.Column("tree_hash", sa.String(64), sa.ForeignKey("trees.tree_hash"), nullable=False),
        sa.Column("ingested_at", sa.DateTime, nullable=False),
        sa.Column("analysed_at", sa.DateTime),
        sa.Column("rewritten_away", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.UniqueConstraint("repo_pk", "sha", name="uq_revisions_repo_sha"),
        sa.UniqueConstraint("repo_pk", "seq", name="uq_revisions_repo_seq"),
    )
    op.create_index("ix_revisions_repo_pk", "revisions", ["repo_pk"])
    op.create_table(
        "tree_entries",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "repo_pk", sa.Integer, sa.ForeignKey("repos.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("entry_key", sa.String(64), nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("blob_id", sa.String(64), nullable=False),
        sa.Column("size", sa.BigInteger, nullable=False),
        sa.Column("lfs_sha256", sa.String(64)),
        sa.Column("security", sa.JSON),
        sa.UniqueConstraint("repo_pk", "entry_key", name="uq_tree_entries_key"),
    )
    op.create_table(
        "blobs",
        sa.Column("sha256", sa.String(64), primary_key=True),
        sa.Column("size", sa.BigInteger, nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
    )
    op.create_table(
        "revision_files",
        sa.Column(
            "revision_pk",
            sa.Integer,
            sa.ForeignKey("revisions.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("path", sa.String(1000), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("blob_sha256", sa.String(64), sa.ForeignKey("blobs.sha256")),
        sa.Column("reason", sa.Text),
        sa.Column("fetched", sa.Boolean, nullable=False, server_default=sa.false()),
    )
    op.create_table(
        "events",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "repo_pk", sa.Integer, sa.ForeignKey("repos.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("at", sa.DateTime, nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("details", sa.JSON, nullable=False),
    )
    op.create_index("ix_events_repo_pk", "events", ["repo_pk"])


def downgrade() -> None:
    op.drop_index("ix_events_repo_pk", "events")
    op.drop_table("events")
    op.drop_table("revision_files")
    op.drop_table("blobs")
    op.drop_table("tree_entries")
    op.drop_index("ix_revisions_repo_pk", "revisions")
    op.drop_table("revisions")
    op.drop_table("trees")
    op.drop_table("ingestion_state")
    op.drop_table("repos")
