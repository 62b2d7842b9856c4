"""Advisory tables and AdvisoryStore: records, id counters, per-revision publish markers, suppressions.

Rows never leave this module: reads return `tracker.domain.Advisory` or small frozen values.
Migration 0002 creates exactly these tables. Timestamps are stored as RFC3339 `Z` strings (the
records' own format), which sort correctly as text. A record's `versions` list and `modified`
live in `advisory_versions` rows (ordered by `pos`) and the `modified` column and are spliced
into the stored JSON on read, so an open advisory grows by one row per new revision.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlmodel import Field, Session, SQLModel, col, select

from tracker.domain import Advisory, JSONValue, RepoId, Severity, Sha
from tracker.errors import StoreError


class AdvisoryRow(SQLModel, table=True):
    __tablename__ = "advisories"
    __table_args__ = (
        sa.UniqueConstraint("repo_id", "introduced", "grp", name="uq_advisories_change"),
    )

    id: str = Field(sa_column=sa.Column(sa.String(64), primary_key=True))
    repo_id: str = Field(sa_column=sa.Column(sa.String(200), nullable=False, index=True))
    package_name: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    introduced: str = Field(sa_column=sa.Column(sa.String(40), nullable=False))
    grp: str = Field(sa_column=sa.Column(sa.String(32), nullable=False))
    severity: str = Field(sa_column=sa.Column(sa.String(16), nullable=False))
    state: str = Field(sa_column=sa.Column(sa.String(16), nullable=False))
    published: str = Field(sa_column=sa.Column(sa.String(32), nullable=False))
    modified: str = Field(sa_column=sa.Column(sa.String(32), nullable=False, index=True))
    record: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    pending: str = Field(sa_column=sa.Column(sa.Text, nullable=False))


class AdvisoryVersionRow(SQLModel, table=True):
    __tablename__ = "advisory_versions"

    advisory_id: str = Field(
        sa_column=sa.Column(sa.String(64), sa.ForeignKey("advisories.id"), primary_key=True)
    )
    sha: str = Field(sa_column=sa.Column(sa.String(40), primary_key=True, index=True))
    pos: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))


class AdvisoryCounterRow(SQLModel, table=True):
    __tablename__ = "advisory_counters"

    prefix: str = Field(sa_column=sa.Column(sa.String(16), primary_key=True))
    year: int = Field(sa_column=sa.Column(sa.Integer, primary_key=True, autoincrement=False))
    next_n: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))


class AdvisoryRevisionRow(SQLModel, table=True):
    __tablename__ = "advisory_revisions"

    repo_id: str = Field(sa_column=sa.Column(sa.String(200), primary_key=True))
    sha: str = Field(sa_column=sa.Column(sa.String(40), primary_key=True))
    published_at: str = Field(sa_column=sa.Column(sa.String(32), nullable=False))


class SuppressedChangeRow(SQLModel, table=True):
    __tablename__ = "suppressed_changes"

    id: int | None = Field(default=None, sa_column=sa.Column(sa.Integer, primary_key=True))
    repo_id: str = Field(sa_column=sa.Column(sa.String(200), nullable=False, index=True))
    sha: str = Field(sa_column=sa.Column(sa.String(40), nullable=False))
    grp: str = Field(sa_column=sa.Column(sa.String(32), nullable=False))
    severity: str = Field(sa_column=sa.Column(sa.String(16), nullable=False))
    reason: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    change: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    recorded_at: str = Field(sa_column=sa.Column(sa.String(32), nullable=False))


ADVISORY_TABLES = (
    "advisories",
    "advisory_versions",
    "advisory_counters",
    "advisory_revisions",
    "suppressed_changes",
)


def create_tables(engine: sa.Engine) -> None:
    """Create the advisory tables directly (tests and tools without alembic); idempotent."""
    tables = [SQLModel.metadata.tables[name] for name in ADVISORY_TABLES]
    SQLModel.metadata.create_all(engine, tables=tables)


@dataclass(frozen=True)
class StoredAdvisory:
    """An advisory with its lifecycle state (`open`, `fixed`, `withdrawn`) and pending list."""

    advisory: Advisory
    state: str
    pending: tuple[dict[str, str], ...]


@dataclass(frozen=True)
class SuppressedChange:
    """A change a watchlist suppression kept out of the advisories, recorded with its reason."""

    repo_id: RepoId
    sha: Sha
    group: str
    severity: Severity
    reason: str
    change: dict[str, JSONValue]
    recorded_at: str


class AdvisoryConflictError(StoreError):
    """A concurrent writer published the same revision first; retrying sees its result."""


@dataclass(frozen=True)
class OpenCandidate:
    """An open advisory a new revision may extend or fix: its id, pending list and versions count."""

    id: str
    pending: tuple[dict[str, str], ...]
    n_versions: int


def _to_advisory(row: AdvisoryRow, versions: Sequence[str]) -> Advisory:
    """The full record: the stored one with `modified` and the `versions` list spliced in."""
    record = json.loads(row.record)
    record["modified"] = row.modified
    for aff in record.get("affected") or []:
        aff["versions"] = list(versions)
    return Advisory(
        id=row.id,
        repo_id=RepoId(row.repo_id),
        introduced=Sha(row.introduced),
        group=row.grp,
        severity=Severity(row.severity),
        record=record,
    )


def _load(session: Session, rows: Sequence[AdvisoryRow]) -> list[Advisory]:
    """Full advisories for `rows` (versions fetched in batches), ordered by id."""
    versions: dict[str, list[str]] = {r.id: [] for r in rows}
    ids = list(versions)
    for start in range(0, len(ids), 500):
        q = (
            select(AdvisoryVersionRow.advisory_id, AdvisoryVersionRow.sha)
            .where(col(AdvisoryVersionRow.advisory_id).in_(ids[start : start + 500]))
            .order_by(col(AdvisoryVersionRow.advisory_id), col(AdvisoryVersionRow.pos))
        )
        for advisory_id, sha in session.exec(q).all():
            versions[advisory_id].append(sha)
    return sorted((_to_advisory(r, versions[r.id]) for r in rows), key=lambda a: _id_key(a.id))


def _suppressed(r: SuppressedChangeRow) -> SuppressedChange:
    sev, change = Severity(r.severity), json.loads(r.change)
    return SuppressedChange(
        RepoId(r.repo_id), Sha(r.sha), r.grp, sev, r.reason, change, r.recorded_at
    )


def _dump(record: Any) -> str:
    return json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _stored_record(record: Mapping[str, Any]) -> str:
    """The record as stored: its versions list lives in `advisory_versions` rows instead."""
    out = dict(record)
    out["affected"] = [{**aff, "versions": []} for aff in record.get("affected") or []]
    return _dump(out)


def _versions(record: Mapping[str, Any]) -> list[str]:
    return [str(v) for aff in record.get("affected") or [] for v in aff.get("versions") or []]


class AdvisoryTx:
    """The advisory store inside one transaction (from `AdvisoryStore.transaction()`).

    A record's `versions` list is kept as ordered `advisory_versions` rows and spliced in on read,
    so extending an open advisory by one commit writes one small row, not the whole record.
    """

    def __init__(self, session: Session) -> None:
        self._s = session

    def revision_done(self, repo_id: RepoId, sha: Sha) -> bool:
        return self._s.get(AdvisoryRevisionRow, (repo_id, sha)) is not None

    def introduced_at(self, repo_id: RepoId, sha: Sha) -> list[Advisory]:
        rows = self._s.exec(
            select(AdvisoryRow).where(AdvisoryRow.repo_id == repo_id, AdvisoryRow.introduced == sha)
        ).all()
        return _load(self._s, rows)

    def get(self, advisory_id: str) -> StoredAdvisory | None:
        row = self._s.get(AdvisoryRow, advisory_id)
        if row is None:
            return None
        [adv] = _load(self._s, [row])
        return StoredAdvisory(adv, row.state, tuple(json.loads(row.pending)))

    def open_candidates(self, repo_id: RepoId, previous: Sha, sha: Sha) -> list[OpenCandidate]:
        """Open advisories of `repo_id` whose versions contain `previous` but not yet `sha`, by id."""
        a = SQLModel.metadata.tables["advisories"]
        versions = SQLModel.metadata.tables["advisory_versions"]
        v, v2, v3 = versions.alias("v"), versions.alias("v2"), versions.alias("v3")
        n = sa.select(sa.func.count()).where(v2.c.advisory_id == a.c.id).scalar_subquery()
        has_sha = sa.exists().where(v3.c.advisory_id == a.c.id, v3.c.sha == sha)
        q = (
            sa.select(a.c.id, a.c.pending, n)
            .join(v, sa.and_(v.c.advisory_id == a.c.id, v.c.sha == previous))
            .where(a.c.repo_id == repo_id, a.c.state == "open", ~has_sha)
        )
        out = [
            OpenCandidate(i, tuple(json.loads(p)), int(c)) for i, p, c in self._s.execute(q).all()
        ]
        return sorted(out, key=lambda c: _id_key(c.id))

    def not_withdrawn_introduced_in(
        self, repo_id: RepoId, shas: Sequence[Sha]
    ) -> list[StoredAdvisory]:
        """Advisories of `repo_id` introduced at any of `shas` and not withdrawn, by id."""
        out: list[StoredAdvisory] = []
        wanted = sorted(set(shas))
        for start in range(0, len(wanted), 500):
            rows = self._s.exec(
                select(AdvisoryRow).where(
                    AdvisoryRow.repo_id == repo_id,
                    AdvisoryRow.state != "withdrawn",
                    col(AdvisoryRow.introduced).in_(wanted[start : start + 500]),
                )
            ).all()
            by_id = {r.id: r for r in rows}
            out += [
                StoredAdvisory(a, by_id[a.id].state, tuple(json.loads(by_id[a.id].pending)))
                for a in _load(self._s, rows)
            ]
        return sorted(out, key=lambda s: _id_key(s.advisory.id))

    def fixed_of(self, repo_id: RepoId) -> list[StoredAdvisory]:
        """Advisories of `repo_id` in state "fixed", by id."""
        return self.in_state(repo_id, "fixed")

    def in_state(self, repo_id: RepoId, state: str) -> list[StoredAdvisory]:
        """Advisories of `repo_id` in `state` (open, fixed, withdrawn), by id."""
        rows = self._s.exec(
            select(AdvisoryRow).where(AdvisoryRow.repo_id == repo_id, AdvisoryRow.state == state)
        ).all()
        by_id = {r.id: r for r in rows}
        out = [
            StoredAdvisory(a, by_id[a.id].state, tuple(json.loads(by_id[a.id].pending)))
            for a in _load(self._s, rows)
        ]
        return sorted(out, key=lambda s: _id_key(s.advisory.id))

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
        self._s.add(
            AdvisoryRow(
                id=adv.id,
                repo_id=adv.repo_id,
                package_name=package_name,
                introduced=adv.introduced,
                grp=adv.group,
                severity=adv.severity.value,
                state="open",
                published=str(rec["published"]),
                modified=str(rec["modified"]),
                record=_stored_record(rec),
                pending=_dump(list(pending)),
            )
        )
        self._s.flush()
        self._add_versions(adv.id, _versions(rec), 0)

    def update(self, adv: Advisory, *, state: str, pending: Sequence[dict[str, str]]) -> None:
        """Replace a record (fixed, withdrawn); its versions list may only grow."""
        row = self._s.get(AdvisoryRow, adv.id)
        if row is None:
            raise StoreError(f"advisory {adv.id} does not exist")
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
        row.record = _stored_record(adv.record)
        row.modified = str(adv.record["modified"])
        row.state = state
        row.pending = _dump(list(pending))
        self._s.add(row)
        self._s.flush()
        self._add_versions(adv.id, new[len(have) :], len(have))

    def extend(
        self, items: Sequence[tuple[OpenCandidate, str | None]], sha: Sha, modified: str
    ) -> None:
        """Append `sha` to each candidate's versions and set `modified`; a non-None second item
        replaces the candidate's pending JSON. One batched INSERT and UPDATE for all."""
        if not items:
            return
        self._s.execute(
            sa.insert(AdvisoryVersionRow),
            [{"advisory_id": c.id, "sha": sha, "pos": c.n_versions} for c, _ in items],
        )
        table = SQLModel.metadata.tables["advisories"]
        self._s.execute(
            sa.update(table).where(table.c.id == sa.bindparam("b_id")).values(modified=modified),
            [{"b_id": c.id} for c, _ in items],
        )
        changed = [{"b_id": c.id, "b_pending": p} for c, p in items if p is not None]
        if changed:
            self._s.execute(
                sa.update(table)
                .where(table.c.id == sa.bindparam("b_id"))
                .values(pending=sa.bindparam("b_pending")),
                changed,
            )

    def _add_versions(self, advisory_id: str, shas: Sequence[str], start: int) -> None:
        for i, sha in enumerate(shas):
            self._s.add(AdvisoryVersionRow(advisory_id=advisory_id, sha=sha, pos=start + i))
        self._s.flush()

    def record_suppressed(self, s: SuppressedChange) -> None:
        self._s.add(
            SuppressedChangeRow(
                repo_id=s.repo_id,
                sha=s.sha,
                grp=s.group,
                severity=s.severity.value,
                reason=s.reason,
                change=_dump(s.change),
                recorded_at=s.recorded_at,
            )
        )

    def mark_revision(self, repo_id: RepoId, sha: Sha, at: str) -> None:
        self._s.add(AdvisoryRevisionRow(repo_id=repo_id, sha=sha, published_at=at))
        self._s.flush()


def _id_key(advisory_id: str) -> tuple[str, int, int]:
    """Sort key for `x_P-YEAR-N` ids: prefix, year, then N numerically."""
    head, _, n = advisory_id.rpartition("-")
    prefix, _, year = head.rpartition("-")
    try:
        return (prefix, int(year), int(n))
    except ValueError:
        return (advisory_id, 0, 0)


class AdvisoryStore:
    """Advisory persistence over an SQLAlchemy engine (SQLite or PostgreSQL)."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    @contextmanager
    def transaction(self) -> Iterator[AdvisoryTx]:
        """One transaction: committed when the block exits normally, rolled back on any exception.

        An integrity conflict (another writer got there first) becomes AdvisoryConflictError;
        other database failures become StoreError.
        """
        session = Session(self.engine, expire_on_commit=False)
        try:
            if self.engine.dialect.name == "sqlite":
                # Take SQLite's write lock first (waiting under busy_timeout) so that two writers
                # cannot both read and then deadlock on upgrading to a write (SQLITE_BUSY at once).
                session.exec(sa.text("UPDATE advisory_counters SET next_n = next_n WHERE 0 = 1"))  # type: ignore[call-overload]
            yield AdvisoryTx(session)
            session.commit()
        except sa_exc.IntegrityError as exc:
            session.rollback()
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
        since: str | None = None,
        include_withdrawn: bool = True,
    ) -> list[Advisory]:
        """Advisories filtered by repo, severity and `modified >= since` (RFC3339), ordered by id."""
        q = select(AdvisoryRow)
        if repo_id is not None:
            q = q.where(AdvisoryRow.repo_id == repo_id)
        if severity is not None:
            q = q.where(AdvisoryRow.severity == severity.value)
        if since is not None:
            q = q.where(AdvisoryRow.modified >= since)
        if not include_withdrawn:
            q = q.where(AdvisoryRow.state != "withdrawn")
        with self._read() as s:
            return _load(s, s.exec(q).all())

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
        a = SQLModel.metadata.tables["advisories"]
        q = sa.select(a.c.id).where(a.c.state != "withdrawn")
        if commit is not None:
            v = SQLModel.metadata.tables["advisory_versions"]
            q = q.join(v, v.c.advisory_id == a.c.id).where(v.c.sha == commit)
        if repo_id is not None:
            q = q.where(a.c.repo_id == repo_id)
        if package_name is not None:
            q = q.where(a.c.package_name == package_name)
        with self._read() as s:
            return sorted((str(r[0]) for r in s.execute(q).all()), key=_id_key)

    def modified_of(self, ids: Sequence[str]) -> list[dict[str, str]]:
        """`{"id", "modified"}` for these ids (unknown ids skipped), ordered by id, without
        loading records (what OSV's querybatch answers)."""
        a = SQLModel.metadata.tables["advisories"]
        out: list[dict[str, str]] = []
        with self._read() as s:
            for start in range(0, len(ids), 500):
                q = sa.select(a.c.id, a.c.modified).where(
                    a.c.id.in_(list(ids[start : start + 500]))
                )
                out += [{"id": str(i), "modified": str(m)} for i, m in s.execute(q).all()]
        return sorted(out, key=lambda d: _id_key(d["id"]))

    def get_many(self, ids: Sequence[str]) -> list[Advisory]:
        """The advisories with these ids (unknown ids skipped), ordered by id."""
        out: list[Advisory] = []
        with self._read() as s:
            for start in range(0, len(ids), 500):
                chunk = list(ids[start : start + 500])
                rows = s.exec(select(AdvisoryRow).where(col(AdvisoryRow.id).in_(chunk))).all()
                out += _load(s, rows)
        return sorted(out, key=lambda adv: _id_key(adv.id))

    def suppressed(self, *, repo_id: str | None = None) -> list[SuppressedChange]:
        """Recorded suppressed changes, oldest first."""
        q = select(SuppressedChangeRow).order_by(col(SuppressedChangeRow.id))
        if repo_id is not None:
            q = q.where(SuppressedChangeRow.repo_id == repo_id)
        with self._read() as s:
            rows = s.exec(q).all()
        return [_suppressed(r) for r in rows]

    def counts(self) -> dict[str, int]:
        """Row counts per advisory table (for tests and diagnostics)."""
        tables = SQLModel.metadata.tables
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
