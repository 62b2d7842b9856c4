"""The cost of re-deriving advisories' `versions` on each poll that ingests (`python -m bench.run
versions`): after a poll stores new revisions, the pipeline reads the ref's analysed line
(`Pipeline._chain`: one query for the repo's revisions, walked in memory) and, in one
transaction, re-fixes reopened advisories whose fixing commit is back and rebuilds every open or
fixed advisory's versions from that line (`restore_revived(..., chain)`). Both are measured on a
real SQLite store (the default), built with the real publisher: one repo of N analysed revisions,
each changing one generation default along a seeded random walk of three values, so that its
advisories are a mix of open and fixed ones with versions of every length.

The no-change poll does not reach this (no new revision: the analysis is not entered), still 1
request per repo (`## Ingest` (a)).
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

SIZES = (100, 400)
RUNS = 15
VALUES = (0.6, 0.7, 0.9)
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _pct(values: list[float], q: float) -> float:
    ms = sorted(values)
    return ms[min(len(ms) - 1, round(q * (len(ms) - 1)))]


def _repo(n: int, root: Path) -> tuple[float, int, int, float, float, float]:
    """(seconds to build, open advisories, fixed ones, median and p95 seconds of `_chain` plus
    the re-derivation, median seconds of `_chain` alone) for a repo of `n` revisions."""
    from tracker.advisories.service import publish, restore_revived
    from tracker.app import build
    from tracker.settings import Settings
    from tracker.shared.domain import (
        AdvisoryState,
        Artifact,
        Change,
        ChangeKind,
        Commit,
        RepoId,
        Sha,
    )

    app = build(Settings(state_dir=root, watchlist=root / "watchlist.yaml"))
    rid = RepoId("bench/versions")
    url = f"https://huggingface.co/{rid}"
    app.store.ensure_repo(rid, source_kind="hub", url=None, ref="main")
    rng = random.Random(n)
    started = time.perf_counter()
    previous: Sha | None = None
    value = VALUES[1]
    for i in range(n):
        sha = Sha(f"{i + 1:040x}")
        when = T0 + timedelta(minutes=i)
        commit = Commit(sha, (previous,) if previous else (), when, "step", "step", ("bench",))
        app.store.store_revision(rid, commit, (), {}, previous=previous, now=when)
        new = rng.choice(VALUES) if previous is not None else value
        changes = (
            [
                Change(
                    Artifact.GENERATION_CONFIG,
                    ChangeKind.CHANGED,
                    "generation_config.json",
                    "temperature",
                    value,
                    new,
                    f"temperature changed: {value} → {new}",
                    "",
                )
            ]
            if new != value
            else []
        )
        publish(
            app.advisories,
            repo_id=rid,
            commit=commit,
            previous=previous,
            changes=changes,
            estimate_before=None,
            estimate_after=None,
            repo_url=url,
            overrides=None,
            prefix="BENCH",
            now=when,
        )
        app.store.mark_analysed(rid, sha, when)
        previous, value = sha, new
    built = time.perf_counter() - started
    with app.advisories.transaction() as tx:
        n_open = len(tx.in_state(rid, AdvisoryState.OPEN))
        n_fixed = len(tx.in_state(rid, AdvisoryState.FIXED))
    pipeline = app.pipeline
    now = T0 + timedelta(days=30)
    whole: list[float] = []
    chain_only: list[float] = []
    for _ in range(RUNS):
        t = time.perf_counter()
        marks = app.store.revision_marks(rid)
        chain = pipeline._chain(rid, marks)
        chained = time.perf_counter() - t
        live = [m for m, _, away in marks if not away]
        restore_revived(app.advisories, rid, live, now, chain)
        whole.append(time.perf_counter() - t)
        chain_only.append(chained)
        assert len(chain) == n
    app.store.close()
    return (
        built,
        n_open,
        n_fixed,
        statistics.median(whole),
        _pct(whole, 0.95),
        statistics.median(chain_only),
    )


def run() -> str:
    import os

    rows = []
    for n in SIZES:
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "watchlist.yaml").write_text("repos: []\n")
            built, n_open, n_fixed, median, p95, chain = _repo(n, Path(tmp))
        rows.append(
            f"| {n:,} | {n_open} open, {n_fixed} fixed | {chain * 1000:.1f} ms "
            f"| {median * 1000:.1f} ms | {p95 * 1000:.1f} ms | {built:.1f} s |"
        )
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return "\n".join(
        [
            "## Re-deriving versions per ingesting poll (`make bench`, "
            "`python -m bench.run versions`)",
            "",
            "One repo on SQLite, its N revisions all analysed and published by the real publisher "
            "(one generation default along a seeded random walk of 3 values); per ingesting poll "
            "the pipeline reads the analysed line (`Pipeline._chain`) and re-derives every open "
            "and fixed advisory's versions from it in one transaction (`restore_revived` with "
            f"the chain). {RUNS} runs each on the same state (no rewrite), as on an ordinary poll "
            "that ingests.",
            "",
            "| revisions | advisories | read the line | line + re-derive, median | p95 | build |",
            "|---:|---|---:|---:|---:|---:|",
            *rows,
            "",
            "The no-change poll (no new revision) does not reach this: still 1 request per repo "
            f"and no analysis (`## Ingest` (a), not rerun with this section). Load average at the "
            f"end: {load} (2 cores "
            "shared with other helpers).",
        ]
    )
