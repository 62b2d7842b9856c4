"""Many watched repos, many workers (`python -m bench.run workers`; issue 13).

Everything runs as deployed: a Hub replica (in this process) serving N repos, `tracker poll`
daemons (processes) on one PostgreSQL database. The N repos are symlinks to one bare repo with one
commit (the replica serves each as its own repo; set-up takes seconds, not N git repos).

1. First sync: one worker ingests and analyses the one revision of every repo (timed; the
   daemon's CPU per repo and peak RSS).
2. No-change polls with 1, 2 and 3 workers over the same load: every repo's interval is 1 s, so
   every repo is always due and the workers poll as fast as they can. Each row starts its
   workers, waits until every one of them is registered (the `workers` table) and holds a lease
   (`repo_schedule.lease_owner`), lets them run `SETTLE_S`, then counts the polls the store
   recorded (`sum(ingestion_state.polls)`, checked against the replica's `refs` requests) over a
   fixed window; the daemons' CPU and peak RSS from /proc, the machine's busy CPU from
   /proc/stat, the replica's CPU (its threads in this process, and any `git` process it ran) and
   the load average. The replica was warmed by the first sync (every repo served once).
3. The same rows with the replica answering every request after `BENCH_WORKERS_LATENCY_MS`
   (50 ms: a model of the real Hub's round trip) and one poll at a time per worker
   (`TRACKER_POLL_CONCURRENCY=1`): workers waiting on I/O, not on the 2 cores.
4. The rate budget: 3 workers with the budget on (a short window and a small `api` quota); the
   replica's request log, counted per fixed window, never exceeds the quota, and the replica,
   enforcing the same quota itself (`Replica.set_rate_limits`), refuses none.

`BENCH_WORKERS_REPOS` sets N (default 10,000); `BENCH_WORKERS_SECONDS` the measured window (30).
"""

from __future__ import annotations

import math
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TRACKER = Path(sys.executable).with_name("tracker")
COMMAND = "python -m bench.run workers"
PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
SETTLE_S = 5.0


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _machine() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / tick, sum(fields[:8]) / tick


def _replica_cpu() -> float:
    """CPU seconds of this process (the replica's threads) and of its reaped children (the `git`
    processes answering the replica; the daemons are reaped only after a measurement)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _env(state: Path, hub_url: str, db: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env.update(
        TRACKER_STATE_DIR=str(state),
        TRACKER_WATCHLIST=str(state / "watchlist.yaml"),
        TRACKER_HF_ENDPOINT=hub_url,
        TRACKER_DATABASE_URL=db,
        TRACKER_LOG_LEVEL="WARNING",
        TRACKER_QUEUE_CHECK_S="0.1",
        TRACKER_POLL_CONCURRENCY="8",
        TRACKER_WORKER_LEASE_S="60",
        TRACKER_POLL_JITTER="0",
        HF_HOME=str(state / "hf-home"),
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HUB_DISABLE_XET="1",
    )
    env.update(extra)
    return env


def _start(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [str(TRACKER), "poll"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def _stop(procs: list[subprocess.Popen[bytes]]) -> list[int]:
    for p in procs:
        p.send_signal(signal.SIGTERM)
    return [p.wait(timeout=300) for p in procs]


def _refs(hub: Any, since: float, until: float) -> int:
    return sum(1 for r in hub.requests if r.path.endswith("/refs") and since <= r.at < until)


@dataclass(frozen=True)
class Row:
    workers: int
    polls_per_s: float
    replica_refs_per_s: float
    cpu: list[float]  # each daemon's CPU, cores
    rss: list[float]  # each daemon's peak RSS, MB
    machine_busy: float  # cores of 2 busy, whole machine
    replica_cpu: float  # cores: the replica's threads and its git processes
    load: tuple[float, float]  # 1-minute load average at the window's start and end
    wait_s: float  # from the start until every worker was registered and held a lease


def _measure(hub: Any, engine: Any, env: dict[str, str], workers: int, seconds: float) -> Row:
    """No-change polls per second sustained by `workers` daemons (see the module docstring)."""
    import sqlalchemy as sa

    polls_q = sa.text("SELECT coalesce(sum(polls), 0) FROM ingestion_state")
    ready_q = sa.text(
        "SELECT (SELECT count(*) FROM workers), "
        "(SELECT count(DISTINCT lease_owner) FROM repo_schedule WHERE lease_owner IS NOT NULL)"
    )
    started = time.monotonic()
    procs = [_start(env) for _ in range(workers)]
    try:
        while True:  # every worker registered and holding a lease: all of them are polling
            with engine.connect() as conn:
                registered, holding = conn.execute(ready_q).one()
            if registered == workers and holding == workers:
                break
            assert all(p.poll() is None for p in procs), "a worker died while starting"
            assert time.monotonic() - started < 600, (registered, holding)
            time.sleep(0.2)
        ready = time.monotonic() - started
        time.sleep(SETTLE_S)
        with engine.connect() as conn:
            p0 = int(conn.execute(polls_q).scalar_one())
        cpu0 = [_cpu_s(p.pid) for p in procs]
        m0, r0, load0 = _machine(), _replica_cpu(), os.getloadavg()[0]
        t0 = time.time()
        time.sleep(seconds)
        t1 = time.time()
        with engine.connect() as conn:
            p1 = int(conn.execute(polls_q).scalar_one())
        m1, r1, load1 = _machine(), _replica_cpu(), os.getloadavg()[0]
        cpu = [(_cpu_s(p.pid) - c) / (t1 - t0) for p, c in zip(procs, cpu0, strict=True)]
        rss = [_peak_rss_mb(p.pid) for p in procs]
    finally:
        codes = _stop(procs)
    assert codes == [0] * workers, codes
    busy = (m1[0] - m0[0]) / (m1[1] - m0[1]) * (os.cpu_count() or 1)
    return Row(
        workers, (p1 - p0) / (t1 - t0), _refs(hub, t0, t1) / (t1 - t0), cpu, rss, busy,
        (r1 - r0) / (t1 - t0), (load0, load1), ready,
    )  # fmt: skip


def _table(rows: list[Row]) -> list[str]:
    one = rows[0]
    out = [
        "| workers | ready after | no-change polls/s (store) | replica `refs`/s | scaling | "
        "daemon CPU, cores (each) | daemon CPU per poll | peak RSS MB (each) | "
        "replica + git CPU, cores | machine busy, of 2 cores | load avg (start → end) |",
        "|---:|---:|---:|---:|---:|---|---:|---|---:|---:|---|",
    ]
    for r in rows:
        per_poll = 1000 * sum(r.cpu) / r.polls_per_s if r.polls_per_s else float("nan")
        out.append(
            f"| {r.workers} | {r.wait_s:.1f} s | {r.polls_per_s:.1f} | "
            f"{r.replica_refs_per_s:.1f} | {r.polls_per_s / one.polls_per_s:.2f} | "
            f"{', '.join(f'{c:.2f}' for c in r.cpu)} | {per_poll:.1f} ms | "
            f"{', '.join(f'{x:.0f}' for x in r.rss)} | {r.replica_cpu:.2f} | "
            f"{r.machine_busy:.2f} | {r.load[0]:.1f} → {r.load[1]:.1f} |"
        )
    return out


def run() -> str:
    import sqlalchemy as sa

    from tracker.replica import Replica
    from tracker.replica.repos import commit, init_repo
    from tracker.store import Store
    from tracker.store.workers import WorkStore

    n = int(os.environ.get("BENCH_WORKERS_REPOS", "10000"))
    seconds = float(os.environ.get("BENCH_WORKERS_SECONDS", "30"))
    latency_ms = float(os.environ.get("BENCH_WORKERS_LATENCY_MS", "50"))
    name = f"bench_workers_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    db = sa.make_url(PG_ADMIN).set(database=name).render_as_string(hide_password=False)
    lines: list[str] = []
    load_start = os.getloadavg()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-workers-") as tmp:
            root = Path(tmp) / "hub"
            base = init_repo(root, "seed/base")
            commit(base, {"config.json": b'{"model_type": "llama", "vocab_size": 32000}'}, "one")
            (root / "bench").mkdir()
            names = [f"bench/r{i:05d}" for i in range(n)]
            for rid in names:
                (root / rid).symlink_to(base, target_is_directory=True)
            state = Path(tmp) / "state"
            state.mkdir()
            (state / "watchlist.yaml").write_text(
                "repos:\n" + "".join(f"  - id: {r}\n    poll_interval: 1s\n" for r in names)
            )
            with Replica(root) as hub:
                env = _env(state, hub.url, db)
                store = Store.open(db)
                work = WorkStore(store.engine)
                try:
                    # 1. first sync
                    started = time.perf_counter()
                    first = _start(env)
                    sync_load = [os.getloadavg()[0]]
                    done_q = sa.text("SELECT count(*) FROM revisions WHERE analysed_at IS NOT NULL")
                    while True:
                        time.sleep(2)
                        with store.engine.connect() as conn:
                            if int(conn.execute(done_q).scalar_one()) == n:
                                break
                        assert first.poll() is None, "the worker died during the first sync"
                        sync_load.append(os.getloadavg()[0])
                    sync_s = time.perf_counter() - started
                    sync_cpu, sync_rss = _cpu_s(first.pid), _peak_rss_mb(first.pid)
                    assert _stop([first]) == [0]
                    assert sum(1 for r in work.schedule() if r.last_revision is not None) == n
                    lines += [
                        f"### First sync: {n:,} repos, one worker",
                        "",
                        f"One revision each, ingested and analysed: {sync_s:.0f} s "
                        f"({n / sync_s:.1f} repos/s); the daemon's CPU "
                        f"{sync_cpu:.0f} s ({1000 * sync_cpu / n:.1f} ms per repo), peak RSS "
                        f"{sync_rss:.0f} MB; load average during it "
                        f"{min(sync_load):.1f}-{max(sync_load):.1f}.",
                        "",
                    ]
                    # 2. and 3. no-change polls, 1, 2 and 3 workers; then with latency
                    plain = []
                    for k in (1, 2, 3):
                        hub.reset_requests()
                        plain.append(_measure(hub, store.engine, env, k, seconds))
                    hub.latency_s = latency_ms / 1000
                    slow_env = {**env, "TRACKER_POLL_CONCURRENCY": "1"}
                    slow = []
                    for k in (1, 2, 3):
                        hub.reset_requests()
                        slow.append(_measure(hub, store.engine, slow_env, k, seconds))
                    hub.latency_s = 0.0
                finally:
                    store.close()
                lines += [
                    "### No-change polls, 1-3 workers, replica answering at once "
                    "(`TRACKER_POLL_CONCURRENCY=8` each)",
                    "",
                    *_table(plain),
                    "",
                    f"### No-change polls, 1-3 workers, replica answering after "
                    f"{latency_ms:g} ms (`TRACKER_POLL_CONCURRENCY=1` each)",
                    "",
                    *_table(slow),
                    "",
                ]
                # 4. the rate budget
                window, quota = 10.0, 40
                hub.reset_requests()
                budget_env = {
                    **env,
                    "TRACKER_RATE_BUDGET": "on",
                    "TRACKER_RATE_WINDOW_S": str(window),
                    "TRACKER_RATE_API_PER_WINDOW": str(quota),
                    "TRACKER_RATE_BURST": "4",
                }
                # the replica enforces the same quota itself: a request over it would be a 429
                hub.set_rate_limits({"api": quota}, int(window))
                procs = [_start(budget_env) for _ in range(3)]
                time.sleep(6 * window)
                assert _stop(procs) == [0, 0, 0]
                hub.set_rate_limits({})
                refused = sum(1 for r in hub.requests if r.status == 429)
                per_window = Counter(
                    math.floor(r.at / window) for r in hub.requests if r.path.startswith("/api/")
                )
                full = sorted(per_window.items())[1:-1]  # whole windows only
                lines += [
                    f"### Rate budget, 3 workers, `api` quota {quota} per {window:g} s window, "
                    "burst 4",
                    "",
                    f"The replica's request log counts per window {[c for _, c in full]} "
                    f"(max {max(c for _, c in full)}, never over {quota}) over {len(full)} whole "
                    f"windows. The replica enforced the same quota itself (`RateLimit` and "
                    f"`RateLimit-Policy` on every answer, 429 over it): {refused} requests were "
                    "refused.",
                ]
                assert max(per_window.values()) <= quota
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
    return "\n".join(
        [
            f"## Workers (`{COMMAND}`)",
            "",
            f"{n:,} watched repos against the replica, `tracker poll` daemons on one PostgreSQL "
            f"database; every repo's interval is 1 s so every repo is always due. Polls are "
            f"counted by the store (`ingestion_state.polls`) over {seconds:g} s, starting "
            f"{SETTLE_S:g} s after every worker was registered and held a lease ('ready after'); "
            "the replica's own `refs` count is next to it. The replica (threads of the bench "
            "process; it reads a `refs` answer from the repo's ref files, no `git` process) and "
            "PostgreSQL run on the same 2 cores as the workers, shared with other sessions' work. "
            f"Load average at the start: {load_start[0]:.1f}.",
            "",
            *lines,
        ]
    )


if __name__ == "__main__":
    print(run())
