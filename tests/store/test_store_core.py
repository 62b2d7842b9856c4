"""The store on real SQLite and PostgreSQL: migrations, resolve, snapshots, dedupe, atomicity."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from storekit import head_revision

from tracker.shared.domain import Commit, RepoId, SafetensorsHeader, Sha, TensorInfo, TreeEntry
from tracker.shared.errors import StoreError, StoreNotFoundError
from tracker.store import EventKind, FileVersion, RepoStatus, Store
from tracker.store.schema import ALL_TABLES, METADATA

RID = RepoId("acme/tiny")
T0 = datetime(2025, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def pg_db(pg_database: Callable[[str], AbstractContextManager[str]]) -> Iterator[str]:
    """One migrated PostgreSQL database for this module (tests truncate it, see `url`)."""
    with pg_database("store") as url:
        Store.open(url).close()
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store URL: a fresh SQLite file, or the module's PostgreSQL database emptied."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'tracker.db'}"
    pg = str(request.getfixturevalue("pg_db"))
    engine = sa.create_engine(pg)
    with engine.begin() as conn:
        conn.execute(sa.text(f"TRUNCATE {', '.join(ALL_TABLES)} RESTART IDENTITY CASCADE"))
    engine.dispose()
    return pg


@pytest.fixture
def store(url: str) -> Iterator[Store]:
    s = Store.open(url)
    yield s
    s.close()


def sha(n: int) -> Sha:
    return Sha(f"{n:x}".ljust(40, "0"))


def mk_commit(n: int, parent: int | None) -> Commit:
    return Commit(
        sha=sha(n),
        parents=(sha(parent),) if parent is not None else (),
        date=T0 + timedelta(hours=n),
        title=f"commit {n}",
        message=f"body {n}",
        authors=("alice", "bob"),
    )


def add_chain(store: Store, n: int) -> list[Sha]:
    store.ensure_repo(RID, source_kind="hub", url=None, ref="main")
    tree = [TreeEntry("config.json", "a" * 40, 10)]
    prev = None
    out = []
    for i in range(1, n + 1):
        c = mk_commit(i, i - 1 if i > 1 else None)
        files = {"config.json": FileVersion.content(f'{{"v": {i}}}'.encode())}
        store.store_revision(RID, c, tree, files, previous=prev)
        prev = c.sha
        out.append(c.sha)
    return out


def test_migrated_schema_matches_the_tables(store: Store) -> None:
    with store.engine.connect() as conn:
        ctx = MigrationContext.configure(
            conn, opts={"compare_type": True, "compare_server_default": True}
        )
        diffs = compare_metadata(ctx, METADATA)
        version = ctx.get_current_revision()
        tables = set(sa.inspect(conn).get_table_names())
    assert diffs == []
    assert tables == {*ALL_TABLES, "alembic_version"}
    assert version == head_revision()


def test_reopen_keeps_data_and_sqlite_pragmas(url: str) -> None:
    s = Store.open(url)
    add_chain(s, 2)
    s.close()
    s = Store.open(url)
    assert [r.seq for r in s.revisions(RID)] == [1, 2]
    if url.startswith("sqlite"):
        with s.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
    s.close()


def test_revisions_round_trip_domain_values(store: Store) -> None:
    shas = add_chain(store, 3)
    revs = store.revisions(RID)
    assert [r.commit for r in revs] == [mk_commit(1, None), mk_commit(2, 1), mk_commit(3, 2)]
    assert [r.previous for r in revs] == [None, shas[0], shas[1]]
    assert not any(r.analysed or r.rewritten_away for r in revs)
    assert store.revision(RID, shas[1]).seq == 2


def test_resolve_every_spec(store: Store) -> None:
    shas = add_chain(store, 3)
    assert store.resolve(RID, "HEAD") == shas[2]
    assert store.resolve(RID, "main") == shas[2]
    assert store.resolve(RID, "HEAD~") == shas[1]
    assert store.resolve(RID, "HEAD~2") == shas[0]
    assert store.resolve(RID, shas[1]) == shas[1]
    assert store.resolve(RID, shas[1] + "~1") == shas[0]
    assert store.resolve(RID, "2000") == shas[1]
    twin = Commit(Sha("3" + "0" * 38 + "1"), (), T0, "twin", "", ())
    store.store_revision(RID, twin, [], {}, previous=None)
    with pytest.raises(StoreNotFoundError, match="ambiguous"):
        store.resolve(RID, "3000")
    with pytest.raises(StoreNotFoundError, match="no stored revision matches"):
        store.resolve(RID, "abcd")
    with pytest.raises(StoreNotFoundError, match="only 0 earlier"):
        store.resolve(RID, "HEAD~3")  # the twin, stored last, is HEAD now and has no previous
    with pytest.raises(StoreNotFoundError):
        store.resolve(RID, "f" * 40)
    with pytest.raises(StoreNotFoundError, match="unknown revision 'dev'"):
        store.resolve(RID, "dev")
    with pytest.raises(StoreNotFoundError):
        store.resolve(RepoId("acme/none"), "HEAD")


def test_resolve_before_any_revision(store: Store) -> None:
    store.ensure_repo(RID, source_kind="hub", url=None, ref="main")
    with pytest.raises(StoreNotFoundError, match="nothing ingested"):
        store.resolve(RID, "HEAD")


def test_snapshot_headers_unreadable_and_blob_dedupe(store: Store) -> None:
    store.ensure_repo(RID, source_kind="hub", url=None, ref="main")
    header = SafetensorsHeader({"w": TensorInfo("BF16", (2, 3), 12)}, {"format": "pt"})
    tree = [
        TreeEntry("a.json", "1" * 40, 2),
        TreeEntry("b.json", "1" * 40, 2),
        TreeEntry("m.safetensors", "2" * 40, 100, "3" * 64, None),
        TreeEntry("x.bin", "4" * 40, 9, "5" * 64, {"status": "unsafe", "avScan": {}}),
    ]
    files = {
        "a.json": FileVersion.content(b"{}"),
        "b.json": FileVersion.content(b"{}"),
        "m.safetensors": FileVersion.header(header),
        "tokenizer.json": FileVersion.unreadable("OversizedArtifactError: too big"),
    }
    store.store_revision(RID, mk_commit(1, None), tree, files, previous=None)
    snap = store.snapshot(RID, sha(1))
    assert snap.files == {"a.json": b"{}", "b.json": b"{}"}
    assert snap.headers == {"m.safetensors": header}
    assert snap.unreadable == {"tokenizer.json": "OversizedArtifactError: too big"}
    assert snap.tree == tuple(tree)
    assert snap.entry("x.bin") is not None and snap.entry("x.bin").security == {  # type: ignore[union-attr]
        "status": "unsafe",
        "avScan": {},
    }
    with store.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM blobs")).scalar() == 2


def test_trees_are_stored_compactly(store: Store) -> None:
    store.ensure_repo(RID, source_kind="hub", url=None, ref="main")
    shards = [
        TreeEntry(f"model-{i:05d}-of-00163.safetensors", f"{i:040x}", 5_000_000_000, f"{i:064x}")
        for i in range(1, 164)
    ]
    tree1 = [TreeEntry("config.json", "c" * 40, 10), *shards]
    tree2 = [TreeEntry("config.json", "d" * 40, 11), *shards]
    store.store_revision(RID, mk_commit(1, None), tree1, {}, previous=None)
    store.store_revision(RID, mk_commit(2, 1), tree2, {}, previous=sha(1))
    store.store_revision(RID, mk_commit(3, 2), tree1, {}, previous=sha(2))  # revert: same tree
    with store.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM tree_entries")).scalar() == 165
        assert conn.execute(sa.text("SELECT count(*) FROM trees")).scalar() == 2
    assert store.tree(RID, sha(3)) == tuple(sorted(tree1, key=lambda e: e.path))
    assert store.tree(RID, sha(2))[0] == tree2[0]


def test_failed_store_revision_writes_nothing(store: Store) -> None:
    add_chain(store, 1)
    bad = {"config.json": FileVersion(kind=FileVersion.content(b"").kind, blob_sha256="0" * 64)}
    with pytest.raises(StoreError):
        store.store_revision(RID, mk_commit(2, 1), [], bad, previous=sha(1))
    assert [r.seq for r in store.revisions(RID)] == [1]
    assert store.repo_state(RID).cursor == sha(1)
    with store.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM revision_files")).scalar() == 1


def test_store_revision_is_idempotent(store: Store) -> None:
    add_chain(store, 2)
    files = {"config.json": FileVersion.content(b"other")}
    again = store.store_revision(RID, mk_commit(2, 1), [], files, previous=sha(1))
    assert again.seq == 2
    assert store.snapshot(RID, sha(2)).files == {"config.json": b'{"v": 2}'}


def test_pending_analysis_and_mark_analysed(store: Store) -> None:
    shas = add_chain(store, 3)
    assert store.pending_analysis(RID) == shas
    store.mark_analysed(RID, shas[0], now=T0)
    store.mark_analysed(RID, shas[0])
    assert store.pending_analysis(RID) == shas[1:]
    assert store.revisions(RID)[0].analysed
    store.rewrite(RID, dropped=[shas[2]], cursor=shas[1], details={"why": "test"}, now=T0)
    assert store.pending_analysis(RID) == [shas[1]]
    (event,) = store.events(RID)
    assert event.kind is EventKind.FORCE_PUSH and event.at == T0
    assert event.details == {"why": "test", "dropped": [shas[2]], "fork_point": shas[1]}
    with pytest.raises(StoreNotFoundError):
        store.mark_analysed(RID, sha(99))


def test_poll_bookkeeping(store: Store) -> None:
    store.ensure_repo(RID, source_kind="git", url="/x", ref="dev")
    store.record_poll(RID, status=RepoStatus.FAILING, error="boom", now=T0)
    store.record_poll(RID, status=RepoStatus.FAILING, error="boom2", now=T0 + timedelta(minutes=1))
    st = store.repo_state(RID)
    assert (st.status, st.consecutive_failures, st.last_error) == (RepoStatus.FAILING, 2, "boom2")
    assert st.last_poll_at == T0 + timedelta(minutes=1) and st.last_success_at is None
    assert (st.source_kind, st.url, st.ref) == ("git", "/x", "dev")
    store.record_poll(RID, status=RepoStatus.OK, error=None, now=T0 + timedelta(minutes=2))
    st = store.repo_state(RID)
    assert (st.status, st.consecutive_failures, st.last_error) == (RepoStatus.OK, 0, None)
    assert st.last_success_at == T0 + timedelta(minutes=2)
    assert [s.repo_id for s in store.repo_states()] == [RID]
    with pytest.raises(StoreNotFoundError):
        store.repo_state(RepoId("acme/none"))


def test_open_bad_url_is_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="cannot open store"):
        Store.open("postgresql+psycopg://nobody@127.0.0.1:1/none")


def test_ingest_with_force_push_on_this_backend(store: Store) -> None:
    from tracker.ingest.snapshots import poll_repo
    from tracker.sources.fake import FakeSource
    from tracker.watchlist import WatchedRepo

    src = FakeSource()
    a = src.commit(RID, {"config.json": b'{"a": 1}', "README.md": b"# x"}, "a")
    b = src.commit(RID, {"config.json": b'{"a": 2}'}, "b")
    assert poll_repo(store, src, WatchedRepo(RID)).new_revisions == (a, b)
    src.set_ref(RID, "main", a)
    c = src.commit(RID, {"README.md": b"# y"}, "c")
    report = poll_repo(store, src, WatchedRepo(RID))
    assert report.new_revisions == (c,) and report.rewritten == 1
    assert store.snapshot(RID, c).files == {"config.json": b'{"a": 1}', "README.md": b"# y"}
    assert store.snapshot(RID, b).files["config.json"] == b'{"a": 2}'
    assert [(r.seq, r.rewritten_away) for r in store.revisions(RID)] == [
        (1, False),
        (2, True),
        (3, False),
    ]
    assert store.resolve(RID, "HEAD~1") == a


def test_timestamps_are_aware_utc_and_naive_ones_are_refused(store: Store) -> None:
    store.ensure_repo(RID, source_kind="hub", url=None, ref="main")
    plus2 = timezone(timedelta(hours=2))
    store.record_poll(
        RID, status=RepoStatus.OK, error=None, now=datetime(2025, 1, 1, 14, tzinfo=plus2)
    )
    st = store.repo_state(RID)
    assert st.last_poll_at == datetime(2025, 1, 1, 12, tzinfo=UTC)
    assert st.last_poll_at is not None and st.last_poll_at.tzinfo is UTC
    with pytest.raises(StoreError, match="naive datetime 2025-01-01T12:00:00"):
        store.record_poll(RID, status=RepoStatus.OK, error=None, now=datetime(2025, 1, 1, 12))
    assert store.repo_state(RID).last_poll_at == datetime(2025, 1, 1, 12, tzinfo=UTC)


def test_advisory_and_analysis_rows_need_their_revision(store: Store) -> None:
    from tracker.advisories.service import publish
    from tracker.store.advisories import AdvisoryStore

    add_chain(store, 1)
    kw: dict[str, Any] = dict(
        changes=(), estimate_before=None, estimate_after=None, repo_url="http://h/acme/tiny",
        overrides=None, prefix="T", now=T0,
    )  # fmt: skip
    advisories = AdvisoryStore(store.engine)
    with pytest.raises(StoreNotFoundError, match=f"revision {sha(2)} is not in the store"):
        publish(advisories, repo_id=RID, commit=mk_commit(2, 1), previous=sha(1), **kw)
    with pytest.raises(StoreNotFoundError, match="acme/none is not in the store"):
        publish(
            advisories, repo_id=RepoId("acme/none"), commit=mk_commit(2, 1), previous=None, **kw
        )
    assert publish(advisories, repo_id=RID, commit=mk_commit(1, None), previous=None, **kw) == []
    # The database itself refuses orphans, whoever writes (foreign keys, on both backends).
    with pytest.raises(sa.exc.IntegrityError), store.engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO advisory_revisions (repo_pk, sha, published_at) VALUES (1, :sha, :at)"
            ),
            {"sha": sha(3), "at": datetime(2025, 1, 1)},
        )


def test_head_and_current_revision_without_alembic_agree_with_alembic(tmp_path: Path) -> None:
    """The store opens without importing Alembic when its schema is at head: the head read from
    the migration files' lines and the version read with SQLAlchemy equal Alembic's own answers,
    on an empty database, a migrated one, and one at an older migration."""
    from alembic.migration import MigrationContext

    from tracker.store.engine import create_engine, current_revision, upgrade
    from tracker.store.engine import head_revision as fast_head

    assert fast_head() == head_revision()
    engine = create_engine(f"sqlite:///{tmp_path / 'a.db'}")
    try:

        def alembic_current() -> str | None:
            with engine.connect() as conn:
                return MigrationContext.configure(conn).get_current_revision()

        assert current_revision(engine) is None and alembic_current() is None
        upgrade(engine, "0008")
        assert current_revision(engine) == alembic_current() == "0008"
        upgrade(engine)
        assert current_revision(engine) == alembic_current() == head_revision()
    finally:
        engine.dispose()
