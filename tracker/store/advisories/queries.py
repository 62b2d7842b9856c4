"""AdvisoryStore and AdvisoryTx: reads and writes of the advisory tables, returning domain values.

Rows never leave this module: reads return `tracker.shared.domain.Advisory` or the small frozen values of
`tracker.store.advisories.values`. Callers name repos by `RepoId` and commits by `Sha`; the
store maps them to `repo_pk` rows. Writing for a repo or revision the snapshot store does not hold
raises StoreNotFoundError (an advisory always belongs to a stored revision).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlmodel import Session, col, select

from tracker.shared.domain import (
    Advisory,
    AdvisoryState,
    Artifact,
    RepoId,
    Severity,
    Sha,
    WithdrawnBy,
    parse_rfc3339,
    rfc3339,
)
from tracker.shared.errors import StoreError, StoreNotFoundError
from tracker.store.advisories.tables import (
    ADVISORY_TABLES,
    AdvisoryCounterRow,
    AdvisoryRevisionRow,
    AdvisoryRow,
    AdvisoryVersionRow,
    SuppressedChangeRow,
)
from tracker.store.advisories.values import (
    AdvisoryConflictError,
    OpenCandidate,
    StoredAdvisory,
    SuppressedChange,
    id_key,
)
from tracker.store.base import whole_seconds
from tracker.store.engine import writer
from tracker.store.tables import RepoRow, RevisionRow
from tracker.store.webhooks import OutboxTx

_CHUNK = 500


def _repo_ids(session: Session, pks: set[int]) -> dict[int, str]:
    if not pks:
        return {}
    q = sa.select(col(RepoRow.id), col(RepoRow.repo_id)).where(col(RepoRow.id).in_(sorted(pks)))
    return {int(pk): str(rid) for pk, rid in session.execute(q).all()}


def _to_advisory(row: AdvisoryRow, repo_id: str, versions: Sequence[str]) -> Advisory:
    """The full record: the stored one with `modified` and the `versions` list spliced in."""
    record = json.loads(row.record)
    record["modified"] = rfc3339(row.modified)
    for aff in record.get("affected") or []:
        aff["versions"] = list(versions)
    return Advisory(
        id=row.id,
        repo_id=RepoId(repo_id),
        introduced=Sha(row.introduced),
        group=Artifact(row.grp),
        severity=Severity(row.severity),
        record=record,
    )


def _load(session: Session, rows: Sequence[AdvisoryRow]) -> list[Advisory]:
    """Full advisories for `rows` (versions fetched in batches), ordered by id."""
    versions: dict[str, list[str]] = {r.id: [] for r in rows}
    ids = list(versions)
    for start in range(0, len(ids), _CHUNK):
        q = (
            select(AdvisoryVersionRow.advisory_id, AdvisoryVersionRow.sha)
            .where(col(AdvisoryVersionRow.advisory_id).in_(ids[start : start + _CHUNK]))
            .order_by(col(AdvisoryVersionRow.advisory_id), col(AdvisoryVersionRow.pos))
        )
        for advisory_id, sha in session.exec(q).all():
            versions[advisory_id].append(sha)
    repos = _repo_ids(session, {r.repo_pk for r in rows})
    return sorted(
        (_to_advisory(r, repos[r.repo_pk], versions[r.id]) for r in rows),
        key=lambda a: id_key(a.id),
    )


def _stored(session: Session, rows: Sequence[AdvisoryRow]) -> list[StoredAdvisory]:
    by_id = {r.id: r for r in rows}
    out = []
    for a in _load(session, rows):
        row = by_id[a.id]
        by = WithdrawnBy(row.withdrawn_by) if row.withdrawn_by is not None else None
        out.append(StoredAdvisory(a, AdvisoryState(row.state), tuple(json.loads(row.pending)), by))
    return out


def _dump(record: Any) -> str:
    return json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _stored_record(record: Mapping[str, Any]) -> str:
    """The record as stored: its versions list lives in `advisory_versions` rows instead."""
    out = dict(record)
    out["affected"] = [{**aff, "versions": []} for aff in record.get("affected") or []]
    return _dump(out)


def _shown(stored: str) -> Any:
    """What a reader of a stored record sees: all of it but `modified` (its versions list is
    not stored in it)."""
    out = json.loads(stored)
    out.pop("modified", None)
    return out


def _versions(record: Mapping[str, Any]) -> list[str]:
    return [str(v) for aff in record.get("affected") or [] for v in aff.get("versions") or []]


def _record_time(record: Mapping[str, Any], key: str) -> datetime:
    try:
        return parse_rfc3339(str(record[key]))
    except (KeyError, ValueError) as exc:
        raise StoreError(f"advisory record has no valid {key!r} timestamp: {exc}") from exc


_RETRYABLE_SQLSTATES = ("40001", "40P01")  # serialization failure, deadlock detected


def _conflict(exc: sa_exc.DBAPIError) -> bool:
    if isinstance(exc, sa_exc.IntegrityError):
        return True
    return getattr(exc.orig, "sqlstate", None) in _RETRYABLE_SQLSTATES


class AdvisoryTx:
    """The advisory store inside one transaction (from `AdvisoryStore.transaction()`).

    A record's `versions` list is kept as ordered `advisory_versions` rows and spliced in on read,
    so extending an open advisory by one commit writes one small row, not the whole record.
    """

    def __init__(self, session: Session) -> None:
        self._s = session
        self._pks: dict[str, int] = {}

    def _repo_pk(self, repo_id: RepoId) -> int:
        """The repo's row id; StoreNotFoundError when the snapshot store has never seen it."""
        pk = self._pks.get(repo_id)
        if pk is None:
            found = self._s.execute(
                sa.select(col(RepoRow.id)).where(col(RepoRow.repo_id) == repo_id)
            ).scalar_one_or_none()
            if found is None:
                raise StoreNotFoundError(f"{repo_id} is not in the store")
            pk = self._pks[repo_id] = int(found)
        return pk

    def _require_revision(self, repo_pk: int, repo_id: RepoId, sha: Sha) -> None:
        q = sa.select(col(RevisionRow.id)).where(
            col(RevisionRow.repo_pk) == repo_pk, col(RevisionRow.sha) == sha
        )
        if self._s.execute(q).first() is None:
            raise StoreNotFoundError(f"{repo_id}: revision {sha} is not in the store")

    @property
    def outbox(self) -> OutboxTx:
        """The webhook outbox in this transaction (deliveries commit with the advisories)."""
        return OutboxTx(self._s, self._repo_pk)

    def revision_done(self, repo_id: RepoId, sha: Sha) -> bool:
        """Whether `sha`'s advisories were published; StoreNotFoundError unless it is stored."""
        pk = self._repo_pk(repo_id)
        if self._s.get(AdvisoryRevisionRow, (pk, sha)) is not None:
            return True
        self._require_revision(pk, repo_id, sha)
        return False

    def introduced_at(self, repo_id: RepoId, sha: Sha) -> list[Advisory]:
        rows = self._s.exec(
            select(AdvisoryRow).where(
                AdvisoryRow.repo_pk == self._repo_pk(repo_id), AdvisoryRow.introduced == sha
            )
        ).all()
        return _load(self._s, rows)

    def get(self, advisory_id: str) -> StoredAdvisory | None:
        row = self._s.get(AdvisoryRow, advisory_id)
        if row is None:
            return None
        [stored] = _stored(self._s, [row])
        return stored

    def open_candidates(self, repo_id: RepoId, previous: Sha, sha: Sha) -> list[OpenCandidate]:
        """Open advisories of `repo_id` whose versions contain `previous` but not yet `sha`, by id."""
        a = AdvisoryRow.__table__  # type: ignore[attr-defined]
        versions = AdvisoryVersionRow.__table__  # type: ignore[attr-defined]
        v, v2, v3 = versions.alias("v"), versions.alias("v2"), versions.alias("v3")
        n = sa.select(sa.func.count()).where(v2.c.advisory_id == a.c.id).scalar_subquery()
        has_sha = sa.exists().where(v3.c.advisory_id == a.c.id, v3.c.sha == sha)
        q = (
            sa.select(a.c.id, a.c.pending, n)
            .join(v, sa.and_(v.c.advisory_id == a.c.id, v.c.sha == previous))
            .where(
                a.c.repo_pk == self._repo_pk(repo_id),
                a.c.state == AdvisoryState.OPEN.value,
                ~has_sha,
            )
        )
        out = [
            OpenCandidate(i, tuple(json.loads(p)), int(c)) for i, p, c in self._s.execute(q).all()
        ]
        return sorted(out, key=lambda c: id_key(c.id))

    def not_withdrawn_introduced_in(
        self, repo_id: RepoId, shas: Sequence[Sha]
    ) -> list[StoredAdvisory]:
        """Advisories of `repo_id` introduced at any of `shas` and not withdrawn, by id."""
        out: list[StoredAdvisory] = []
        wanted = sorted(set(shas))
        pk = self._repo_pk(repo_id)
        for start in range(0, len(wanted), _CHUNK):
            rows = self._s.exec(
                select(AdvisoryRow).where(
                    AdvisoryRow.repo_pk == pk,
                    AdvisoryRow.state != AdvisoryState.WITHDRAWN.value,
                    col(AdvisoryRow.introduced).in_(wanted[start : start + _CHUNK]),
                )
            ).all()
            out += _stored(self._s, rows)
        return sorted(out, key=lambda s: id_key(s.advisory.id))

    def fixed_of(self, repo_id: RepoId) -> list[StoredAdvisory]:
        """Advisories of `repo_id` in state FIXED, by id."""
        return self.in_state(repo_id, AdvisoryState.FIXED)

    def in_state(self, repo_id: RepoId, state: AdvisoryState) -> list[StoredAdvisory]:
        """Advisories of `repo_id` in `state`, by id."""
        rows = self._s.exec(
            select(AdvisoryRow).where(
                AdvisoryRow.repo_pk == self._repo_pk(repo_id), AdvisoryRow.state == state.value
            )
        ).all()
        return _stored(self._s, rows)

    def allocate(self, prefix: str, year: int) -> int:
        """The next N for (prefix, year); never returns the same N twice once committed."""
        row = self._s.get(AdvisoryCounterRow, (prefix, year), with_for_update=True)
        if row is None:
            row = AdvisoryCounterRow(prefix=prefix, year=year, next_n=1)
        n = row.next_n
        row.next_n = n + 1
        self._s.add(row)
        self._s.flush()
        return n

    def insert(
        self, adv: Advisory, *, package_name: str, pending: Sequence[dict[str, str]]
    ) -> None:
        rec = adv.record
        pk = self._repo_pk(adv.repo_id)
        self._s.add(
            AdvisoryRow(
                id=adv.id,
                repo_pk=pk,
                package_name=package_name,
                introduced=adv.introduced,
                grp=adv.group.value,
                severity=adv.severity.value,
                state=AdvisoryState.OPEN.value,
                published=_record_time(rec, "published"),
                modified=_record_time(rec, "modified"),
                record=_stored_record(rec),
                pending=_dump(list(pending)),
                content_modified=_record_time(rec, "modified"),
            )
        )
        self._s.flush()
        self._add_versions(adv.id, pk, _versions(rec), 0)

    def update(
        self,
        adv: Advisory,
        *,
        state: AdvisoryState,
        pending: Sequence[dict[str, str]],
        expect: AdvisoryState,
        withdrawn_by: WithdrawnBy | None = None,
    ) -> None:
        """Replace a record and its state, compare-and-set: only while the stored state is still
        `expect` (the state the caller read and derived `adv` from), else AdvisoryConflictError,
        which the caller's retry answers by reading again (another writer fixed, withdrew or
        reopened it meanwhile: on PostgreSQL, whose READ COMMITTED lets a transaction read the
        row before another commits, the guard's UPDATE waits for that writer and then sees its
        state). Its versions list may only grow. `withdrawn_by` is required for WITHDRAWN and must
        be None otherwise (restoring clears it). `content_modified` moves with `modified` only
        when the state or what the record shows (anything but `modified` and the versions list)
        changed."""
        if (state is AdvisoryState.WITHDRAWN) != (withdrawn_by is not None):
            raise StoreError(f"advisory {adv.id}: withdrawn_by goes with state withdrawn only")
        table = AdvisoryRow.__table__  # type: ignore[attr-defined]
        guard = self._s.execute(
            sa.update(table)
            .where(table.c.id == adv.id, table.c.state == expect.value)
            .values(state=expect.value)
            .execution_options(synchronize_session=False)
        )
        if guard.rowcount != 1:  # type: ignore[attr-defined]
            raise AdvisoryConflictError(
                f"advisory {adv.id} is no longer {expect.value}: another writer changed it"
            )
        row = self._s.get(AdvisoryRow, adv.id)
        if row is None:
            raise StoreNotFoundError(f"advisory {adv.id} does not exist")
        have = list(
            self._s.exec(
                select(AdvisoryVersionRow.sha)
                .where(AdvisoryVersionRow.advisory_id == adv.id)
                .order_by(col(AdvisoryVersionRow.pos))
            ).all()
        )
        new = _versions(adv.record)
        if new[: len(have)] != have:
            raise StoreError(f"advisory {adv.id}: the versions list may only grow")
        stored = _stored_record(adv.record)
        if row.state != state.value or _shown(row.record) != _shown(stored):
            row.content_modified = _record_time(adv.record, "modified")
        row.record = stored
        row.modified = _record_time(adv.record, "modified")
        row.state = state.value
        row.withdrawn_by = withdrawn_by.value if withdrawn_by is not None else None
        row.pending = _dump(list(pending))
        self._s.add(row)
        self._s.flush()
        self._add_versions(adv.id, row.repo_pk, new[len(have) :], len(have))

    def extend(
        self, items: Sequence[tuple[OpenCandidate, str | None]], sha: Sha, modified: datetime
    ) -> None:
        """Append `sha` to each candidate's versions and set `modified` (whole seconds); a
        non-None second item replaces the candidate's pending JSON. One batched INSERT and
        UPDATE for all."""
        if not items:
            return
        table = AdvisoryRow.__table__  # type: ignore[attr-defined]
        ids = [c.id for c, _ in items]
        rows = self._s.execute(sa.select(table.c.id, table.c.repo_pk).where(table.c.id.in_(ids)))
        repo_of = {str(i): int(pk) for i, pk in rows.all()}
        self._s.execute(
            sa.insert(AdvisoryVersionRow),
            [
                {"advisory_id": c.id, "sha": sha, "repo_pk": repo_of[c.id], "pos": c.n_versions}
                for c, _ in items
            ],
        )
        self._s.execute(
            sa.update(table)
            .where(table.c.id == sa.bindparam("b_id"))
            .values(modified=whole_seconds(modified)),
            [{"b_id": i} for i in ids],
        )
        changed = [{"b_id": c.id, "b_pending": p} for c, p in items if p is not None]
        if changed:
            self._s.execute(
                sa.update(table)
                .where(table.c.id == sa.bindparam("b_id"))
                .values(pending=sa.bindparam("b_pending")),
                changed,
            )

    def replace_versions(self, advisory_id: str, shas: Sequence[str], modified: datetime) -> None:
        """Set an advisory's versions list to `shas` (in order) and `modified`: what re-deriving
        it from the ref's history after a rewrite gives (commits a rewrite dropped leave it, ones
        a push brought back return). Nothing else of the record changes."""
        row = self._s.get(AdvisoryRow, advisory_id)
        if row is None:
            raise StoreNotFoundError(f"advisory {advisory_id} does not exist")
        versions = AdvisoryVersionRow.__table__  # type: ignore[attr-defined]
        self._s.execute(sa.delete(versions).where(versions.c.advisory_id == advisory_id))
        row.modified = whole_seconds(modified)
        self._s.add(row)
        self._s.flush()
        self._add_versions(advisory_id, row.repo_pk, shas, 0)

    def _add_versions(
        self, advisory_id: str, repo_pk: int, shas: Sequence[str], start: int
    ) -> None:
        for i, sha in enumerate(shas):
            self._s.add(
                AdvisoryVersionRow(advisory_id=advisory_id, sha=sha, repo_pk=repo_pk, pos=start + i)
            )
        self._s.flush()

    def record_suppressed(self, s: SuppressedChange) -> None:
        self._s.add(
            SuppressedChangeRow(
                repo_pk=self._repo_pk(s.repo_id),
                sha=s.sha,
                grp=s.group.value,
                severity=s.severity.value,
                reason=s.reason,
                change=_dump(s.change),
                recorded_at=whole_seconds(s.recorded_at),
            )
        )

    def overwrite(
        self,
        adv: Advisory,
        *,
        state: AdvisoryState,
        pending: Sequence[dict[str, str]],
        withdrawn_by: WithdrawnBy | None,
    ) -> None:
        """`tracker repair` only: replace a record with what a clean analysis of its revisions
        publishes (`tracker.repair`): its state, pending list and whole versions list, which may
        shrink (a false fix ended it early, or a false change extended it). `content_modified`
        and `modified` take the record's `modified`."""
        if (state is AdvisoryState.WITHDRAWN) != (withdrawn_by is not None):
            raise StoreError(f"advisory {adv.id}: withdrawn_by goes with state withdrawn only")
        row = self._s.get(AdvisoryRow, adv.id)
        if row is None:
            raise StoreNotFoundError(f"advisory {adv.id} does not exist")
        self._s.execute(
            sa.delete(AdvisoryVersionRow.__table__)  # type: ignore[attr-defined]
            .where(AdvisoryVersionRow.__table__.c.advisory_id == adv.id)  # type: ignore[attr-defined]
            .execution_options(synchronize_session=False)
        )
        row.record = _stored_record(adv.record)
        row.severity = adv.severity.value
        row.modified = row.content_modified = _record_time(adv.record, "modified")
        row.state = state.value
        row.withdrawn_by = withdrawn_by.value if withdrawn_by is not None else None
        row.pending = _dump(list(pending))
        self._s.add(row)
        self._s.flush()
        self._add_versions(adv.id, row.repo_pk, _versions(adv.record), 0)

    def replace_suppressed(
        self, repo_id: RepoId, sha: Sha, changes: Sequence[SuppressedChange]
    ) -> None:
        """`tracker repair` only: the suppressed changes of one revision become `changes`."""
        table = SuppressedChangeRow.__table__  # type: ignore[attr-defined]
        self._s.execute(
            sa.delete(table).where(table.c.repo_pk == self._repo_pk(repo_id), table.c.sha == sha)
        )
        for change in changes:
            self.record_suppressed(change)
        self._s.flush()

    def mark_revision(self, repo_id: RepoId, sha: Sha, at: datetime) -> None:
        self._s.add(
            AdvisoryRevisionRow(
                repo_pk=self._repo_pk(repo_id), sha=sha, published_at=whole_seconds(at)
            )
        )
        self._s.flush()


class AdvisoryStore:
    """Advisory persistence over the store's SQLAlchemy engine (SQLite or PostgreSQL)."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    @contextmanager
    def transaction(self) -> Iterator[AdvisoryTx]:
        """One transaction: committed when the block exits normally, rolled back on any exception.

        An integrity conflict (another writer got there first), a deadlock or a serialization
        failure becomes AdvisoryConflictError (retrying sees the other writer's result); other
        database failures become StoreError.
        """
        # A writing transaction: on SQLite it holds the write lock from the start (see `engine`).
        session = Session(writer(self.engine), expire_on_commit=False)
        try:
            yield AdvisoryTx(session)
            session.commit()
        except (sa_exc.IntegrityError, sa_exc.OperationalError) as exc:
            session.rollback()
            if not _conflict(exc):
                raise StoreError(f"advisory store failed: {exc}") from exc
            raise AdvisoryConflictError(f"advisory write conflict: {exc.orig}") from exc
        except sa_exc.SQLAlchemyError as exc:
            session.rollback()
            raise StoreError(f"advisory store failed: {exc}") from exc
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()

    def get(self, advisory_id: str) -> Advisory | None:
        """The advisory with this id, or None."""
        with self._read() as s:
            row = s.get(AdvisoryRow, advisory_id)
            return _load(s, [row])[0] if row else None

    def list_advisories(
        self,
        *,
        repo_id: str | None = None,
        severity: Severity | None = None,
        since: datetime | None = None,
        include_withdrawn: bool = True,
    ) -> list[Advisory]:
        """Advisories filtered by repo, severity and `modified >= since`, ordered by id."""
        q = select(AdvisoryRow)
        if repo_id is not None:
            q = q.join(RepoRow, col(RepoRow.id) == col(AdvisoryRow.repo_pk)).where(
                col(RepoRow.repo_id) == repo_id
            )
        if severity is not None:
            q = q.where(AdvisoryRow.severity == severity.value)
        if since is not None:
            q = q.where(AdvisoryRow.modified >= since)
        if not include_withdrawn:
            q = q.where(AdvisoryRow.state != AdvisoryState.WITHDRAWN.value)
        with self._read() as s:
            return _load(s, s.exec(q).all())

    def newest(
        self,
        limit: int,
        *,
        repo_id: str | None = None,
        severities: Sequence[Severity] | None = None,
    ) -> list[Advisory]:
        """`newest_shown`'s advisories, without their times."""
        return [a for a, _ in self.newest_shown(limit, repo_id=repo_id, severities=severities)]

    def newest_shown(
        self,
        limit: int,
        *,
        repo_id: str | None = None,
        severities: Sequence[Severity] | None = None,
    ) -> list[tuple[Advisory, datetime]]:
        """At most `limit` advisories (withdrawn ones too), each with its `content_modified`
        (when what a reader sees of it last changed; a versions list growing does not count),
        the most recent first (ties: the higher id number first), of one repo and/or of the
        given severities: what a feed shows. The database picks and orders the rows
        (`content_modified` is indexed); only those are loaded."""
        a, r = AdvisoryRow.__table__, RepoRow.__table__  # type: ignore[attr-defined]
        q = sa.select(a.c.id, a.c.content_modified, a.c.modified).order_by(
            a.c.content_modified.desc(), sa.func.length(a.c.id).desc(), a.c.id.desc()
        )
        if repo_id is not None:
            q = q.join(r, r.c.id == a.c.repo_pk).where(r.c.repo_id == repo_id)
        if severities is not None:
            q = q.where(a.c.severity.in_([s.value for s in severities]))
        with self._read() as s:
            picked = [(str(i), shown or mod) for i, shown, mod in s.execute(q.limit(limit)).all()]
            ids = [i for i, _ in picked]
            rows = s.exec(select(AdvisoryRow).where(col(AdvisoryRow.id).in_(ids))).all()
            by_id = {adv.id: adv for adv in _load(s, rows)}
        return [(by_id[i], when) for i, when in picked]

    def introduced_ids(
        self, pairs: Sequence[tuple[str, str]], group: Artifact
    ) -> dict[tuple[str, str], str]:
        """The id of the `group` advisory introduced at each `(repo_id, sha)` that has one."""
        a, r = AdvisoryRow.__table__, RepoRow.__table__  # type: ignore[attr-defined]
        out: dict[tuple[str, str], str] = {}
        if not pairs:
            return out
        wanted = set(pairs)
        q = (
            sa.select(r.c.repo_id, a.c.introduced, a.c.id)
            .join(r, r.c.id == a.c.repo_pk)
            .where(a.c.grp == group.value, a.c.introduced.in_(sorted({sha for _, sha in pairs})))
        )
        with self._read() as s:
            for rid, sha, aid in s.execute(q).all():
                if (str(rid), str(sha)) in wanted:
                    out[(str(rid), str(sha))] = str(aid)
        return out

    def affecting_commit(self, sha: str) -> list[Advisory]:
        """Non-withdrawn advisories whose versions list contains commit `sha`, ordered by id."""
        return self.get_many(self.query_ids(commit=sha))

    def query_ids(
        self,
        *,
        commit: str | None = None,
        repo_id: str | None = None,
        package_name: str | None = None,
    ) -> list[str]:
        """Ids of non-withdrawn advisories matching all given filters (`commit`: its versions list
        contains it), ordered by id; cheap, for paginating before loading records."""
        a = AdvisoryRow.__table__  # type: ignore[attr-defined]
        q = sa.select(a.c.id).where(a.c.state != AdvisoryState.WITHDRAWN.value)
        if commit is not None:
            v = AdvisoryVersionRow.__table__  # type: ignore[attr-defined]
            q = q.join(v, v.c.advisory_id == a.c.id).where(v.c.sha == commit)
        if repo_id is not None:
            r = RepoRow.__table__  # type: ignore[attr-defined]
            q = q.join(r, r.c.id == a.c.repo_pk).where(r.c.repo_id == repo_id)
        if package_name is not None:
            q = q.where(a.c.package_name == package_name)
        with self._read() as s:
            return sorted((str(r[0]) for r in s.execute(q).all()), key=id_key)

    def modified_of(self, ids: Sequence[str]) -> list[dict[str, str]]:
        """`{"id", "modified"}` (RFC 3339) for these ids (unknown ids skipped), ordered by id,
        without loading records (what OSV's querybatch answers)."""
        a = AdvisoryRow.__table__  # type: ignore[attr-defined]
        out: list[dict[str, str]] = []
        with self._read() as s:
            for start in range(0, len(ids), _CHUNK):
                q = sa.select(col(AdvisoryRow.id), col(AdvisoryRow.modified)).where(
                    a.c.id.in_(list(ids[start : start + _CHUNK]))
                )
                out += [{"id": str(i), "modified": rfc3339(m)} for i, m in s.execute(q).all()]
        return sorted(out, key=lambda d: id_key(d["id"]))

    def get_many(self, ids: Sequence[str]) -> list[Advisory]:
        """The advisories with these ids (unknown ids skipped), ordered by id."""
        out: list[Advisory] = []
        with self._read() as s:
            for start in range(0, len(ids), _CHUNK):
                chunk = list(ids[start : start + _CHUNK])
                rows = s.exec(select(AdvisoryRow).where(col(AdvisoryRow.id).in_(chunk))).all()
                out += _load(s, rows)
        return sorted(out, key=lambda adv: id_key(adv.id))

    def suppressed(self, *, repo_id: str | None = None) -> list[SuppressedChange]:
        """Recorded suppressed changes, oldest first."""
        q = (
            sa.select(SuppressedChangeRow, col(RepoRow.repo_id))
            .join(RepoRow, col(RepoRow.id) == col(SuppressedChangeRow.repo_pk))
            .order_by(col(SuppressedChangeRow.id))
        )
        if repo_id is not None:
            q = q.where(col(RepoRow.repo_id) == repo_id)
        with self._read() as s:
            rows = s.execute(q).all()
        return [
            SuppressedChange(
                RepoId(rid),
                Sha(r.sha),
                Artifact(r.grp),
                Severity(r.severity),
                r.reason,
                json.loads(r.change),
                r.recorded_at,
            )
            for r, rid in rows
        ]

    def counts(self) -> dict[str, int]:
        """Row counts per advisory table (for tests and diagnostics)."""
        tables = AdvisoryRow.metadata.tables
        with self._read() as s:
            count = sa.select(sa.func.count())
            return {
                t: int(s.execute(count.select_from(tables[t])).scalar_one())
                for t in ADVISORY_TABLES
            }

    @contextmanager
    def _read(self) -> Iterator[Session]:
        try:
            with Session(self.engine) as s:
                yield s
        except sa_exc.SQLAlchemyError as exc:
            raise StoreError(f"advisory store failed: {exc}") from exc
