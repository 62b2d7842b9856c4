"""The analysis budget's cost (`python -m bench.run budget`): every revision of four demo
histories (the push bench's: Llama-2-7b-hf, bloom-560m, chatglm2-6b, Mixtral-8x7B-v0.1) analysed
twice, once in this process (`Analyst.compute`, what the pipeline ran before the budget) and once
in the analysis worker (`AnalysisWorker.run`: the same computation under the time and memory
budget, plus pickling the two snapshots there and the result back). The snapshots are ingested
first from a replica of the histories; chat-template renders go to the render worker in both.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

REPOS = (
    "meta-llama/Llama-2-7b-hf",
    "bigscience/bloom-560m",
    "THUDM/chatglm2-6b",
    "mistralai/Mixtral-8x7B-v0.1",
)


def _stats(values: list[float]) -> tuple[str, str, str]:
    ms = sorted(v * 1000 for v in values)
    p90 = ms[min(len(ms) - 1, round(0.9 * (len(ms) - 1)))]
    return f"{statistics.median(ms):.0f} ms", f"{p90:.0f} ms", f"{ms[-1]:.0f} ms"


def run() -> str:
    from tracker.app import build
    from tracker.estimate import EstimateSettings
    from tracker.pipeline import Analyst
    from tracker.preflight import PreflightSettings
    from tracker.replica import Replica
    from tracker.replica.demo import DEMO_DIR, build_repo
    from tracker.replica.stgen import OidCache
    from tracker.sandbox.analysis_worker import AnalysisWorker
    from tracker.settings import load_settings

    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        cache = OidCache(DEMO_DIR / "lfs-oids.tsv")
        cache.path = None  # read only
        for rid in REPOS:
            build_repo(tmp / "hub", rid, DEMO_DIR / "repos" / rid.replace("/", "__"), cache)
        watchlist = tmp / "watchlist.yaml"
        watchlist.write_text("repos:\n" + "".join(f"  - id: {r}\n" for r in REPOS))
        with Replica(tmp / "hub") as hub:
            settings = load_settings(
                state_dir=tmp / "state", watchlist=watchlist, hf_endpoint=hub.url
            )
            app = build(settings)
            try:
                started = time.perf_counter()
                report = app.pipeline.run_cycle()
                cycle_s = time.perf_counter() - started
                assert not report.unclean, report.unclean_line()
                requests = []
                for rid in REPOS:
                    for r in app.store.revisions(rid):  # type: ignore[arg-type]
                        before = app.store.snapshot(rid, r.previous) if r.previous else None  # type: ignore[arg-type]
                        requests.append(
                            {
                                "before": before,
                                "after": app.store.snapshot(rid, r.sha),  # type: ignore[arg-type]
                                "estimate_settings": EstimateSettings.from_mapping({}),
                                "preflight_settings": PreflightSettings.from_mapping({}),
                                "estimate_before": None,
                            }
                        )
            finally:
                app.close()
        local = Analyst.default(settings)
        worker = AnalysisWorker(settings)
        try:
            t = time.perf_counter()
            worker.start()
            start_s = time.perf_counter() - t
            inproc: list[float] = []
            isolated: list[float] = []
            for i, request in enumerate(requests):
                # Alternate which goes first (render-worker warmth, caches).
                for in_worker in (False, True) if i % 2 else (True, False):
                    t = time.perf_counter()
                    if in_worker:
                        got = worker.run(request)
                        isolated.append(time.perf_counter() - t)
                    else:
                        want = local.compute(**request)
                        inproc.append(time.perf_counter() - t)
                assert got == want, "the worker's analysis differs from the in-process one"
        finally:
            worker.close()
    extra = [b - a for a, b in zip(inproc, isolated, strict=True)]
    rows = [
        ("in this process (before the budget)", *_stats(inproc)),
        ("in the analysis worker, under the budget", *_stats(isolated)),
        ("difference per revision (worker − in process)", *_stats(extra)),
    ]
    lines = [
        "## Analysis budget (`python -m bench.run budget`)",
        "",
        "Every revision of four demo histories (the push bench's) analysed twice: in this "
        "process (`Analyst.compute`, what the pipeline ran before the budget) and in the analysis "
        "worker (`AnalysisWorker.run`: the same computation under the time and memory budget, "
        "plus pickling the two snapshots there and the result back); chat-template renders go to "
        "the render worker in both, which the analysis worker starts on its first render (the "
        f"max). {len(requests)} revisions; both results compared equal for every revision. "
        f"Starting the worker (imports, once per process): {start_s:.2f} s; the whole first "
        f"poll cycle of the four repos (ingest and analysis in the worker): {cycle_s:.1f} s. "
        "Default budget: 300 s, 4096 MiB. 2 cores shared with other work.",
        "",
        "| analysis of one revision | median | p90 | max |",
        "|---|---:|---:|---:|",
        *(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} |" for r in rows),
    ]
    return "\n".join(lines) + "\n"
