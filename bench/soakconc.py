"""The soak's concurrency step alone (`python -m bench.run soakconc`): 3 and 5 concurrent
`tracker poll --once` processes on one empty store, PostgreSQL and SQLite, over the three demo
repos and Llama-2 (whose history fixes and reopens advisories), each trial
`bench.storefaults.concurrent_trial` as `make soak` step 4 runs it. The cases take turns
(PostgreSQL 3, PostgreSQL 5, SQLite 3, SQLite 5, then again), so a run stopped by its time
limit has trials of each. SOAK_TRIALS (default 20): trials per case; SOAK_CONC_UNTIL (epoch
seconds, default none): start no trial after it; SOAK_SEED (default: random). A trial passes
when every process exits 0, the store equals a clean run's and stderr holds nothing but JSON
records below error.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from contextlib import ExitStack

from bench.storefaults import LIFECYCLE_REPOS, ConcurrentResult, concurrent_trial, setting

CASES = (("postgres", 3), ("postgres", 5), ("sqlite", 3), ("sqlite", 5))


def _say(text: str) -> None:
    print(text, flush=True)


def rows(results: dict[tuple[str, int], list[tuple[ConcurrentResult, float]]]) -> list[str]:
    out = []
    for backend, n in CASES:
        got = results[(backend, n)]
        if not got:
            continue
        ok = sum(r.ok for r, _ in got)
        exits = all(e == 0 for r, _ in got for e in r.exits)
        equal = all(r.equal for r, _ in got)
        noise = sum(len(r.noise) for r, _ in got)
        out.append(
            f"| {n} | {backend} | {len(got)} | {ok} | {'yes' if exits else 'no'} | "
            f"{'yes' if equal else 'no'} | {noise} | "
            f"{statistics.median(s for _, s in got):.0f} s |"
        )
    return out


def run() -> str:
    trials = int(os.environ.get("SOAK_TRIALS", "20"))
    until = float(os.environ.get("SOAK_CONC_UNTIL") or "inf")
    base = int(os.environ.get("SOAK_SEED") or random.SystemRandom().randrange(1, 10**9))
    results: dict[tuple[str, int], list[tuple[ConcurrentResult, float]]] = {c: [] for c in CASES}
    with ExitStack() as stack:
        worlds = {
            b: stack.enter_context(setting(b, LIFECYCLE_REPOS)) for b in ("postgres", "sqlite")
        }
        for i in range(trials):
            for backend, n in CASES:
                if time.time() >= until:
                    break
                workdir, hub, watchlist, reference, _ = worlds[backend]
                seed = base + 1000 * n + i
                started = time.monotonic()
                r = concurrent_trial(seed, backend, n, workdir=workdir, hub=hub,
                                     watchlist=watchlist, reference=reference)  # fmt: skip
                results[(backend, n)].append((r, time.monotonic() - started))
                _say(f"  {n} polls seed={seed} {backend}: exits {r.exits}, equal={r.equal}, "
                     f"noise {len(r.noise)} {'ok' if r.ok else 'FAIL ' + str(r.errors + r.noise[:3])}")  # fmt: skip
    return "\n".join(
        [
            "## Concurrent `poll --once` at 3 and 5 processes (`python -m bench.run soakconc`)",
            "",
            f"Seed base {base}. " + (__doc__ or "").split("\n", 1)[1].strip().replace("\n", " "),
            "",
            "| processes | backend | trials | ok | every exit 0 | store equal to a clean run "
            "| stderr noise lines | median trial |",
            "|---:|---|---:|---:|---|---|---:|---:|",
            *rows(results),
        ]
    )
