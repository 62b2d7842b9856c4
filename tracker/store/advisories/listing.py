"""Pages of advisory summaries for the HTTP API's advisory list: filtered and ordered in SQL, read
with one bounded query per page, so a store of any size pages without loading everything.

Order: `published` then id (both never change once an advisory exists), oldest or newest first;
a page starts strictly after a `(published, id)` key, so paging while new advisories are
published loses and repeats nothing: new ones sort after every existing one (oldest first: they
appear on later pages; newest first: they are before the first page and not shown)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlmodel import Session

from tracker.shared.domain import AdvisoryState, Artifact, RepoId, Severity, Sha
from tracker.shared.errors import StoreError
from tracker.store.advisories.tables import AdvisoryRow
from tracker.store.tables import RepoRow


@dataclass(frozen=True)
class AdvisorySummary:
    """One advisory as a list shows it (the full record is at `/v1/vulns/ID`)."""

    id: str
    repo_id: RepoId
    introduced: Sha
    group: Artifact
    severity: Severity
    state: AdvisoryState
    published: datetime
    modified: datetime
    summary: str


@dataclass(frozen=True)
class AdvisoryFilter:
    """What a list keeps: every given field must hold; a set matches any of its members
    (`tracker.store.queries.advisory_filter` builds one from what a user typed)."""

    repo_ids: frozenset[str] | None = None
    severities: frozenset[Severity] | None = None
    groups: frozenset[Artifact] | None = None
    states: frozenset[AdvisoryState] | None = None
    since: datetime | None = None  # modified at or after

    def admits(
        self,
        repo_id: str,
        severity: Severity,
        group: Artifact | None,
        state: AdvisoryState | None,
        modified: datetime | None,
    ) -> bool:
        """Whether an advisory (or, with `group`/`state`/`modified` None, a suppressed change,
        which has none) passes, as the SQL of `advisory_page` decides."""
        return (
            (self.repo_ids is None or repo_id in self.repo_ids)
            and (self.severities is None or severity in self.severities)
            and (self.groups is None or group in self.groups)
            and (self.states is None or state in self.states)
            and (self.since is None or (modified is not None and modified >= self.since))
        )


def advisory_page(
    engine: sa.Engine,
    where: AdvisoryFilter,
    *,
    newest_first: bool,
    after: tuple[datetime, str] | None,
    limit: int,
) -> list[AdvisorySummary]:
    """At most `limit` summaries matching `where`, after the `(published, id)` key `after`."""
    a = AdvisoryRow.__table__  # type: ignore[attr-defined]
    r = RepoRow.__table__  # type: ignore[attr-defined]
    q = sa.select(
        a.c.id,
        r.c.repo_id,
        a.c.introduced,
        a.c.grp,
        a.c.severity,
        a.c.state,
        a.c.published,
        a.c.modified,
        a.c.record,
    ).join(r, r.c.id == a.c.repo_pk)
    if where.repo_ids is not None:
        q = q.where(r.c.repo_id.in_(sorted(where.repo_ids)))
    if where.severities is not None:
        q = q.where(a.c.severity.in_(sorted(s.value for s in where.severities)))
    if where.groups is not None:
        q = q.where(a.c.grp.in_(sorted(g.value for g in where.groups)))
    if where.states is not None:
        q = q.where(a.c.state.in_(sorted(s.value for s in where.states)))
    if where.since is not None:
        q = q.where(a.c.modified >= where.since)
    if after is not None:
        published, last_id = after
        if newest_first:
            q = q.where(
                sa.or_(
                    a.c.published < published,
                    sa.and_(a.c.published == published, a.c.id < last_id),
                )
            )
        else:
            q = q.where(
                sa.or_(
                    a.c.published > published,
                    sa.and_(a.c.published == published, a.c.id > last_id),
                )
            )
    if newest_first:
        q = q.order_by(a.c.published.desc(), a.c.id.desc())
    else:
        q = q.order_by(a.c.published, a.c.id)
    try:
        with Session(engine) as s:
            rows = s.execute(q.limit(limit)).all()
    except sa_exc.SQLAlchemyError as exc:
        raise StoreError(f"advisory store failed: {exc}") from exc
    return [_summary(row) for row in rows]


def _summary(row: Sequence[object]) -> AdvisorySummary:
    aid, repo_id, introduced, grp, severity, state, published, modified, record = row
    summary = json.loads(str(record)).get("summary", "")
    return AdvisorySummary(
        id=str(aid),
        repo_id=RepoId(str(repo_id)),
        introduced=Sha(str(introduced)),
        group=Artifact(str(grp)),
        severity=Severity(str(severity)),
        state=AdvisoryState(str(state)),
        published=published,  # type: ignore[arg-type]
        modified=modified,  # type: ignore[arg-type]
        summary=str(summary),
    )


def counts_by_repo(engine: sa.Engine) -> dict[str, dict[str, int]]:
    """Advisories per repo and state: `{repo_id: {"open": n, "fixed": n, "withdrawn": n}}`."""
    a = AdvisoryRow.__table__  # type: ignore[attr-defined]
    r = RepoRow.__table__  # type: ignore[attr-defined]
    q = (
        sa.select(r.c.repo_id, a.c.state, sa.func.count())
        .join(r, r.c.id == a.c.repo_pk)
        .group_by(r.c.repo_id, a.c.state)
    )
    try:
        with Session(engine) as s:
            rows = s.execute(q).all()
    except sa_exc.SQLAlchemyError as exc:
        raise StoreError(f"advisory store failed: {exc}") from exc
    out: dict[str, dict[str, int]] = {}
    for repo_id, state, n in rows:
        out.setdefault(str(repo_id), {s.value: 0 for s in AdvisoryState})[str(state)] = int(n)
    return out


__all__ = ["AdvisoryFilter", "AdvisorySummary", "advisory_page", "counts_by_repo"]
