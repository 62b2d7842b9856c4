"""Many watched repos, many workers (`python -m bench.run workers`; issue 13).

Everything runs as deployed: a Hub replica (in this process) serving N repos, `tracker poll`
daemons (processes) on one PostgreSQL database. The N repos are symlinks to one bare repo with one
commit (the replica serves each as its own repo; set-up takes seconds, not N git repos).

1. First sync: one worker ingests and analyses the one revision of every repo (timed).
2. No-change polls, 1 worker: every repo's interval is 1 s, so every repo is always due and the
   worker polls as fast as it can; the replica's request log counts the polls (one `refs`
   request each) over a measured window; the daemon's CPU time and peak RSS come from /proc.
3. 1, 2 and 3 workers over the same load, the same way: the scaling ratio.
4. The rate budget: 3 workers with the budget on (a short window and a small `api` quota); the
   replica's request log, counted per fixed window, never exceeds the quota.

`BENCH_WORKERS_REPOS` sets N (default 10,000); `BENCH_WORKERS_SECONDS` the measured window (30).
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

TRACKER = Path(sys.executable).with_name("tracker")
COMMAND = "python -m bench.run workers"
PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


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
        **extra,
    )
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


def _measure(
    hub: Any, env: dict[str, str], workers: int, seconds: float
) -> tuple[float, list[float], list[float]]:
    """No-change polls per second sustained by `workers` daemons, each one's CPU seconds per
    second and peak RSS (MB)."""
    procs = [_start(env) for _ in range(workers)]
    try:
        time.sleep(8 + 2 * workers)  # start, register, claim: then measure
        cpu0 = [_cpu_s(p.pid) for p in procs]
        t0 = time.time()
        time.sleep(seconds)
        t1 = time.time()
        cpu = [(_cpu_s(p.pid) - c) / (t1 - t0) for p, c in zip(procs, cpu0, strict=True)]
        rss = [_peak_rss_mb(p.pid) for p in procs]
    finally:
        codes = _stop(procs)
    assert codes == [0] * workers, codes
    return _refs(hub, t0, t1) / (t1 - t0), cpu, rss


def run() -> str:
    import sqlalchemy as sa

    from tracker.replica import Replica
    from tracker.replica.repos import commit, init_repo
    from tracker.store import Store
    from tracker.store.workers import WorkStore

    n = int(os.environ.get("BENCH_WORKERS_REPOS", "10000"))
    seconds = float(os.environ.get("BENCH_WORKERS_SECONDS", "30"))
    name = f"bench_workers_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    db = sa.make_url(PG_ADMIN).set(database=name).render_as_string(hide_password=False)
    lines: list[str] = []
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
                    while True:
                        time.sleep(2)
                        done = sum(1 for r in work.schedule() if r.last_revision is not None)
                        if done == n:
                            break
                        assert first.poll() is None, "the worker died during the first sync"
                    sync_s = time.perf_counter() - started
                    assert _stop([first]) == [0]
                finally:
                    store.close()
                lines += [
                    f"First sync of {n:,} repos (one revision each, ingested and analysed) by "
                    f"one worker: {sync_s:.0f} s ({n / sync_s:.1f} repos/s).",
                    "",
                    "| workers | no-change polls/s | scaling | daemon CPU (cores, each) | "
                    "peak RSS MB (each) |",
                    "|---:|---:|---:|---|---|",
                ]
                rates: dict[int, float] = {}
                cpus: dict[int, list[float]] = {}
                for k in (1, 2, 3):
                    hub.reset_requests()
                    rate, cpu, rss = _measure(hub, env, k, seconds)
                    rates[k], cpus[k] = rate, cpu
                    lines.append(
                        f"| {k} | {rate:.1f} | {rate / rates[1]:.2f} | "
                        f"{', '.join(f'{c:.2f}' for c in cpu)} | "
                        f"{', '.join(f'{r:.0f}' for r in rss)} |"
                    )
                cpu_ms = 1000 * cpus[1][0] / rates[1] if rates[1] else float("nan")
                lines += [
                    "",
                    f"One no-change poll costs the worker {cpu_ms:.1f} ms of CPU (1 worker). The "
                    "replica answers every `refs` request with a `git for-each-ref` process in "
                    "the bench's own process, and PostgreSQL runs on the same 2 cores: they "
                    "share the CPU with the workers, so the scaling ratio is bounded by the "
                    "machine, not by the claims.",
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
                procs = [_start(budget_env) for _ in range(3)]
                time.sleep(6 * window)
                assert _stop(procs) == [0, 0, 0]
                per_window = Counter(
                    math.floor(r.at / window) for r in hub.requests if r.path.startswith("/api/")
                )
                full = sorted(per_window.items())[1:-1]  # whole windows only
                lines += [
                    "",
                    f"Rate budget, 3 workers, `api` quota {quota} per {window:g} s window, burst "
                    f"4: the replica's request log counts per window "
                    f"{[c for _, c in full]} (max {max(c for _, c in full)}, never over "
                    f"{quota}) over {len(full)} whole windows.",
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
            f"database, each with `TRACKER_POLL_CONCURRENCY=8`; every repo's interval is 1 s so "
            f"every repo is always due; polls counted by the replica over {seconds:g} s.",
            "",
            *lines,
        ]
    )


if __name__ == "__main__":
    print(run())
