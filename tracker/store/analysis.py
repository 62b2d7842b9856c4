"""The revision diff store: the changes found between revision pairs and the estimate of each revision.

Other services read this as "the revision diff store". Rows never leave this module: reads return
`tracker.shared.domain.Diff` / `Estimate` values. Migration 0004 creates exactly these tables (0003 made
their first form). Both belong to revisions: a diff to its `after` revision (one diff per
revision, against the revision ingested before it, NULL `before_sha` for the first) and to its
`before` revision; an estimate to its revision. Saving for a revision the snapshot store does not
hold raises StoreNotFoundError.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field, Session, col, select

from tracker.shared.domain import Artifact, Change, ChangeKind, Diff, Estimate, RepoId, Sha
from tracker.shared.errors import StoreNotFoundError
from tracker.store.base import StoreModel, UtcDateTime
from tracker.store.engine import transaction, upsert
from tracker.store.tables import RepoRow, RevisionRow, repo_fk, revision_fk


class RevisionDiffRow(StoreModel, table=True):
    __tablename__ = "revision_diffs"
    __table_args__ = (
        sa.UniqueConstraint("repo_pk", "after_sha", name="uq_revision_diffs_after"),
        revision_fk("fk_revision_diffs_after", "after_sha"),
        revision_fk("fk_revision_diffs_before", "before_sha"),
    )

    id: int | None = Field(default=None, sa_column=sa.Column(sa.Integer, primary_key=True))
    repo_pk: int = Field(sa_column=repo_fk())
    before_sha: str | None = Field(default=None, sa_column=sa.Column(sa.String(40)))
    after_sha: str = Field(sa_column=sa.Column(sa.String(40), nullable=False))
    changes: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    created_at: datetime = Field(sa_column=sa.Column(UtcDateTime, nullable=False))


class RevisionEstimateRow(StoreModel, table=True):
    __tablename__ = "revision_estimates"
    __table_args__ = (revision_fk("fk_revision_estimates_revision"),)

    repo_pk: int = Field(
        sa_column=sa.Column(
            sa.Integer, sa.ForeignKey("repos.id"), primary_key=True, autoincrement=False
        )
    )
    sha: str = Field(sa_column=sa.Column(sa.String(40), primary_key=True))
    report: str | None = Field(default=None, sa_column=sa.Column(sa.Text, nullable=True))
    error: str | None = Field(default=None, sa_column=sa.Column(sa.Text, nullable=True))
    created_at: datetime = Field(sa_column=sa.Column(UtcDateTime, nullable=False))


ANALYSIS_TABLES = ("revision_diffs", "revision_estimates")
FIT_KINDS = (ChangeKind.FIT_LOST, ChangeKind.FIT_GAINED)


@dataclass(frozen=True)
class StoredEstimate:
    """The estimate of one revision, or why there is none (no config.json, unreadable config)."""

    repo_id: RepoId
    sha: Sha
    estimate: Estimate | None
    error: str | None


@dataclass(frozen=True)
class FitMoveRow:
    """A revision whose estimate moved a card-fit verdict: its estimate changes (fit moves first),
    its commit title and when it was analysed (the diff's creation time, kept on re-analysis)."""

    repo_id: RepoId
    sha: Sha
    before: Sha | None
    title: str
    at: datetime
    changes: tuple[Change, ...]


def _diff(repo_id: RepoId, row: RevisionDiffRow) -> Diff:
    return Diff(
        repo_id=repo_id,
        before=Sha(row.before_sha) if row.before_sha else None,
        after=Sha(row.after_sha),
        changes=tuple(Change.from_json(c) for c in json.loads(row.changes)),
    )


class AnalysisStore:
    """Diffs per revision and estimates per revision, over the store's engine."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def _session(self, *, write: bool = False) -> AbstractContextManager[Session]:
        return transaction(self.engine, "analysis store", write=write)

    @staticmethod
    def _repo_pk(s: Session, repo_id: RepoId) -> int | None:
        found = s.execute(
            sa.select(col(RepoRow.id)).where(col(RepoRow.repo_id) == repo_id)
        ).scalar_one_or_none()
        return None if found is None else int(found)

    def save(self, diff: Diff, estimate: StoredEstimate, now: datetime) -> None:
        """Store a revision's diff and estimate in one transaction; saving again replaces them.

        StoreNotFoundError when a revision named is not in the store."""
        with self._session(write=True) as s:
            pk = self._repo_pk(s, diff.repo_id)
            if pk is None or estimate.repo_id != diff.repo_id:
                raise StoreNotFoundError(f"{estimate.repo_id} is not in the store")
            for sha in {diff.after, estimate.sha, *([diff.before] if diff.before else [])}:
                q = sa.select(col(RevisionRow.id)).where(
                    col(RevisionRow.repo_pk) == pk, col(RevisionRow.sha) == sha
                )
                if s.execute(q).first() is None:
                    raise StoreNotFoundError(f"{diff.repo_id}: revision {sha} is not in the store")
            # Upserts: another process analysing the same revision writes the same values.
            payload = json.dumps([c.to_json() for c in diff.changes], sort_keys=True)
            upsert(
                s,
                RevisionDiffRow.__table__,  # type: ignore[attr-defined]
                {
                    "repo_pk": pk,
                    "before_sha": diff.before,
                    "after_sha": diff.after,
                    "changes": payload,
                    "created_at": now,
                },
                ["repo_pk", "after_sha"],
                ["before_sha", "changes"],
            )
            report = (
                json.dumps(estimate.estimate.to_json(), sort_keys=True)
                if estimate.estimate is not None
                else None
            )
            upsert(
                s,
                RevisionEstimateRow.__table__,  # type: ignore[attr-defined]
                {
                    "repo_pk": pk,
                    "sha": estimate.sha,
                    "report": report,
                    "error": estimate.error,
                    "created_at": now,
                },
                ["repo_pk", "sha"],
                ["report", "error"],
            )

    def diff(self, repo_id: RepoId, before: Sha | None, after: Sha) -> Diff | None:
        """The stored diff of the pair, or None when that pair was never analysed."""
        with self._session() as s:
            pk = self._repo_pk(s, repo_id)
            row = s.exec(
                select(RevisionDiffRow).where(
                    col(RevisionDiffRow.repo_pk) == pk, col(RevisionDiffRow.after_sha) == after
                )
            ).first()
            if row is None or row.before_sha != before:
                return None
            return _diff(repo_id, row)

    def estimate(self, repo_id: RepoId, sha: Sha) -> StoredEstimate | None:
        """The stored estimate of a revision (None when the revision was never analysed)."""
        with self._session() as s:
            pk = self._repo_pk(s, repo_id)
            row = None if pk is None else s.get(RevisionEstimateRow, (pk, sha))
            if row is None:
                return None
            est = Estimate.from_json(json.loads(row.report)) if row.report is not None else None
            return StoredEstimate(repo_id=repo_id, sha=sha, estimate=est, error=row.error)

    def diffs_of(self, repo_id: RepoId) -> list[Diff]:
        """Every stored diff of a repo, in insertion order."""
        with self._session() as s:
            rows = s.exec(
                select(RevisionDiffRow)
                .where(col(RevisionDiffRow.repo_pk) == self._repo_pk(s, repo_id))
                .order_by(col(RevisionDiffRow.id))
            ).all()
            return [_diff(repo_id, r) for r in rows]

    def fit_moves(self, limit: int, *, repo_id: RepoId | None = None) -> list[FitMoveRow]:
        """The newest `limit` revisions (by analysis time, not rewritten away) whose stored diff
        holds a card-fit move (an estimate change of kind fit_lost or fit_gained), newest first,
        each with its estimate changes (fit moves first). Bounded: the database picks the rows
        (a text match on the stored diff, confirmed here on the parsed changes), never a whole
        history."""
        r, d, rev = RepoRow.__table__, RevisionDiffRow.__table__, RevisionRow.__table__  # type: ignore[attr-defined]
        q = (
            sa.select(
                r.c.repo_id, d.c.after_sha, d.c.before_sha, d.c.changes, d.c.created_at, rev.c.title
            )
            .join(r, r.c.id == d.c.repo_pk)
            .join(rev, (rev.c.repo_pk == d.c.repo_pk) & (rev.c.sha == d.c.after_sha))
            .where(
                sa.or_(*(d.c.changes.contains(f'"{k.value}"') for k in FIT_KINDS)),
                rev.c.rewritten_away == sa.false(),
            )
            .order_by(d.c.created_at.desc(), d.c.id.desc())
        )
        if repo_id is not None:
            q = q.where(r.c.repo_id == repo_id)
        out: list[FitMoveRow] = []
        offset = 0
        with self._session() as s:
            while len(out) < limit:
                rows = s.execute(q.limit(limit).offset(offset)).all()
                for rid, after, before, payload, at, title in rows:
                    changes = [Change.from_json(c) for c in json.loads(payload)]
                    estimate = [c for c in changes if c.artifact is Artifact.ESTIMATE]
                    fits = [c for c in estimate if c.kind in FIT_KINDS]
                    if fits and len(out) < limit:
                        rest = [c for c in estimate if c.kind not in FIT_KINDS]
                        out.append(
                            FitMoveRow(
                                RepoId(rid),
                                Sha(after),
                                Sha(before) if before else None,
                                str(title),
                                at,
                                (*fits, *rest),
                            )
                        )
                if len(rows) < limit:
                    break
                offset += limit
        return out
