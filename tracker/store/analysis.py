"""The revision diff store: the changes found between revision pairs and the estimate of each revision.

Other services read this as "the revision diff store". Rows never leave this module: reads return
`tracker.domain.Diff` / `Estimate` values. Migration 0003 creates exactly these tables.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlmodel import Field, Session, SQLModel, col, select

from tracker.domain import Change, Diff, Estimate, RepoId, Sha
from tracker.store.engine import transaction


class RevisionDiffRow(SQLModel, table=True):
    __tablename__ = "revision_diffs"
    __table_args__ = (
        sa.UniqueConstraint("repo_id", "before_sha", "after_sha", name="uq_diff_pair"),
    )

    id: int | None = Field(default=None, sa_column=sa.Column(sa.Integer, primary_key=True))
    repo_id: str = Field(sa_column=sa.Column(sa.String(200), nullable=False, index=True))
    before_sha: str = Field(sa_column=sa.Column(sa.String(40), nullable=False))  # "" for the first
    after_sha: str = Field(sa_column=sa.Column(sa.String(40), nullable=False, index=True))
    changes: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    created_at: str = Field(sa_column=sa.Column(sa.String(32), nullable=False))


class RevisionEstimateRow(SQLModel, table=True):
    __tablename__ = "revision_estimates"

    repo_id: str = Field(sa_column=sa.Column(sa.String(200), primary_key=True))
    sha: str = Field(sa_column=sa.Column(sa.String(40), primary_key=True))
    report: str | None = Field(default=None, sa_column=sa.Column(sa.Text, nullable=True))
    error: str | None = Field(default=None, sa_column=sa.Column(sa.Text, nullable=True))
    created_at: str = Field(sa_column=sa.Column(sa.String(32), nullable=False))


@dataclass(frozen=True)
class StoredEstimate:
    """The estimate of one revision, or why there is none (no config.json, unreadable config)."""

    repo_id: RepoId
    sha: Sha
    estimate: Estimate | None
    error: str | None


def _stamp(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class AnalysisStore:
    """Diffs per revision pair and estimates per revision, over the store's engine."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def _session(self) -> AbstractContextManager[Session]:
        return transaction(self.engine, "analysis store")

    def save(self, diff: Diff, estimate: StoredEstimate, now: datetime) -> None:
        """Store a revision's diff and estimate in one transaction; saving again replaces them."""
        before = diff.before or ""
        with self._session() as s:
            row = s.exec(
                select(RevisionDiffRow).where(
                    col(RevisionDiffRow.repo_id) == diff.repo_id,
                    col(RevisionDiffRow.before_sha) == before,
                    col(RevisionDiffRow.after_sha) == diff.after,
                )
            ).first()
            payload = json.dumps([c.to_json() for c in diff.changes], sort_keys=True)
            if row is None:
                s.add(
                    RevisionDiffRow(
                        repo_id=diff.repo_id,
                        before_sha=before,
                        after_sha=diff.after,
                        changes=payload,
                        created_at=_stamp(now),
                    )
                )
            else:
                row.changes = payload
            est = s.get(RevisionEstimateRow, (estimate.repo_id, estimate.sha))
            report = (
                json.dumps(estimate.estimate.to_json(), sort_keys=True)
                if estimate.estimate is not None
                else None
            )
            if est is None:
                s.add(
                    RevisionEstimateRow(
                        repo_id=estimate.repo_id,
                        sha=estimate.sha,
                        report=report,
                        error=estimate.error,
                        created_at=_stamp(now),
                    )
                )
            else:
                est.report, est.error = report, estimate.error

    def diff(self, repo_id: RepoId, before: Sha | None, after: Sha) -> Diff | None:
        """The stored diff of the pair, or None when that pair was never analysed."""
        with self._session() as s:
            row = s.exec(
                select(RevisionDiffRow).where(
                    col(RevisionDiffRow.repo_id) == repo_id,
                    col(RevisionDiffRow.before_sha) == (before or ""),
                    col(RevisionDiffRow.after_sha) == after,
                )
            ).first()
            if row is None:
                return None
            changes = tuple(Change.from_json(c) for c in json.loads(row.changes))
        return Diff(repo_id=repo_id, before=before, after=after, changes=changes)

    def estimate(self, repo_id: RepoId, sha: Sha) -> StoredEstimate | None:
        """The stored estimate of a revision (None when the revision was never analysed)."""
        with self._session() as s:
            row = s.get(RevisionEstimateRow, (repo_id, sha))
            if row is None:
                return None
            est = Estimate.from_json(json.loads(row.report)) if row.report is not None else None
            return StoredEstimate(repo_id=repo_id, sha=sha, estimate=est, error=row.error)

    def diffs_of(self, repo_id: RepoId) -> list[Diff]:
        """Every stored diff of a repo, in insertion order."""
        with self._session() as s:
            rows = s.exec(
                select(RevisionDiffRow)
                .where(col(RevisionDiffRow.repo_id) == repo_id)
                .order_by(col(RevisionDiffRow.id))
            ).all()
            return [
                Diff(
                    repo_id=repo_id,
                    before=Sha(r.before_sha) if r.before_sha else None,
                    after=Sha(r.after_sha),
                    changes=tuple(Change.from_json(c) for c in json.loads(r.changes)),
                )
                for r in rows
            ]
