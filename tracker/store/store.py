"""The snapshot store: every ingested revision of every watched repo, its tree and tracked files.

SQLite (WAL, foreign keys on, busy timeout) or PostgreSQL through one SQLAlchemy URL; the schema is
brought to Alembic `head` on open. Methods take and return domain values; SQLAlchemy errors become
StoreError here (`_session`), and a repo or revision it does not hold is a StoreNotFoundError.
Timestamps are timezone-aware in and out (`tracker.store.base`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session
from sqlmodel import col

from tracker.shared.domain import (
    REF_NAME,
    Commit,
    GGUFHeader,
    RepoId,
    SafetensorsHeader,
    Sha,
    Snapshot,
    TreeEntry,
    is_full_sha,
)
from tracker.shared.errors import InvalidRevisionError, StoreError, StoreNotFoundError, TrackerError
from tracker.store.base import utc_now
from tracker.store.blobs import get_blobs, put_blob
from tracker.store.engine import (
    create_engine,
    display_url,
    insert_ignore,
    require_schema,
    transaction,
    upgrade,
)
from tracker.store.ops import observe
from tracker.store.rows import pk as _pk
from tracker.store.rows import to_stored as _to_stored
from tracker.store.tables import (
    EventRow,
    IngestionStateRow,
    RepoRow,
    RevisionFileRow,
    RevisionRow,
)
from tracker.store.trees import load_tree, put_tree
from tracker.store.values import (
    AnalysisOverrun,
    Event,
    EventKind,
    FileKind,
    FileVersion,
    RepoState,
    RepoStatus,
    StoredRevision,
    decode_gguf,
    decode_header,
)

_SEQ_ATTEMPTS = 5
_HEX = re.compile(r"^[0-9a-f]{4,40}$")
# A revision name: a ref name as git's check-ref-format accepts it (`tracker.shared.domain.REF_NAME`,
# the watchlist's `ref` check too) - a sha, a short sha and HEAD are such names - optionally
# followed by `~n` or `~`. The same text is the OpenAPI schema's pattern (`tracker.api.params`):
# ECMA and Python regexes read it alike.
_REF = REF_NAME
REVISION_PATTERN = "^" + _REF + "(?:~[0-9]*)?$"
_REVISION = re.compile("(" + _REF + ")(?:~([0-9]*))?")


def parse_revision(spec: str) -> tuple[str, int]:
    """`spec` (a sha, short sha, ref name or `HEAD`, optionally followed by `~n` or `~`;
    surrounding blanks ignored) as its base and the number of steps back; InvalidRevisionError
    for a name no revision can have (`REVISION_PATTERN`)."""
    m = _REVISION.fullmatch(spec.strip())
    if m is None:
        raise InvalidRevisionError(
            f"cannot parse revision {spec!r}: not a sha, a ref name or HEAD, each with an "
            "optional ~n"
        )
    n_text = m.group(2)
    return m.group(1), 0 if n_text is None else int(n_text or "1")


class Store:
    """Repository of ingested revisions; see the module docstring. Thread-safe per call."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    @classmethod
    def open(cls, url: str, *, migrate: bool = True) -> Store:
        """Connect to `url`, bring the schema to head, and return the store (StoreError on failure).

        `migrate=False` (read-only commands) writes nothing: a database without a schema is a
        NoStoreError, one behind this tracker's migrations a StoreError that says how to migrate.
        """
        engine = None
        try:
            engine = create_engine(url)
            if migrate:
                upgrade(engine)
            else:
                require_schema(engine, display_url(url))
        except TrackerError:
            if engine is not None:
                engine.dispose()
            raise
        except Exception as exc:
            if engine is not None:
                engine.dispose()
            raise StoreError(f"cannot open store at {sa.make_url(url)!r}: {exc}") from exc
        return cls(engine)

    @classmethod
    def unopened(cls, url: str) -> Store:
        """The store at `url` without connecting (nothing checked or migrated): for a server that
        starts while its database is down and asks again at each request."""
        return cls(create_engine(url))

    def close(self) -> None:
        self.engine.dispose()

    def _session(self) -> AbstractContextManager[Session]:
        """One reading transaction: committed on success, rolled back on any error (→ StoreError)."""
        return transaction(self.engine, "store")

    def _writing(self) -> AbstractContextManager[Session]:
        """One writing transaction (it takes SQLite's write lock first; see `engine`)."""
        return transaction(self.engine, "store", write=True)

    # -- repos -------------------------------------------------------------------------------

    def _repo(self, s: Session, repo_id: str) -> RepoRow:
        row = s.execute(
            sa.select(RepoRow).where(col(RepoRow.repo_id) == repo_id)
        ).scalar_one_or_none()
        if row is None:
            raise StoreNotFoundError(f"{repo_id} has not been ingested (not in the store)")
        return row

    def ensure_repo(
        self, repo_id: RepoId, *, source_kind: str, url: str | None, ref: str
    ) -> RepoState:
        """Create the repo's row (and state) if missing, else update its source and ref;
        return its state (one transaction)."""
        return self.start_poll(repo_id, source_kind=source_kind, url=url, ref=ref)[1]

    def start_poll(
        self, repo_id: RepoId, *, source_kind: str, url: str | None, ref: str
    ) -> tuple[str | None, RepoState]:
        """`ensure_repo`, also returning the ref the store followed before (None: the repo was
        not in the store): what a poll starts with, in one transaction."""
        with self._writing() as s:
            # Another process may create the same repo at the same time: its rows are ours too.
            repos = RepoRow.__table__  # type: ignore[attr-defined]
            values = {"repo_id": repo_id, "source_kind": source_kind, "url": url, "ref": ref}
            created = insert_ignore(s, repos, values, ["repo_id"])
            row = self._repo(s, repo_id)
            old_ref = None if created else row.ref
            states = IngestionStateRow.__table__  # type: ignore[attr-defined]
            insert_ignore(s, states, {"repo_pk": _pk(row)}, ["repo_pk"])
            if (row.source_kind, row.url, row.ref) != (source_kind, url, ref):
                row.source_kind, row.url, row.ref = source_kind, url, ref
            s.flush()
            return old_ref, self._state(s, row)

    def _state(self, s: Session, repo: RepoRow) -> RepoState:
        st = s.get(IngestionStateRow, _pk(repo))
        if st is None:  # pragma: no cover - created with the repo
            raise StoreError(f"{repo.repo_id}: ingestion state row missing")
        count = s.execute(
            sa.select(sa.func.count()).where(col(RevisionRow.repo_pk) == _pk(repo))
        ).scalar_one()
        return RepoState(
            repo_id=RepoId(repo.repo_id),
            source_kind=repo.source_kind,
            url=repo.url,
            ref=repo.ref,
            cursor=Sha(st.cursor_sha) if st.cursor_sha else None,
            status=RepoStatus(st.state),
            last_poll_at=st.last_poll_at,
            last_success_at=st.last_success_at,
            consecutive_failures=st.consecutive_failures,
            last_error=st.last_error,
            revisions=int(count),
            could_not_analyse=tuple(_could_not_analyse(s, repo).items()),
        )

    def repo_state(self, repo_id: RepoId) -> RepoState:
        """The repo's source, cursor and poll bookkeeping; StoreNotFoundError if never seen."""
        with self._session() as s:
            return self._state(s, self._repo(s, repo_id))

    def repo_states(self) -> list[RepoState]:
        """Every repo in the store, by repo id."""
        with self._session() as s:
            rows = s.execute(sa.select(RepoRow).order_by(col(RepoRow.repo_id))).scalars().all()
            return [self._state(s, r) for r in rows]

    def last_ingested_at(self, repo_id: RepoId | None = None) -> datetime | None:
        """When the newest revision of `repo_id` (of any repo: None) was ingested, None when the
        store holds none: the time a feed with nothing to show was last brought up to date."""
        q = sa.select(sa.func.max(RevisionRow.ingested_at))
        if repo_id is not None:
            q = q.join(RepoRow, col(RepoRow.id) == col(RevisionRow.repo_pk)).where(
                col(RepoRow.repo_id) == repo_id
            )
        with self._session() as s:
            found = s.execute(q).scalar_one_or_none()
        if found is None:
            return None
        return found if found.tzinfo is not None else found.replace(tzinfo=UTC)

    def record_poll(
        self,
        repo_id: RepoId,
        *,
        status: RepoStatus,
        error: str | None,
        now: datetime | None = None,
        seconds: float | None = None,
    ) -> None:
        """Record a poll's outcome: OK resets the failure count; anything else increments it.

        With `seconds` (how long the poll's ingest took), it is counted as one poll in the
        operations counters too (`polls`, `poll_failures` when not OK, the ingest histogram);
        without, it records a later stage's failure of the repo (its analysis), not a poll."""
        now = now or utc_now()
        with self._writing() as s:
            repo = self._repo(s, repo_id)
            st = s.get(IngestionStateRow, _pk(repo))
            assert st is not None
            st.last_poll_at = now
            st.state = status.value
            if seconds is not None:
                st.polls += 1
                st.poll_failures += status is not RepoStatus.OK
                st.ingest_seconds_sum += seconds
                st.ingest_seconds_buckets = observe(st.ingest_seconds_buckets, seconds)
            if status is RepoStatus.OK:
                st.last_success_at = now
                st.consecutive_failures = 0
                st.last_error = None
            else:
                st.consecutive_failures += 1
                st.last_error = error

    # -- events ------------------------------------------------------------------------------

    def record_event(
        self,
        repo_id: RepoId,
        kind: EventKind,
        details: Mapping[str, Any],
        now: datetime | None = None,
    ) -> None:
        with self._writing() as s:
            repo = self._repo(s, repo_id)
            s.add(
                EventRow(repo_pk=_pk(repo), at=now or utc_now(), kind=kind, details=dict(details))
            )

    def events(self, repo_id: RepoId) -> list[Event]:
        """The repo's events, oldest first."""
        with self._session() as s:
            repo = self._repo(s, repo_id)
            rows = s.execute(
                sa.select(EventRow)
                .where(col(EventRow.repo_pk) == _pk(repo))
                .order_by(col(EventRow.id))
            ).scalars()
            return [Event(RepoId(repo.repo_id), r.at, EventKind(r.kind), r.details) for r in rows]

    # -- revisions ---------------------------------------------------------------------------

    def _rev(self, s: Session, repo: RepoRow, sha: str) -> RevisionRow:
        row = s.execute(
            sa.select(RevisionRow).where(
                col(RevisionRow.repo_pk) == _pk(repo), col(RevisionRow.sha) == sha
            )
        ).scalar_one_or_none()
        if row is None:
            raise StoreNotFoundError(f"{repo.repo_id}: revision {sha} is not in the store")
        return row

    def revisions(self, repo_id: RepoId, *, include_rewritten: bool = True) -> list[StoredRevision]:
        """Every ingested revision, oldest first (ingestion order, `seq`)."""
        with self._session() as s:
            repo = self._repo(s, repo_id)
            q = sa.select(RevisionRow).where(col(RevisionRow.repo_pk) == _pk(repo))
            if not include_rewritten:
                q = q.where(col(RevisionRow.rewritten_away) == sa.false())
            rows = s.execute(q.order_by(col(RevisionRow.seq))).scalars().all()
            return [_to_stored(r) for r in rows]

    def revision_page(
        self, repo_id: RepoId, *, newest_first: bool, after_seq: int | None, limit: int
    ) -> list[StoredRevision]:
        """At most `limit` ingested revisions (rewritten-away ones included) in `seq` order,
        oldest or newest first, starting after `seq` `after_seq` (None: from the start): a page
        of `revisions` read with one bounded query."""
        with self._session() as s:
            repo = self._repo(s, repo_id)
            seq = col(RevisionRow.seq)
            q = sa.select(RevisionRow).where(col(RevisionRow.repo_pk) == _pk(repo))
            if after_seq is not None:
                q = q.where(seq < after_seq if newest_first else seq > after_seq)
            q = q.order_by(seq.desc() if newest_first else seq).limit(limit)
            return [_to_stored(r) for r in s.execute(q).scalars().all()]

    def revision(self, repo_id: RepoId, sha: Sha) -> StoredRevision:
        with self._session() as s:
            return _to_stored(self._rev(s, self._repo(s, repo_id), sha))

    def resolve(self, repo_id: RepoId, spec: str) -> Sha:
        """Resolve `spec` to a stored full sha.

        `spec` is a full sha, a unique short sha (4+ hex digits), the watched ref's name, or
        `HEAD` (the ref's cursor), each optionally followed by `~n`/`~` (n steps back along the
        ingested chain, `previous`). InvalidRevisionError for a name no revision can have
        (`parse_revision`); StoreNotFoundError otherwise (including an ambiguous short sha,
        listing the candidates).
        """
        try:
            base, steps = parse_revision(spec)
        except InvalidRevisionError as exc:
            raise InvalidRevisionError(f"{repo_id}: {exc}") from None
        with self._session() as s:
            repo = self._repo(s, repo_id)
            if base in ("HEAD", repo.ref, f"refs/heads/{repo.ref}"):
                st = s.get(IngestionStateRow, _pk(repo))
                if st is None or st.cursor_sha is None:
                    raise StoreNotFoundError(f"{repo_id}: nothing ingested yet for {base}")
                row = self._rev(s, repo, st.cursor_sha)
            elif is_full_sha(base):
                row = self._rev(s, repo, base)
            elif _HEX.match(base):
                rows = (
                    s.execute(
                        sa.select(RevisionRow).where(
                            col(RevisionRow.repo_pk) == _pk(repo),
                            col(RevisionRow.sha).startswith(base),
                        )
                    )
                    .scalars()
                    .all()
                )
                if not rows:
                    raise StoreNotFoundError(f"{repo_id}: no stored revision matches {base!r}")
                if len(rows) > 1:
                    shas = ", ".join(sorted(r.sha for r in rows))
                    raise StoreNotFoundError(f"{repo_id}: {base!r} is ambiguous: {shas}")
                row = rows[0]
            else:
                raise StoreNotFoundError(
                    f"{repo_id}: unknown revision {base!r} (the store tracks ref {repo.ref!r}; "
                    "use HEAD, the ref name or a sha)"
                )
            for i in range(steps):
                if row.previous_sha is None:
                    raise StoreNotFoundError(
                        f"{repo_id}: {spec!r} goes {steps} back but only {i} earlier revisions "
                        "were ingested"
                    )
                row = self._rev(s, repo, row.previous_sha)
            return Sha(row.sha)

    def revision_marks(self, repo_id: RepoId) -> list[tuple[Sha, bool, bool]]:
        """(sha, analysed, rewritten away) of every ingested revision, oldest first: what the
        analysis of a poll needs, in one light query (no commit metadata decoded)."""
        with self._session() as s:
            repo = self._repo(s, repo_id)
            rows = s.execute(
                sa.select(
                    col(RevisionRow.sha),
                    col(RevisionRow.analysed_at).is_not(None),
                    col(RevisionRow.rewritten_away),
                )
                .where(col(RevisionRow.repo_pk) == _pk(repo))
                .order_by(col(RevisionRow.seq))
            ).all()
            return [(Sha(r[0]), bool(r[1]), bool(r[2])) for r in rows]

    def pending_analysis(self, repo_id: RepoId) -> list[Sha]:
        """Live (not rewritten-away) revisions never marked analysed, oldest first."""
        with self._session() as s:
            repo = self._repo(s, repo_id)
            rows = s.execute(
                sa.select(col(RevisionRow.sha))
                .where(
                    col(RevisionRow.repo_pk) == _pk(repo),
                    col(RevisionRow.analysed_at).is_(None),
                    col(RevisionRow.rewritten_away) == sa.false(),
                )
                .order_by(col(RevisionRow.seq))
            ).all()
            return [Sha(r[0]) for r in rows]

    def mark_analysed(self, repo_id: RepoId, sha: Sha, now: datetime | None = None) -> None:
        """Mark one revision analysed (idempotent: keeps the first time); an earlier
        could-not-analyse record of it is cleared."""
        with self._writing() as s:
            row = self._rev(s, self._repo(s, repo_id), sha)
            if row.analysed_at is None:
                row.analysed_at = now or utc_now()
            row.could_not_analyse = None

    def record_could_not_analyse(self, repo_id: RepoId, sha: Sha, overrun: AnalysisOverrun) -> None:
        """Record that the analysis of a revision overran its budget (it stays not analysed;
        `could_not_analyse` lists it until a later analysis succeeds)."""
        with self._writing() as s:
            row = self._rev(s, self._repo(s, repo_id), sha)
            if row.analysed_at is None:
                row.could_not_analyse = overrun.as_json()

    def could_not_analyse(self, repo_id: RepoId) -> dict[Sha, AnalysisOverrun]:
        """The live revisions of a repo recorded as could not analyse, oldest first."""
        with self._session() as s:
            return _could_not_analyse(s, self._repo(s, repo_id))

    # -- trees, files, snapshots -------------------------------------------------------------

    def tree(self, repo_id: RepoId, sha: Sha) -> tuple[TreeEntry, ...]:
        """The full tree stored for a revision, sorted by path."""
        with self._session() as s:
            return load_tree(s, self._rev(s, self._repo(s, repo_id), sha).tree_hash)

    def file_versions(self, repo_id: RepoId, sha: Sha) -> dict[str, FileVersion]:
        """Tracked paths at a revision → what is stored for each (no bytes; carry-forward ready)."""
        with self._session() as s:
            rev = self._rev(s, self._repo(s, repo_id), sha)
            rows = s.execute(
                sa.select(RevisionFileRow).where(col(RevisionFileRow.revision_pk) == rev.id)
            ).scalars()
            return {
                r.path: FileVersion(FileKind(r.kind), r.blob_sha256, r.reason, None, r.fetched)
                for r in rows
            }

    def read_blob(self, sha256: str) -> bytes:
        with self._session() as s:
            return get_blobs(s, [sha256])[sha256]

    def snapshot(self, repo_id: RepoId, sha: Sha) -> Snapshot:
        """The revision's tree, tracked file bytes, parsed headers and unreadable reasons."""
        with self._session() as s:
            repo = self._repo(s, repo_id)
            rev = self._rev(s, repo, sha)
            tree = load_tree(s, rev.tree_hash)
            rows = (
                s.execute(
                    sa.select(RevisionFileRow).where(col(RevisionFileRow.revision_pk) == rev.id)
                )
                .scalars()
                .all()
            )
            blobs = get_blobs(s, [r.blob_sha256 for r in rows if r.blob_sha256])
        files: dict[str, bytes] = {}
        headers: dict[str, SafetensorsHeader] = {}
        gguf: dict[str, GGUFHeader] = {}
        unreadable: dict[str, str] = {}
        for r in sorted(rows, key=lambda r: r.path):
            if r.kind == FileKind.CONTENT and r.blob_sha256:
                files[r.path] = blobs[r.blob_sha256]
            elif r.kind == FileKind.HEADER and r.blob_sha256:
                headers[r.path] = decode_header(blobs[r.blob_sha256])
            elif r.kind == FileKind.GGUF_HEADER and r.blob_sha256:
                gguf[r.path] = decode_gguf(blobs[r.blob_sha256])
            else:
                unreadable[r.path] = r.reason or "unreadable"
        return Snapshot(
            repo_id=RepoId(repo.repo_id),
            sha=Sha(rev.sha),
            tree=tree,
            files=files,
            headers=headers,
            unreadable=unreadable,
            gguf=gguf,
        )

    # -- writing (ingest) --------------------------------------------------------------------

    def store_revision(
        self,
        repo_id: RepoId,
        commit: Commit,
        tree: Sequence[TreeEntry],
        files: Mapping[str, FileVersion],
        *,
        previous: Sha | None,
        now: datetime | None = None,
    ) -> StoredRevision:
        """Store one revision with its tree and tracked files and move the cursor to it, in ONE
        transaction. `files` must cover every tracked path (new bytes or carried versions).

        Idempotent: storing a sha already stored only moves the cursor (and revives a
        rewritten-away revision that the ref points at again).
        """
        at = now or utc_now()
        with self._writing() as s:
            repo = self._repo(s, repo_id)
            st = s.get(IngestionStateRow, _pk(repo))
            assert st is not None
            row = self._find(s, _pk(repo), commit.sha)
            if row is None:
                row = self._insert_revision(s, repo, commit, tree, files, previous, at)
            elif row.rewritten_away:
                row.rewritten_away = False
            st.cursor_sha = commit.sha
            s.flush()
            return _to_stored(row)

    def replace_file(self, repo_id: RepoId, sha: Sha, path: str, fv: FileVersion) -> None:
        """`tracker repair` only: what is stored for `path` at revision `sha` becomes `fv` (its
        bytes stored), in place of a "could not read" an earlier release recorded from a fault of
        the transport."""
        with self._writing() as s:
            rev = self._rev(s, self._repo(s, repo_id), sha)
            row = s.execute(
                sa.select(RevisionFileRow).where(
                    col(RevisionFileRow.revision_pk) == rev.id, col(RevisionFileRow.path) == path
                )
            ).scalar_one_or_none()
            if row is None:
                raise StoreNotFoundError(f"{repo_id}@{sha}: {path} is not stored")
            digest = put_blob(s, fv.data) if fv.data is not None else fv.blob_sha256
            row.kind = fv.kind.value
            row.blob_sha256 = digest if fv.kind is not FileKind.UNREADABLE else None
            row.reason = fv.reason
            s.add(row)  # `fetched` stays: whether this revision fetched it or carried it on

    @staticmethod
    def _find(s: Session, repo_pk: int, sha: str) -> RevisionRow | None:
        return s.execute(
            sa.select(RevisionRow).where(
                col(RevisionRow.repo_pk) == repo_pk, col(RevisionRow.sha) == sha
            )
        ).scalar_one_or_none()

    def _insert_revision(
        self,
        s: Session,
        repo: RepoRow,
        commit: Commit,
        tree: Sequence[TreeEntry],
        files: Mapping[str, FileVersion],
        previous: Sha | None,
        at: datetime,
    ) -> RevisionRow:
        """Insert a new revision row and its files; a concurrent writer that stored the same
        revision first wins (its row is returned, our files are not added: it added them)."""
        pk = _pk(repo)
        values = {
            "repo_pk": pk,
            "sha": commit.sha,
            "parents": list(commit.parents),
            "date": commit.date.isoformat(),
            "title": commit.title,
            "message": commit.message,
            "authors": list(commit.authors),
            "previous_sha": previous,
            "tree_hash": put_tree(s, pk, tree),
            "ingested_at": at,
            "rewritten_away": False,
        }
        table = RevisionRow.__table__  # type: ignore[attr-defined]
        for _ in range(_SEQ_ATTEMPTS):
            seq = s.execute(
                sa.select(sa.func.coalesce(sa.func.max(col(RevisionRow.seq)), 0)).where(
                    col(RevisionRow.repo_pk) == pk
                )
            ).scalar_one()
            # No conflict target: neither the (repo, sha) nor the (repo, seq) key may collide.
            inserted = insert_ignore(s, table, {**values, "seq": int(seq) + 1}, None)
            row = self._find(s, pk, commit.sha)
            if row is not None and not inserted:
                return row  # a concurrent writer stored this revision
            if row is not None:
                break
        else:
            raise StoreError(
                f"{repo.repo_id}@{commit.sha}: no free sequence number (concurrent writers)"
            )
        for path, fv in sorted(files.items()):
            digest = fv.blob_sha256
            if fv.data is not None:
                digest = put_blob(s, fv.data)
            if fv.kind is not FileKind.UNREADABLE and digest is None:
                raise StoreError(f"{repo.repo_id}@{commit.sha}: {path} has no content")
            s.add(
                RevisionFileRow(
                    revision_pk=_pk(row),
                    path=path,
                    kind=fv.kind.value,
                    blob_sha256=digest if fv.kind is not FileKind.UNREADABLE else None,
                    reason=fv.reason,
                    fetched=fv.fetched,
                )
            )
        return row

    def rewrite(
        self,
        repo_id: RepoId,
        *,
        dropped: Sequence[Sha],
        cursor: Sha | None,
        details: Mapping[str, Any],
        now: datetime | None = None,
        kind: EventKind = EventKind.FORCE_PUSH,
        only_from: Sha | None = None,
    ) -> bool:
        """After a force-push: mark `dropped` rewritten-away (never deleted), move the cursor to
        `cursor` (the fork point, or None when nothing stored survives) and record one
        `kind` event (FORCE_PUSH; REF_CHANGED when the watched ref moved) with `details`, in one
        transaction. With `only_from`, only while the cursor is still there (another process
        may have handled the same rewrite first); returns whether it was applied."""
        at = now or utc_now()
        with self._writing() as s:
            repo = self._repo(s, repo_id)
            st = s.get(IngestionStateRow, _pk(repo))
            assert st is not None
            if only_from is not None and st.cursor_sha != only_from:
                return False
            if dropped:
                s.execute(
                    sa.update(RevisionRow)
                    .where(
                        col(RevisionRow.repo_pk) == _pk(repo),
                        col(RevisionRow.sha).in_(list(dropped)),
                    )
                    .values(rewritten_away=True)
                )
            st.cursor_sha = cursor
            s.add(
                EventRow(
                    repo_pk=_pk(repo),
                    at=at,
                    kind=kind.value,
                    details={**details, "dropped": list(dropped), "fork_point": cursor},
                )
            )
            return True


__all__ = ["Store"]


def _could_not_analyse(s: Session, repo: RepoRow) -> dict[Sha, AnalysisOverrun]:
    """The live, unanalysed revisions of `repo` recorded as could not analyse, oldest first."""
    rows = s.execute(
        sa.select(col(RevisionRow.sha), col(RevisionRow.could_not_analyse))
        .where(
            col(RevisionRow.repo_pk) == _pk(repo),
            col(RevisionRow.analysed_at).is_(None),
            col(RevisionRow.could_not_analyse).is_not(None),
            col(RevisionRow.rewritten_away) == sa.false(),
        )
        .order_by(col(RevisionRow.seq))
    ).all()
    return {Sha(sha): AnalysisOverrun.from_json(data) for sha, data in rows if data}
