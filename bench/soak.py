"""Soak: the long forms of the store's fault trials (`make soak`, `python -m bench.run soak`).

See `bench.storefaults`. Per backend (SQLite, PostgreSQL): a SIGKILL after every SQL statement of the
first open of an empty store; kills of `tracker poll --once` at random times (seeded: trial i uses
seed BASE + i, BASE printed and written here) inside the migration window or anywhere in the run;
concurrent first opens; and 2, 3 and 5 concurrent `tracker poll --once` processes (over the
three repos and Llama-2, whose history fixes and reopens advisories). Every trial line is
printed as it finishes. Counts: SOAK_KILLS (random kills per backend, default 30), SOAK_TRIALS
(concurrent trials per process count and backend, default 20), SOAK_SEED (default: random), SOAK_BACKENDS (default "sqlite,postgres"; a run limited to one backend
writes only that backend's rows), SOAK_STATEMENT_STEP (default 1: a kill after every statement of
the first open; N: after statements 1, 1 + N, 1 + 2N, ... and the last).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Sequence
from typing import Any

from bench.storefaults import (
    LIFECYCLE_REPOS,
    concurrent_trial,
    first_open_statements,
    first_opens_trial,
    kill_trial,
    open_window,
    setting,
    statement_kill_trial,
)

BACKENDS = ("sqlite", "postgres")


def _row(name: str, backend: str, results: Sequence[Any], seconds: float, note: str = "") -> str:
    bad = [r for r in results if not r.ok]
    return (
        f"| {name} | {backend} | {len(results)} | {len(results) - len(bad)} | {len(bad)} | "
        f"{seconds:.0f} s | {note} |"
    )


def _say(text: str) -> None:
    print(text, flush=True)


def run() -> str:
    kills = int(os.environ.get("SOAK_KILLS", "30"))
    trials = int(os.environ.get("SOAK_TRIALS", "20"))
    base = int(os.environ.get("SOAK_SEED") or random.SystemRandom().randrange(1, 10**9))
    _say(f"soak: seed base {base}, {kills} random kills and {trials} concurrent trials per case")
    rows: list[str] = []
    failures: list[str] = []
    backends = [b for b in os.environ.get("SOAK_BACKENDS", ",".join(BACKENDS)).split(",") if b]
    if unknown := set(backends) - set(BACKENDS):
        raise SystemExit(f"SOAK_BACKENDS: unknown backend(s) {sorted(unknown)}; known: {BACKENDS}")
    for backend in backends:
        with setting(backend) as (workdir, hub, watchlist, reference, clean_s):
            _say(f"{backend}: clean run {clean_s:.1f} s")
            # (1) a kill after every statement of the first open
            started = time.monotonic()
            total = first_open_statements(backend, workdir, hub, watchlist)
            stmt = []
            step = max(1, int(os.environ.get("SOAK_STATEMENT_STEP", "1")))
            for k in sorted({*range(1, total + 1, step), total}):
                r = statement_kill_trial(backend, k, workdir=workdir, hub=hub, watchlist=watchlist)
                stmt.append(r)
                _say(f"  statement kill {backend} k={k}/{total}: {r.schema_after_kill} -> "
                     f"next exit {r.next_exit} {'ok' if r.ok else 'FAIL ' + str(r.problems)}")  # fmt: skip
            states = sorted({r.schema_after_kill for r in stmt})
            which = (
                "every k" if step == 1 else f"k = 1, {1 + step}, {1 + 2 * step}, ... and the last"
            )
            rows.append(_row(f"kill after statement k of the first open ({which})", backend, stmt,
                             time.monotonic() - started,
                             f"{total} statements, {len(stmt)} kills; schema after kill: {', '.join(states)}"))  # fmt: skip
            failures += [f"{backend} statement kill k={r.after_statement}: {r}" for r in stmt
                         if not r.ok]  # fmt: skip
            # (2) random-time kills of `tracker poll --once` on an empty store
            started = time.monotonic()
            window = open_window(backend, workdir, hub, watchlist)
            timed = []
            for i in range(kills):
                seed = base + i
                mode = "open" if i % 2 == 0 else "poll"
                r = kill_trial(seed, backend, mode, workdir=workdir, hub=hub, watchlist=watchlist,
                               reference=reference, window_s=window, poll_s=clean_s)  # fmt: skip
                timed.append(r)
                _say(f"  kill seed={seed} {backend} {mode} at {r.delay_s:.3f} s "
                     f"(killed={r.killed}): {r.schema_after_kill} -> rerun exit {r.rerun_exit}, "
                     f"equal={r.equal} {'ok' if r.ok else 'FAIL ' + str(r.problems)}")  # fmt: skip
            modes = {m: sum(1 for r in timed if r.mode == m and r.killed) for m in ("open", "poll")}
            rows.append(_row("SIGKILL `poll --once` at a random time, rerun", backend, timed,
                             time.monotonic() - started,
                             f"migration window {window * 1000:.0f} ms, clean run {clean_s:.1f} s; "
                             f"killed in the window {modes['open']}, in the run {modes['poll']}; "
                             "after each rerun: store equal to a clean run's, integrity checked"))  # fmt: skip
            failures += [f"{backend} kill: {r}" for r in timed if not r.ok]
            # (3) concurrent first opens
            started = time.monotonic()
            opens = [first_opens_trial(backend, 4, workdir=workdir, hub=hub, watchlist=watchlist)
                     for _ in range(10)]  # fmt: skip
            rows.append(_row("4 commands open one empty store at once", backend, opens,
                             time.monotonic() - started))  # fmt: skip
            failures += [f"{backend} first opens: {r}" for r in opens if not r.ok]
        # (4) concurrent polls, with Llama-2's fixes and reopenings racing too
        with setting(backend, LIFECYCLE_REPOS) as (workdir, hub, watchlist, reference, clean_s):
            _say(f"{backend}: clean run with Llama-2 {clean_s:.1f} s")
            for n in (2, 3, 5):
                started = time.monotonic()
                conc = []
                for i in range(trials):
                    seed = base + 1000 * n + i
                    r = concurrent_trial(seed, backend, n, workdir=workdir, hub=hub,
                                         watchlist=watchlist, reference=reference)  # fmt: skip
                    conc.append(r)
                    _say(f"  {n} polls seed={seed} {backend}: exits {r.exits}, equal={r.equal}, "
                         f"stderr noise {len(r.noise)} lines "
                         f"{'ok' if r.ok else 'FAIL ' + str(r.errors + r.noise[:3])}")  # fmt: skip
                rows.append(_row(f"{n} concurrent `poll --once` on an empty store", backend, conc,
                                 time.monotonic() - started,
                                 "four demo repos with Llama-2 (fixes and reopenings); every exit "
                                 "0, the store equal to a clean run's and no stderr line but JSON "
                                 "records below error required"))  # fmt: skip
                failures += [f"{backend} {n} polls: {r}" for r in conc if not r.ok]
    lines = [
        "## Soak: store faults (`make soak`, `python -m bench.run soak`)",
        "",
        f"Seed base {base} (SOAK_SEED={base} reproduces the random delays). Data: three demo repos "
        "(granite, Qwen-7B-Chat, bloom-560m; 21 revisions) in a Hub replica on loopback; each trial "
        "starts from an empty store (SQLite file or new PostgreSQL database) and runs the installed "
        "`tracker` as processes.",
        "",
        "| trial | backend | runs | ok | failed | time | notes |",
        "|---|---|---:|---:|---:|---:|---|",
        *rows,
        "",
        f"Failures: {len(failures)}."
        + ("" if not failures else "\n\n" + "\n".join(f"- {f}" for f in failures)),
    ]
    return "\n".join(lines)
