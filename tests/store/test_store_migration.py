"""Migrations 0004 and 0005 carry a database of the previous release over: every row, same values, same
output; 0005 records what withdrew each withdrawn advisory (`withdrawn_by`).

The fixture is made by the previous release itself, not by a stand-in: its code (tracker/, demo/ and
watchlist.yaml at commit PREVIOUS_RELEASE, the last one whose migrations end at 0003) is taken from
git history with `git archive` into a temp dir, and run as a process (`tracker demo` over the
demo's watchlist less DeepSeek-R1, whose 170 files take most of the demo's time; then a small
script on its own API that adds what the demo does not make: a force-push with a withdrawn
advisory, a suppressed change, a failing poll and an event). So every table has rows. Then the
installed `tracker` of this tree opens the store (which migrates it) and:
- every row of every table is there with the same values (timestamps now aware UTC datetimes);
- `advisories export`, `advisories list --json`, `--suppressed --json`, `watch list --json` and
  `history --json` print byte for byte what the previous release printed on the same database;
- the migrated store takes new writes (`tracker demo` again: the force-pushed commit comes back,
  and the advisories its rewrite withdrew are restored through the migrated `withdrawn_by`).
On SQLite and on PostgreSQL. Needs the git history of this repository (a clean clone has it).
"""

from __future__ import annotations

import filecmp
import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from storekit import head_revision, tracker, tracker_env

from tracker.store.generation import GENERATION_TABLES
from tracker.store.lineage import LINEAGE_TABLES
from tracker.store.preflight import PREFLIGHT_TABLES
from tracker.store.schema import ALL_TABLES, METADATA, WEBHOOK_TABLES, WORKER_TABLES

OLD_TABLES = tuple(
    t
    for t in ALL_TABLES
    if t
    not in PREFLIGHT_TABLES + WEBHOOK_TABLES + WORKER_TABLES + GENERATION_TABLES + LINEAGE_TABLES
)
"""The tables the previous release has (0006's preflight table, 0007's push-side tables, 0008's
worker tables and 0019's lineage links are new: empty after migrating; 0012's generation counters
start at one row per domain)."""

REPO_ROOT = Path(__file__).resolve().parents[2]
PREVIOUS_RELEASE = "74b5949d9247f50f7e24d7abf56e2ea734e9af30"

EXTRAS = r"""
import sys
from datetime import UTC, datetime

from tracker.advisories.service import withdraw_rewritten
from tracker.shared.domain import Severity
from tracker.store import EventKind, RepoStatus, Store
from tracker.store.advisories import AdvisoryStore, SuppressedChange

store = Store.open(sys.argv[1])
adv = AdvisoryStore(store.engine)
now = datetime(2026, 12, 1, 8, 0, 5, 123456, tzinfo=UTC)
heads = {s.repo_id: s.cursor for s in store.repo_states()}
target = next(a for a in adv.list_advisories() if heads[a.repo_id] == a.introduced)
rev = store.revision(target.repo_id, target.introduced)
store.rewrite(target.repo_id, dropped=[rev.sha], cursor=rev.previous,
              details={"old_head": rev.sha, "new_head": rev.previous}, now=now)
assert withdraw_rewritten(adv, target.repo_id, [rev.sha], now)
with adv.transaction() as tx:
    tx.record_suppressed(SuppressedChange(
        target.repo_id, rev.previous, "config", Severity.LOW, "suppressed by the fixture",
        {"key": "x", "summary": "x changed"}, "2026-12-01T08:00:05Z"))
other = next(r for r in heads if r != target.repo_id)
store.record_poll(other, status=RepoStatus.FAILING, error="HTTP 503 from the Hub", now=now)
store.record_event(other, EventKind.ACCESS_DENIED, {"error": "gated"}, now=now)
store.close()
print(target.repo_id, rev.sha)
"""


@pytest.fixture(scope="module")
def old_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The previous release's code, from git history."""
    out = tmp_path_factory.mktemp("previous-release")
    archive = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "archive", PREVIOUS_RELEASE, "tracker", "demo",
         "watchlist.yaml"],
        capture_output=True, check=False,
    )  # fmt: skip
    if archive.returncode != 0:
        pytest.fail(
            f"the migration test needs this repository's git history (commit {PREVIOUS_RELEASE}):"
            f" {archive.stderr.decode().strip()}"
        )
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive.stdout, check=True)
    return out


def old_tracker(old: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The previous release's CLI as a process (its package first on the path)."""
    return subprocess.run(
        [sys.executable, "-c", "from tracker.cli import main; main()", *args],
        cwd=old,
        env={**env, "PYTHONPATH": str(old)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


# -- a canonical view of every row, independent of the schema version -----------------------------


def _utc(value: Any) -> datetime | None:
    """A stored time of either schema as an aware UTC datetime."""
    if value is None:
        return None
    # 0003 stored advisory/analysis times as RFC 3339 text, snapshot times as naive UTC.
    when = datetime.fromisoformat(value) if isinstance(value, str) else value
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def _blob(data: bytes) -> str:
    return hashlib.sha256(bytes(data)).hexdigest()


def canonical_old(engine: sa.Engine) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of a 0003 database, with times as aware datetimes and repos by repo id."""
    q = {
        "repos": "SELECT id, repo_id, source_kind, url, ref FROM repos",
        "ingestion_state": "SELECT r.repo_id, cursor_sha, last_poll_at, last_success_at, "
        "consecutive_failures, last_error, state FROM ingestion_state s "
        "JOIN repos r ON r.id = s.repo_pk",
        "revisions": "SELECT v.id, r.repo_id, sha, parents, date, title, message, authors, seq, "
        "previous_sha, tree_hash, ingested_at, analysed_at, rewritten_away FROM revisions v "
        "JOIN repos r ON r.id = v.repo_pk",
        "tree_entries": "SELECT e.id, r.repo_id, entry_key, path, blob_id, size, lfs_sha256, "
        "security FROM tree_entries e JOIN repos r ON r.id = e.repo_pk",
        "trees": "SELECT tree_hash, entry_ids FROM trees",
        "blobs": "SELECT sha256, size, data FROM blobs",
        "revision_files": "SELECT revision_pk, path, kind, blob_sha256, reason, fetched "
        "FROM revision_files",
        "events": "SELECT e.id, r.repo_id, at, kind, details FROM events e "
        "JOIN repos r ON r.id = e.repo_pk",
        "advisories": "SELECT id, repo_id, package_name, introduced, grp, severity, state, "
        "published, modified, record, pending FROM advisories",
        "advisory_versions": "SELECT advisory_id, sha, pos FROM advisory_versions",
        "advisory_counters": "SELECT prefix, year, next_n FROM advisory_counters",
        "advisory_revisions": "SELECT repo_id, sha, published_at FROM advisory_revisions",
        "suppressed_changes": "SELECT id, repo_id, sha, grp, severity, reason, change, "
        "recorded_at FROM suppressed_changes",
        "revision_diffs": "SELECT id, repo_id, NULLIF(before_sha, ''), after_sha, changes, "
        "created_at FROM revision_diffs",
        "revision_estimates": "SELECT repo_id, sha, report, error, created_at "
        "FROM revision_estimates",
    }
    with engine.connect() as conn:
        raw = {t: [tuple(r) for r in conn.execute(sa.text(sql)).all()] for t, sql in q.items()}
    return _normalise(raw)


def canonical_new(engine: sa.Engine) -> dict[str, list[tuple[Any, ...]]]:
    """The same view of a 0004 database, read through the store's own table types."""
    t = METADATA.tables
    repos = t["repos"]

    def by_repo(name: str, *cols: str) -> sa.Select[Any]:
        table = t[name]
        picked = [repos.c.repo_id if c == "repo_id" else table.c[c] for c in cols]
        return sa.select(*picked).join(repos, repos.c.id == table.c.repo_pk)

    q: dict[str, sa.Select[Any]] = {
        "repos": sa.select(repos.c.id, repos.c.repo_id, repos.c.source_kind, repos.c.url,
                           repos.c.ref),
        "ingestion_state": by_repo("ingestion_state", "repo_id", "cursor_sha", "last_poll_at",
                                   "last_success_at", "consecutive_failures", "last_error",
                                   "state"),
        "revisions": by_repo("revisions", "id", "repo_id", "sha", "parents", "date", "title",
                             "message", "authors", "seq", "previous_sha", "tree_hash",
                             "ingested_at", "analysed_at", "rewritten_away"),
        "tree_entries": by_repo("tree_entries", "id", "repo_id", "entry_key", "path", "blob_id",
                                "size", "lfs_sha256", "security"),
        "trees": sa.select(t["trees"]),
        "blobs": sa.select(t["blobs"]),
        "revision_files": sa.select(t["revision_files"]),
        "events": by_repo("events", "id", "repo_id", "at", "kind", "details"),
        "advisories": by_repo("advisories", "id", "repo_id", "package_name", "introduced", "grp",
                              "severity", "state", "published", "modified", "record", "pending"),
        "advisory_versions": sa.select(t["advisory_versions"].c.advisory_id,
                                       t["advisory_versions"].c.sha, t["advisory_versions"].c.pos),
        "advisory_counters": sa.select(t["advisory_counters"]),
        "advisory_revisions": by_repo("advisory_revisions", "repo_id", "sha", "published_at"),
        "suppressed_changes": by_repo("suppressed_changes", "id", "repo_id", "sha", "grp",
                                      "severity", "reason", "change", "recorded_at"),
        "revision_diffs": by_repo("revision_diffs", "id", "repo_id", "before_sha", "after_sha",
                                  "changes", "created_at"),
        "revision_estimates": by_repo("revision_estimates", "repo_id", "sha", "report", "error",
                                      "created_at"),
    }  # fmt: skip
    assert set(q) == set(OLD_TABLES)
    with engine.connect() as conn:
        raw = {name: [tuple(r) for r in conn.execute(sel).all()] for name, sel in q.items()}
    for name, rows in raw.items():  # the new schema hands out aware datetimes only
        for row in rows:
            for value in row:
                if isinstance(value, datetime):
                    assert value.tzinfo is UTC, (name, row)
    return _normalise(raw)


_TIMES = {
    "ingestion_state": (2, 3),
    "revisions": (11, 12),
    "events": (2,),
    "advisories": (7, 8),
    "advisory_revisions": (2,),
    "suppressed_changes": (7,),
    "revision_diffs": (5,),
    "revision_estimates": (4,),
}
_JSON = {"revisions": (3, 7), "tree_entries": (7,), "trees": (1,), "events": (4,)}


def _normalise(raw: dict[str, list[tuple[Any, ...]]]) -> dict[str, list[tuple[Any, ...]]]:
    out: dict[str, list[tuple[Any, ...]]] = {}
    for name, rows in raw.items():
        norm = []
        for row in rows:
            values = list(row)
            for i in _TIMES.get(name, ()):
                values[i] = _utc(values[i])
            for i in _JSON.get(name, ()):
                if isinstance(values[i], str):  # SQLite hands JSON columns out as text via SQL
                    values[i] = json.loads(values[i])
            if name == "blobs":
                values[2] = _blob(values[2])
            if name in ("revisions", "revision_files"):
                idx = 13 if name == "revisions" else 5
                values[idx] = bool(values[idx])
            norm.append(tuple(values))
        out[name] = sorted(norm, key=repr)
    return out


def _version(engine: sa.Engine) -> str | None:
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()


# -- the test ------------------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'state' / 'tracker.db'}"
        return
    with request.getfixturevalue("pg_database")("migration") as url:
        yield url


def _with_overruns(obj: dict[str, Any]) -> dict[str, Any]:
    """A watch-list row or history revision of the old release as this one prints it: with no
    revision recorded as could not analyse (`could_not_analyse`, added in migration 0011)."""
    if "consecutive_failures" in obj:
        return {**obj, "could_not_analyse": []}
    if "rewritten_away" in obj:
        return {**obj, "could_not_analyse": None}
    return obj


def test_previous_release_database_migrates_with_every_row(
    old_release: Path, database: str, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    env = tracker_env(state, TRACKER_DATABASE_URL=database)
    # The demo's watchlist but DeepSeek-R1 (170 files, most of the demo's time): eight real repos.
    watchlist = tmp_path / "watchlist.yaml"
    lines = (old_release / "watchlist.yaml").read_text().splitlines(keepends=True)
    watchlist.write_text("".join(line for line in lines if "id: deepseek-ai/" not in line))
    env["TRACKER_WATCHLIST"] = str(watchlist)

    demo = old_tracker(old_release, env, "demo", "--json")
    assert demo.returncode == 0, demo.stderr[-2000:]
    extras = subprocess.run(
        [sys.executable, "-c", EXTRAS, database],
        cwd=old_release, env={**env, "PYTHONPATH": str(old_release)},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert extras.returncode == 0, extras.stderr[-2000:]
    rewritten_repo, rewritten_sha = extras.stdout.split()

    engine = sa.create_engine(database)
    try:
        assert _version(engine) == "0003"
        before = canonical_old(engine)
    finally:
        engine.dispose()
    assert all(before[t] for t in OLD_TABLES), [t for t in OLD_TABLES if not before[t]]
    assert [r for r in before["advisories"] if r[6] == "withdrawn"]

    reads = (
        ("advisories", "list", "--json"),
        ("advisories", "list", "--suppressed", "--json"),
        ("watch", "list", "--json"),
        ("history", rewritten_repo, "--json"),
    )
    old_out = [old_tracker(old_release, env, *args) for args in reads]
    old_export = old_tracker(old_release, env, "advisories", "export", str(tmp_path / "old"))
    assert all(r.returncode == 0 for r in [*old_out, old_export]), [r.stderr for r in old_out]

    # This tree's installed tracker: a read-only command migrates nothing, it says how to;
    # `tracker migrate` migrates.
    refused = tracker(env, "advisories", "export", str(tmp_path / "new"))
    assert refused.returncode == 6
    assert "is at migration 0003, this tracker needs" in refused.stderr
    assert "`tracker migrate` (or any command that writes) migrates it" in refused.stderr
    migrated = tracker(env, "migrate")
    assert migrated.returncode == 0, migrated.stderr
    assert migrated.stdout.endswith(f": migration 0003 -> {head_revision()}\n")
    new_export = tracker(env, "advisories", "export", str(tmp_path / "new"))
    assert new_export.returncode == 0, new_export.stderr
    new_out = [tracker(env, *args) for args in reads]
    for args, old, new in zip(reads, old_out, new_out, strict=True):
        assert new.returncode == 0, args
        if args[0] in ("watch", "history"):
            # Added since (migration 0011): every migrated revision is analysed or pending.
            assert json.loads(new.stdout) == json.loads(old.stdout, object_hook=_with_overruns)
            continue
        assert new.stdout == old.stdout, args
    old_files = sorted(p.name for p in (tmp_path / "old").iterdir())
    assert old_files == sorted(p.name for p in (tmp_path / "new").iterdir())
    assert len(old_files) == len(before["advisories"]) + 1  # + modified_id.csv
    _, mismatch, errors = filecmp.cmpfiles(tmp_path / "old", tmp_path / "new", old_files, False)
    assert (mismatch, errors) == ([], [])

    engine = sa.create_engine(database)
    try:
        assert _version(engine) == head_revision()
        after = canonical_new(engine)
        with engine.connect() as conn:  # 0005: what withdrew each advisory, from the old reason
            causes = conn.execute(
                sa.text("SELECT DISTINCT state, withdrawn_by FROM advisories ORDER BY state")
            ).all()
            new_tables = {
                t: conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar_one()
                for t in WEBHOOK_TABLES + WORKER_TABLES + LINEAGE_TABLES
            }
            query = sa.text("SELECT domain FROM store_generations ORDER BY domain")
            domains = list(conn.execute(query).scalars())
    finally:
        engine.dispose()
    assert ("withdrawn", "rewrite") in causes
    assert sorted(map(tuple, causes)) == sorted(
        {(r[6], "rewrite" if r[6] == "withdrawn" else None) for r in before["advisories"]}
    )
    for table in OLD_TABLES:
        assert after[table] == before[table], table
    # 0007, 0008, 0019: empty (a migration reads no card: links come with the next analysis)
    assert new_tables == dict.fromkeys(WEBHOOK_TABLES + WORKER_TABLES + LINEAGE_TABLES, 0)
    assert domains == ["advisories", "poll_outcomes", "revisions"]  # 0012, 0014

    # The migrated store takes new writes: the demo's next poll brings the force-pushed commit back.
    again = tracker(env, "demo", "--json", timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    history = tracker(env, "history", rewritten_repo, "--json")
    assert history.returncode == 0, history.stderr
    revisions = json.loads(history.stdout)["revisions"]
    [row] = [r for r in revisions if r["sha"] == rewritten_sha]
    assert row["rewritten_away"] is False
    # ... and the advisories the rewrite withdrew are live again: restored by the migrated
    # `withdrawn_by`, not by reading the reason
    listed = tracker(env, "advisories", "list", "--repo", rewritten_repo, "--json")
    revived = [a for a in json.loads(listed.stdout) if a["introduced"] == rewritten_sha]
    assert revived and {a["state"] for a in revived} <= {"open", "fixed"}
