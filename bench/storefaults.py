"""Store fault trials, run as users meet them: the installed `tracker` as processes on one store.

- `kill_trial`: SIGKILL `tracker poll --once` on an empty store at a random point: inside the first
  open's migration window (`open`) or anywhere in the run (`poll`). After the kill the schema is
  either absent or complete (never partial); the next `tracker poll --once` exits 0 and the store
  then equals a clean run's, and passes the integrity checks (`check_integrity`).
- `statement_kill_trial`: the same first open killed right after its k-th SQL statement (a child
  `tracker` with a statement counter): every point of the migration window, deterministically.
- `first_opens_trial`: several commands open one empty store at once; all succeed, schema whole.
- `concurrent_trial`: N `tracker poll --once` processes started at once on one empty store (their
  first opens race too): every one exits 0 and the store equals a clean run's.
Both on SQLite and PostgreSQL, over real demo data: three of the demo repos (granite, Qwen-7B-Chat,
bloom-560m; 21 revisions, 20 advisories; the short forms use the first two, 9 revisions) replayed
into a Hub replica served from this process.
Short forms run in `make test` (tests/store); the long forms in `make soak` (`python -m bench.run
soak`), which prints every seed.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from tracker.replica import Replica
from tracker.replica.demo import DEMO_DIR, OidCache, build_repo

TRACKER = Path(sys.executable).with_name("tracker")
PG_ADMIN = os.environ.get(
    "TRACKER_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
REPOS = ("ibm-granite/granite-3.1-1b-a400m-instruct", "Qwen/Qwen-7B-Chat", "bigscience/bloom-560m")
SHORT_REPOS = REPOS[:2]
LIFECYCLE_REPOS = (*REPOS, "meta-llama/Llama-2-7b-hf")
"""With Llama-2's history, whose advisories are fixed and reopened by reverts: the concurrent
trials' lifecycle transitions race there (issue 26, item 3)."""
"""The short forms in `make test` poll two of the three repos (9 revisions)."""
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)")


@contextmanager
def demo_hub(workdir: Path, repos: Sequence[str] = REPOS) -> Iterator[tuple[Replica, Path]]:
    """Demo repos (default: all three) in a replica on a loopback port, and a watchlist of them."""
    root = workdir / "hub"
    cache = OidCache(DEMO_DIR / "lfs-oids.tsv")
    cache.path = None  # never write the checked-in cache
    for rid in repos:
        build_repo(root, rid, DEMO_DIR / "repos" / rid.replace("/", "__"), cache)
    watchlist = workdir / "watchlist.yaml"
    watchlist.write_text("repos:\n" + "".join(f"  - id: {r}\n" for r in repos))
    with Replica(root) as hub:
        yield hub, watchlist


@contextmanager
def database(kind: str, workdir: Path) -> Iterator[str]:
    """A new, empty store URL: a SQLite file under `workdir`, or a PostgreSQL database (dropped)."""
    if kind == "sqlite":
        path = workdir / f"store-{uuid.uuid4().hex[:8]}" / "tracker.db"
        yield f"sqlite:///{path}"
        return
    admin_url = sa.make_url(PG_ADMIN)
    name = f"tracker_fault_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        yield admin_url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def env_for(url: str, hub: Replica, watchlist: Path, state: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env.update(
        TRACKER_STATE_DIR=str(state),
        TRACKER_DATABASE_URL=url,
        TRACKER_WATCHLIST=str(watchlist),
        TRACKER_HF_ENDPOINT=hub.url,
        HF_HOME=str(state / "hf-home"),
        HF_HUB_DISABLE_XET="1",
        HF_HUB_DISABLE_TELEMETRY="1",
    )
    return env


def start_poll(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(TRACKER), "poll", "--once", "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def poll(env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TRACKER), "poll", "--once", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


# -- what a store holds, independent of times and surrogate ids ---------------------------------


def _mask(value: Any) -> Any:
    """JSON with every RFC 3339 time replaced (an advisory record carries its writer's clock)."""
    return json.loads(_TIME.sub("<time>", json.dumps(value, sort_keys=True)))


def snapshot(url: str) -> dict[str, Any]:
    """The store's content by natural keys: what two runs that did the same work agree on, read
    through the store's own column types (so SQLite and PostgreSQL compare equal)."""
    from tracker.store.schema import METADATA

    t = METADATA.tables
    repos, revs = t["repos"], t["revisions"]

    def of_repo(name: str, *cols: str) -> sa.Select[Any]:
        table = t[name]
        return sa.select(repos.c.repo_id, *(table.c[c] for c in cols)).join(
            repos, repos.c.id == table.c.repo_pk
        )

    files = t["revision_files"]
    q: dict[str, sa.Select[Any]] = {
        "repos": sa.select(repos.c.repo_id, repos.c.source_kind, repos.c.url, repos.c.ref),
        "state": of_repo("ingestion_state", "cursor_sha", "consecutive_failures", "last_error",
                         "state"),
        "revisions": of_repo("revisions", "sha", "parents", "date", "title", "message", "authors",
                             "seq", "previous_sha", "rewritten_away").add_columns(
                                 revs.c.analysed_at.is_not(None)),
        "trees": of_repo("revisions", "sha").add_columns(t["trees"].c.entry_ids).join(
            t["trees"], t["trees"].c.tree_hash == revs.c.tree_hash),
        "entries": sa.select(t["tree_entries"].c.id, t["tree_entries"].c.path,
                             t["tree_entries"].c.blob_id, t["tree_entries"].c.size,
                             t["tree_entries"].c.lfs_sha256, t["tree_entries"].c.security),
        "files": sa.select(repos.c.repo_id, revs.c.sha, files.c.path, files.c.kind,
                           files.c.blob_sha256, files.c.reason, files.c.fetched).join(
                               revs, revs.c.id == files.c.revision_pk).join(
                                   repos, repos.c.id == revs.c.repo_pk),
        "blobs": sa.select(t["blobs"].c.sha256, t["blobs"].c.size),
        "events": of_repo("events", "kind", "details"),
        "advisories": of_repo("advisories", "id", "introduced", "grp", "severity", "state",
                              "record", "pending"),
        "versions": sa.select(t["advisory_versions"].c.advisory_id, t["advisory_versions"].c.sha,
                              t["advisory_versions"].c.pos),
        "counters": sa.select(t["advisory_counters"].c.prefix, t["advisory_counters"].c.next_n),
        "published": of_repo("advisory_revisions", "sha"),
        "suppressed": of_repo("suppressed_changes", "sha", "grp", "reason", "change"),
        "diffs": of_repo("revision_diffs", "before_sha", "after_sha", "changes"),
        "estimates": of_repo("revision_estimates", "sha", "report", "error"),
    }  # fmt: skip
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            raw = {k: [list(r) for r in conn.execute(v).all()] for k, v in q.items()}
    finally:
        engine.dispose()
    entries = {row[0]: row[1:] for row in raw.pop("entries")}
    raw["trees"] = [[rid, sha, [entries[i] for i in ids]] for rid, sha, ids in raw["trees"]]
    for row in raw["advisories"]:  # records (with their writer's clock) and pending lists
        row[6], row[7] = _mask(json.loads(row[6])), json.loads(row[7])
    return {
        key: sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))
        for key, rows in raw.items()
    }


def check_integrity(url: str) -> list[str]:
    """Problems found: blobs that do not match their address, rows breaking a foreign key, and a
    schema that differs from the models (empty list: none)."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from tracker.store.schema import METADATA

    problems: list[str] = []
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            for digest, data in conn.execute(sa.text("SELECT sha256, data FROM blobs")):
                import hashlib

                if hashlib.sha256(bytes(data)).hexdigest() != digest:
                    problems.append(f"blob {digest} does not match its content")
            if conn.dialect.name == "sqlite":
                bad = conn.exec_driver_sql("PRAGMA foreign_key_check").all()
                problems += [f"foreign key broken: {tuple(r)}" for r in bad]
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            problems += [f"schema differs: {d}" for d in compare_metadata(ctx, METADATA)]
            if ctx.get_current_revision() != _head():
                problems.append(f"schema at {ctx.get_current_revision()}, not {_head()}")
    finally:
        engine.dispose()
    return problems


def _head() -> str:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from tracker.store.engine import MIGRATIONS

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    head = ScriptDirectory.from_config(cfg).get_current_head()
    assert head is not None
    return head


def schema_state(url: str) -> str:
    """`none` (no table), `full` (every table and the version at head) or `partial: ...`."""
    from tracker.store.schema import ALL_TABLES

    if url.startswith("sqlite") and not Path(sa.make_url(url).database or "").exists():
        return "none"  # killed before the first open created the file
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            tables = set(sa.inspect(conn).get_table_names())
            if not tables:
                return "none"
            version = None
            if "alembic_version" in tables:
                version = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
    finally:
        engine.dispose()
    if tables == {*ALL_TABLES, "alembic_version"} and version == _head():
        return "full"
    return f"partial: version {version}, tables {sorted(tables)}"


# -- trials ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KillResult:
    seed: int
    backend: str
    mode: str
    delay_s: float
    killed: bool  # False: the process had finished before the kill
    schema_after_kill: str
    rerun_exit: int
    equal: bool
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return (
            self.schema_after_kill in ("none", "full")
            and self.rerun_exit == 0
            and self.equal
            and not self.problems
        )


def _wait_opened(proc: subprocess.Popen[str], url: str, limit: float = 60) -> float:
    """Block until `proc` has connected to the store (the first open begins); returns when."""
    deadline = time.monotonic() + limit
    if url.startswith("sqlite"):
        path = Path(sa.make_url(url).database or "")
        while not path.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.0005)
        return time.monotonic()
    name = sa.make_url(url).database
    admin = sa.create_engine(sa.make_url(PG_ADMIN), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            q = sa.text("SELECT count(*) FROM pg_stat_activity WHERE datname = :n")
            while proc.poll() is None and time.monotonic() < deadline:
                if conn.execute(q, {"n": name}).scalar():
                    break
                time.sleep(0.001)
    finally:
        admin.dispose()
    return time.monotonic()


def _version_now(conn: sa.Connection) -> str | None:
    try:
        return conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
    except sa.exc.DBAPIError:
        conn.rollback()
        return None


def open_window(kind: str, workdir: Path, hub: Replica, watchlist: Path) -> float:
    """Seconds from a first open's connection until its schema is complete (seen from another
    connection), on an empty store: the migration window that `open` kills are drawn from."""
    head = _head()
    with database(kind, workdir) as url:
        env = env_for(url, hub, watchlist, workdir / f"cal-{uuid.uuid4().hex[:6]}")
        proc = subprocess.Popen(
            [str(TRACKER), "verify", "--json"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        opened = _wait_opened(proc, url)
        engine = sa.create_engine(url, connect_args={"timeout": 0.05} if kind == "sqlite" else {})
        done = opened
        try:
            with engine.connect() as conn:
                while time.monotonic() - opened < 60:
                    done = time.monotonic()
                    if _version_now(conn) == head:
                        break
                    conn.rollback()
                    time.sleep(0.001)
        finally:
            engine.dispose()
        _, err = proc.communicate(timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"calibration run failed: {err[-500:]}")
        return max(done - opened, 0.02)


def kill_trial(
    seed: int,
    kind: str,
    mode: str,
    *,
    workdir: Path,
    hub: Replica,
    watchlist: Path,
    reference: dict[str, Any],
    window_s: float,
    poll_s: float,
) -> KillResult:
    """One kill: start `tracker poll --once` on an empty store, SIGKILL it after a random delay
    (seeded) within the first open (`open`, from its connection) or the whole run (`poll`), then
    inspect the schema, rerun, and compare with `reference`."""
    rng = random.Random(seed)
    with database(kind, workdir) as url:
        env = env_for(url, hub, watchlist, workdir / f"kill-{seed}")
        proc = start_poll(env)
        if mode == "open":
            delay = rng.uniform(0, 1.5 * window_s)  # both sides of the commit
            _wait_opened(proc, url)
        else:
            delay = rng.uniform(0, poll_s)
        time.sleep(delay)
        killed = proc.poll() is None
        if killed:
            proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=120)
        state = schema_state(url)
        rerun = poll(env)
        equal = rerun.returncode == 0 and snapshot(url) == reference
        problems = tuple(check_integrity(url)) if rerun.returncode == 0 else (rerun.stderr[-800:],)
        return KillResult(seed, kind, mode, round(delay, 4), killed, state, rerun.returncode, equal,
                          problems)  # fmt: skip


_COUNTING_CHILD = """
import atexit, os, signal, sys
import sqlalchemy as sa
limit = int(os.environ.get("TRACKER_FAULT_KILL_AFTER") or 0)
count = 0
@sa.event.listens_for(sa.Engine, "after_cursor_execute")
def _count(*_args):
    global count
    count += 1
    if count == limit:
        os.kill(os.getpid(), signal.SIGKILL)
atexit.register(lambda: print("statements", count, file=sys.stderr))
from tracker.cli import main
sys.argv = ["tracker", *sys.argv[1:]]
main()
"""


def _counted(env: dict[str, str], kill_after: int, *args: str) -> subprocess.CompletedProcess[str]:
    """`tracker ARGS` in a child that counts its SQL statements and SIGKILLs itself right after
    statement number `kill_after` (0: never); the count is printed last on stderr."""
    return subprocess.run(
        [sys.executable, "-c", _COUNTING_CHILD, *args],
        cwd=env["TRACKER_STATE_DIR"].rsplit("/", 1)[0],  # not the repo: `-c` puts cwd on sys.path
        env={**env, "TRACKER_FAULT_KILL_AFTER": str(kill_after)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def first_open_statements(kind: str, workdir: Path, hub: Replica, watchlist: Path) -> int:
    """How many SQL statements `tracker verify` runs on an empty store (the first open)."""
    with database(kind, workdir) as url:
        done = _counted(env_for(url, hub, watchlist, workdir / "count"), 0, "verify")
        if done.returncode != 0:
            raise RuntimeError(f"counting run failed: {done.stderr[-500:]}")
        return int(done.stderr.strip().splitlines()[-1].split()[-1])


@dataclass(frozen=True)
class StatementKillResult:
    backend: str
    after_statement: int
    killed: bool
    schema_after_kill: str
    next_exit: int
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return (
            self.killed
            and self.schema_after_kill in ("none", "full")
            and self.next_exit == 0
            and not self.problems
        )


def statement_kill_trial(
    kind: str, k: int, *, workdir: Path, hub: Replica, watchlist: Path
) -> StatementKillResult:
    """Kill the first open of an empty store right after its `k`-th statement; then the schema
    must be absent or complete, and the next command (`tracker verify`) must work."""
    with database(kind, workdir) as url:
        env = env_for(url, hub, watchlist, workdir / f"stmt-{k}")
        done = _counted(env, k, "verify")
        killed = done.returncode == -signal.SIGKILL
        state = schema_state(url)
        after = subprocess.run(
            [str(TRACKER), "verify", "--json"],
            env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        problems = tuple(check_integrity(url)) if after.returncode == 0 else (after.stderr[-800:],)
        return StatementKillResult(kind, k, killed, state, after.returncode, problems)


@dataclass(frozen=True)
class FirstOpensResult:
    backend: str
    processes: int
    exits: tuple[int, ...]
    errors: tuple[str, ...]
    schema: str

    @property
    def ok(self) -> bool:
        return all(e == 0 for e in self.exits) and self.schema == "full"


def first_opens_trial(
    kind: str, processes: int, *, workdir: Path, hub: Replica, watchlist: Path
) -> FirstOpensResult:
    """`processes` commands (`tracker verify`) open one empty store at the same moment."""
    with database(kind, workdir) as url:
        env = env_for(url, hub, watchlist, workdir / f"opens-{uuid.uuid4().hex[:6]}")
        procs = [
            subprocess.Popen(
                [str(TRACKER), "verify", "--json"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(processes)
        ]
        errs = [p.communicate(timeout=300)[1] for p in procs]
        exits = tuple(p.returncode for p in procs)
        errors = tuple(e.strip()[:300] for e, p in zip(errs, procs, strict=True) if p.returncode)
        return FirstOpensResult(kind, processes, exits, errors, schema_state(url))


@dataclass(frozen=True)
class ConcurrentResult:
    seed: int
    backend: str
    processes: int
    exits: tuple[int, ...]
    equal: bool
    errors: tuple[str, ...]
    noise: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return all(e == 0 for e in self.exits) and self.equal and not self.noise


def stderr_noise(err: str) -> tuple[str, ...]:
    """Lines of a `poll --once` stderr that are not the JSON log records tracker writes there, or
    records at level error or above (a traceback, a driver's own warning)."""
    out: list[str] = []
    for line in err.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            out.append(line[:300])
            continue
        if not isinstance(record, dict) or record.get("level") in ("error", "critical"):
            out.append(line[:300])
    return tuple(out)


def concurrent_trial(
    seed: int,
    kind: str,
    processes: int,
    *,
    workdir: Path,
    hub: Replica,
    watchlist: Path,
    reference: dict[str, Any],
) -> ConcurrentResult:
    """`processes` `tracker poll --once` started together on one empty store (start offsets of up
    to 50 ms, seeded); each must exit 0 and the store must equal `reference`."""
    rng = random.Random(seed)
    with database(kind, workdir) as url:
        env = env_for(url, hub, watchlist, workdir / f"conc-{seed}")
        procs = []
        for _ in range(processes):
            procs.append(start_poll(env))
            time.sleep(rng.uniform(0, 0.05))
        outs = [p.communicate(timeout=600) for p in procs]
        exits = tuple(p.returncode for p in procs)
        errors = tuple(err.strip().splitlines()[-1] for (_, err), p in zip(outs, procs, strict=True)
                       if p.returncode != 0 and err.strip())  # fmt: skip
        equal = snapshot(url) == reference
        noise = tuple(n for _, err in outs for n in stderr_noise(err))
        return ConcurrentResult(seed, kind, processes, exits, equal, errors, noise)


def reference_run(
    kind: str, workdir: Path, hub: Replica, watchlist: Path
) -> tuple[dict[str, Any], float]:
    """A clean `tracker poll --once` on an empty store: its snapshot and wall time."""
    with database(kind, workdir) as url:
        env = env_for(url, hub, watchlist, workdir / f"clean-{uuid.uuid4().hex[:6]}")
        started = time.monotonic()
        done = poll(env)
        seconds = time.monotonic() - started
        if done.returncode != 0:
            raise RuntimeError(f"clean run failed ({done.returncode}): {done.stderr[-1000:]}")
        problems = check_integrity(url)
        if problems:
            raise RuntimeError(f"clean run fails the integrity checks: {problems}")
        return snapshot(url), seconds


@contextmanager
def setting(
    kind: str, repos: Sequence[str] = REPOS
) -> Iterator[tuple[Path, Replica, Path, dict[str, Any], float]]:
    """A work dir, the demo hub of `repos`, its watchlist, and the clean reference (snapshot,
    seconds)."""
    with tempfile.TemporaryDirectory(prefix="tracker-faults-") as tmp:
        workdir = Path(tmp)
        with demo_hub(workdir, repos) as (hub, watchlist):
            reference, seconds = reference_run(kind, workdir, hub, watchlist)
            yield workdir, hub, watchlist, reference, seconds
