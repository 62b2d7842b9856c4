"""The preflight of each revision in the revision diff store (issue 15): one row per revision.

Rows never leave this module: reads return `tracker.preflight.Preflight` values (or None with the
reason there is none). Migration 0006 creates the table. Saving for a revision the snapshot store
does not hold raises StoreNotFoundError; saving again replaces (another process analysing the same
revision writes the same answer).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field, col

from tracker.preflight.report import Preflight
from tracker.shared.domain import RepoId, Sha
from tracker.shared.errors import StoreNotFoundError
from tracker.store.base import StoreModel, UtcDateTime
from tracker.store.engine import transaction, upsert
from tracker.store.tables import RepoRow, RevisionRow, revision_fk


class RevisionPreflightRow(StoreModel, table=True):
    __tablename__ = "revision_preflight"
    __table_args__ = (revision_fk("fk_revision_preflight_revision"),)

    repo_pk: int = Field(
        sa_column=sa.Column(
            sa.Integer, sa.ForeignKey("repos.id"), primary_key=True, autoincrement=False
        )
    )
    sha: str = Field(sa_column=sa.Column(sa.String(40), primary_key=True))
    report: str | None = Field(default=None, sa_column=sa.Column(sa.Text, nullable=True))
    error: str | None = Field(default=None, sa_column=sa.Column(sa.Text, nullable=True))
    created_at: datetime = Field(sa_column=sa.Column(UtcDateTime, nullable=False))


PREFLIGHT_TABLES = ("revision_preflight",)


@dataclass(frozen=True)
class StoredPreflight:
    """The preflight of one revision, or why there is none."""

    repo_id: RepoId
    sha: Sha
    preflight: Preflight | None
    error: str | None


class PreflightStore:
    """Preflight answers per revision, over the store's engine."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def save(self, stored: StoredPreflight, now: datetime) -> None:
        """Store (or replace) a revision's preflight; StoreNotFoundError for an unknown revision."""
        with transaction(self.engine, "preflight store", write=True) as s:
            pk = s.execute(
                sa.select(col(RepoRow.id)).where(col(RepoRow.repo_id) == stored.repo_id)
            ).scalar_one_or_none()
            if pk is None:
                raise StoreNotFoundError(f"{stored.repo_id} is not in the store")
            q = sa.select(col(RevisionRow.id)).where(
                col(RevisionRow.repo_pk) == pk, col(RevisionRow.sha) == stored.sha
            )
            if s.execute(q).first() is None:
                raise StoreNotFoundError(
                    f"{stored.repo_id}: revision {stored.sha} is not in the store"
                )
            report = (
                None
                if stored.preflight is None
                else json.dumps(stored.preflight.to_json(), sort_keys=True)
            )
            upsert(
                s,
                RevisionPreflightRow.__table__,  # type: ignore[attr-defined]
                {
                    "repo_pk": pk,
                    "sha": stored.sha,
                    "report": report,
                    "error": stored.error,
                    "created_at": now,
                },
                ["repo_pk", "sha"],
                ["report", "error"],
            )

    def get(self, repo_id: RepoId, sha: Sha) -> StoredPreflight | None:
        """The stored preflight of a revision (None when it was never analysed)."""
        with transaction(self.engine, "preflight store") as s:
            pk = s.execute(
                sa.select(col(RepoRow.id)).where(col(RepoRow.repo_id) == repo_id)
            ).scalar_one_or_none()
            row = None if pk is None else s.get(RevisionPreflightRow, (pk, sha))
            if row is None:
                return None
            value = None if row.report is None else Preflight.from_json(json.loads(row.report))
            return StoredPreflight(repo_id, sha, value, row.error)
