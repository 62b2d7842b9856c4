"""The cost of effects by execution (`python -m bench.run effects`): every revision step of the
corpus histories (../shared/corpus/histories) classified twice, as the analysis worker does
(`judge` over the step's diff): with the inferred rules only (today's classification without
transformers), and with the pinned transformers run on both sides of each config.json and
generation_config.json change, and `AutoTokenizer` on both sides of each tokenizer_config.json,
special_tokens_map.json and tokenizer.json change (`tracker.advisories.execute.Executor`).

Warm caches: transformers and torch imported (`Executor.warm`, paid once per worker, before the first revision that changes config.json or generation_config.json and outside its budget) and
every model type's modeling module imported by a first pass with another executor; the measured
pass uses a fresh executor, so its structure cache fills as the pipeline's does (the previous
revision's config is a hit, this revision's variants are built). The cold pass (first build of
each model type imports its modeling module) is reported beside it.
"""

from __future__ import annotations

import hashlib
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "histories"


def _pct(values: list[float], q: float) -> float:
    ms = sorted(values)
    return ms[min(len(ms) - 1, round(q * (len(ms) - 1)))]


def _steps() -> Iterator[tuple[object, object]]:
    """(before, after) snapshots of every revision step of every corpus history, oldest first;
    each snapshot holds every file of the history at its latest version so far."""
    from tracker.shared.domain import RepoId, Sha, Snapshot, TreeEntry

    for directory in sorted(p for p in CORPUS.iterdir() if p.is_dir()):
        commits: dict[str, tuple[str, list[tuple[str, Path]]]] = {}
        for line in (directory / "HISTORY.tsv").read_text().splitlines():
            if not line:
                continue
            nn, sha, date, _author, _subject, path = line.split("\t")
            found = sorted(directory.glob(f"{nn}_{sha[:8]}_*"))
            if len(found) > 1:
                found = [f for f in found if f.name == f"{nn}_{sha[:8]}_{Path(path).name}"]
            repo_path = path
            if path.endswith(".jinja"):
                repo_path = "chat_template.jinja"
            elif path.endswith("_config.json") and "/" in path:
                repo_path = "config.json"
            commits.setdefault(sha, (date, []))[1].append((repo_path, found[0]))
        files: dict[str, bytes] = {}
        before = None
        for sha, (_date, items) in sorted(commits.items(), key=lambda kv: kv[1][0]):
            files = {**files, **{p: local.read_bytes() for p, local in items}}
            tree = tuple(
                TreeEntry(p, hashlib.sha1(b).hexdigest(), len(b)) for p, b in sorted(files.items())
            )
            after = Snapshot(RepoId("corpus/" + directory.name), Sha(sha), tree, dict(files))
            if before is not None:
                yield before, after
            before = after


def run() -> str:
    from tracker.advisories.classify import Overrides
    from tracker.advisories.effects import Context
    from tracker.advisories.execute import Executor
    from tracker.advisories.service import judge
    from tracker.diff import diff_snapshots

    steps = [(b, a, diff_snapshots(b, a)) for b, a in _steps()]  # type: ignore[arg-type]
    started = time.perf_counter()
    executor = Executor()
    assert executor.warm()
    warm_s = time.perf_counter() - started

    def timed(executor: Executor | None) -> list[float]:
        out = []
        for before, after, changes in steps:
            t = time.perf_counter()
            judge(changes, Overrides(), Context(before, after, executor=executor))  # type: ignore[arg-type]
            out.append(time.perf_counter() - t)
        return out

    inferred = timed(None)
    cold = timed(executor)
    cold_builds = executor.builds
    fresh = Executor()
    fresh.warm()
    warm = timed(fresh)
    slowest = max(range(len(steps)), key=lambda i: warm[i])
    slow_step = steps[slowest][1]
    relevant = [
        i
        for i, (_, _, changes) in enumerate(steps)
        if any(c.file in ("config.json", "generation_config.json") and c.key for c in changes)
    ]
    tokenizer_files = ("tokenizer_config.json", "special_tokens_map.json", "tokenizer.json")
    tokenizer_steps = [
        i
        for i, (_, _, changes) in enumerate(steps)
        if any(c.file in tokenizer_files and c.key for c in changes)
    ]
    # one AutoTokenizer comparison with a real vocabulary: Llama-2's 1.8 MB tokenizer.json
    # (../shared/corpus/pairs) with its tokenizer_config.json with and without `use_fast`
    llama = CORPUS / "meta-llama__Llama-2-7b-hf"
    vocab = (CORPUS.parent / "pairs" / "meta-llama__Llama-2-7b-hf" / "rev-e469318").joinpath(
        "tokenizer.json"
    )
    real = {
        "tokenizer_config.json": (llama / "02_e4693182_tokenizer_config.json").read_bytes(),
        "special_tokens_map.json": (llama / "02_e4693182_special_tokens_map.json").read_bytes(),
        "tokenizer.json": vocab.read_bytes(),
    }
    unused = {
        **real,
        "tokenizer_config.json": (llama / "03_25bd8085_tokenizer_config.json").read_bytes(),
    }
    real_s = []
    for _ in range(5):
        probe = Executor()
        probe.warm()
        t = time.perf_counter()
        probe.tokenizer_effect(real, unused, "use_fast")
        real_s.append(time.perf_counter() - t)

    def row(name: str, values: list[float], sel: list[int] | None = None) -> str:
        vals = [values[i] * 1000 for i in (sel if sel is not None else range(len(values)))]
        return (
            f"| {name} | {len(vals)} | {statistics.median(vals):.0f} ms | {_pct(vals, 0.95):.0f} ms "
            f"| {max(vals):.0f} ms |"
        )

    return "\n".join(
        [
            "## Effects by execution (`make bench`, `python -m bench.run effects`)",
            "",
            f"Every revision step of the {len({s[1].repo_id for s in steps})} corpus histories "
            f"({len(steps)} steps; {len(relevant)} with a keyed config.json or "
            "generation_config.json change) classified as the analysis worker does (`judge`): "
            "inferred only, then with transformers "
            f"{executor.version} run on both sides of each config/generation change (config "
            "class from the dict, the model on the meta device, the effective GenerationConfig). "
            f"Importing transformers and torch (once per worker, before its first config or generation change, outside that revision's budget): {warm_s:.2f} s. "
            f"Cold pass: {cold_builds} model builds, each model type's modeling module imported "
            f"on first use; warm pass: a fresh executor (empty structure cache) with the modules "
            f"imported, {fresh.builds} builds. 2 cores shared with other work.",
            "",
            "| classification of one revision | revisions | median | p95 | max |",
            "|---|---:|---:|---:|---:|",
            row("inferred (today's rules, no transformers)", inferred),
            row("executed, warm caches", warm),
            row("executed, warm caches, revisions with a config/generation change", warm, relevant),
            row("executed, warm caches, revisions with a tokenizer change", warm, tokenizer_steps),
            row("executed, cold (first build of each model type)", cold),
            "",
            "The corpus histories hold no tokenizer.json, so their tokenizers are built around "
            "an empty vocabulary; with a real one (Llama-2's 1.8 MB tokenizer.json, both sides "
            "loaded uncached, `use_fast` removed): median "
            f"{statistics.median(real_s) * 1000:.0f} ms, max {max(real_s) * 1000:.0f} ms over "
            f"{len(real_s)} runs.",
            "",
            f"The slowest warm revision: {slow_step.repo_id}@{slow_step.sha[:8]} "  # type: ignore[attr-defined]
            f"({warm[slowest]:.1f} s: {len(steps[slowest][2])} changes, each a build of the "
            "whole model on the meta device). "
            "Target: ≤ 2 s per revision median with warm caches. The no-change poll does not "
            "reach the analysis (no new revision, nothing to classify): still 1 request per repo "
            "and no analysis (`## Ingest` (a)).",
        ]
    )
