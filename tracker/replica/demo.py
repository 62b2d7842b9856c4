"""Build the demo Hub: replay demo/repos/*/HISTORY.tsv into replica git repos, with generated weights.

Each `demo/repos/<org>__<name>/` holds the real files (copied from ../shared/corpus, see
demo/SOURCES.md), a `HISTORY.tsv` replay plan (one row per file version; rows sharing a `seq`
are one commit, keeping the source commit's message, author and date) and optionally a
`WEIGHTS.tsv` (at which `seq` to (re)generate safetensors shards, in which dtype and layout).
Everything is deterministic: the same demo data always gives the same commit shas.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from tracker.replica.repos import LfsPointer, commit, init_repo, write_sparse_lfs_object
from tracker.replica.stgen import (
    OidCache,
    Shard,
    Tensor,
    build_shards,
    encode_header,
    index_json,
    model_tensors,
    shard_by_index,
    shard_evenly,
    write_shards,
)
from tracker.shared.domain import RepoId, Sha, parse_repo_id
from tracker.shared.errors import TrackerError

DEMO_DIR = Path(__file__).resolve().parents[1] / "demo_data"
"""The packaged demo data (`tracker/demo_data/repos/`, `lfs-oids.tsv`, the demo watchlist)."""

DEMO_TOKEN = "hf_trackerdemo_0000000000000000000000"
"""The token `build_demo_hub(..., gated=True)` grants access to the gated demo repos."""

GATED: Mapping[str, str] = {"meta-llama/Llama-2-7b-hf": "manual"}
"""Demo repos that are gated on the real Hub (their README front matter has `extra_gated_*`)."""

HISTORY_COLUMNS = (
    "seq",
    "source_commit",
    "date",
    "author",
    "message",
    "path",
    "local_file",
    "synthetic",
)
WEIGHTS_COLUMNS = ("seq", "dtype", "layout", "architecture")


class DemoDataError(TrackerError):
    """The demo data (HISTORY.tsv, WEIGHTS.tsv or a file they name) is missing or inconsistent."""


@dataclass(frozen=True)
class HistoryRow:
    """One file version to replay: `path` gets the bytes of `local_file` (None: delete)."""

    seq: int
    source_commit: str
    date: datetime
    author: str
    message: str
    path: str
    local_file: str | None
    synthetic: str


@dataclass(frozen=True)
class WeightsStep:
    """At commit `seq`, (re)generate the weights in `dtype`, laid out as `layout`.

    `layout` is `index` (the commit's model.safetensors.index.json decides the shards),
    `single` (one model.safetensors) or `even:N` (N shards of similar size plus a generated
    index). `architecture` overrides config.json's `architectures[0]` when set.
    """

    seq: int
    dtype: str
    layout: str
    architecture: str | None


def _read_tsv(path: Path, columns: Sequence[str]) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
        if tuple(reader.fieldnames or ()) != tuple(columns):
            raise DemoDataError(f"{path}: header must be {' '.join(columns)} (tab-separated)")
        return list(reader)


def load_history(repo_dir: Path) -> list[HistoryRow]:
    """The rows of `repo_dir/HISTORY.tsv`, ordered by seq then path; checks that every row of
    one seq shares commit, date, author and message, and that seq runs 1..n without gaps."""
    rows = []
    for raw in _read_tsv(repo_dir / "HISTORY.tsv", HISTORY_COLUMNS):
        try:
            rows.append(
                HistoryRow(
                    seq=int(raw["seq"]),
                    source_commit=raw["source_commit"],
                    date=datetime.fromisoformat(raw["date"]),
                    author=raw["author"],
                    message=raw["message"],
                    path=raw["path"],
                    local_file=None if raw["local_file"] == "-" else raw["local_file"],
                    synthetic=raw["synthetic"],
                )
            )
        except ValueError as exc:
            raise DemoDataError(f"{repo_dir}/HISTORY.tsv: bad row {raw}: {exc}") from exc
    rows.sort(key=lambda r: (r.seq, r.path))
    seqs = sorted({r.seq for r in rows})
    if seqs != list(range(1, len(seqs) + 1)):
        raise DemoDataError(f"{repo_dir}/HISTORY.tsv: seq must run 1..n, got {seqs}")
    for seq in seqs:
        group = {(r.source_commit, r.date, r.author, r.message) for r in rows if r.seq == seq}
        if len(group) != 1:
            raise DemoDataError(f"{repo_dir}/HISTORY.tsv: seq {seq} mixes commits {group}")
    return rows


def load_weights(repo_dir: Path) -> list[WeightsStep]:
    """The steps of `repo_dir/WEIGHTS.tsv` (none when the file is absent), by seq."""
    path = repo_dir / "WEIGHTS.tsv"
    if not path.is_file():
        return []
    steps = [
        WeightsStep(
            int(r["seq"]),
            r["dtype"],
            r["layout"],
            None if r["architecture"] == "-" else r["architecture"],
        )
        for r in _read_tsv(path, WEIGHTS_COLUMNS)
    ]
    return sorted(steps, key=lambda s: s.seq)


def demo_repo_ids(data_dir: Path = DEMO_DIR) -> list[RepoId]:
    """The repo ids of the demo, from `data_dir/repos/<org>__<name>/`, sorted."""
    repos = data_dir / "repos"
    if not repos.is_dir():
        raise DemoDataError(f"no demo data at {repos}")
    return sorted(
        parse_repo_id(d.name.replace("__", "/", 1))
        for d in repos.iterdir()
        if (d / "HISTORY.tsv").is_file()
    )


def _layout(
    step: WeightsStep, config: Mapping[str, Any], index: bytes | None
) -> tuple[dict[str, list[Tensor]], bytes | None]:
    cfg = dict(config)
    if step.architecture is not None:
        cfg["architectures"] = [step.architecture]
    tensors = model_tensors(cfg, dtype=step.dtype)
    if step.layout == "index":
        if index is None:
            raise DemoDataError("weights layout 'index' but no model.safetensors.index.json")
        return shard_by_index(tensors, json.loads(index)["weight_map"], cfg), None
    if step.layout == "single":
        return shard_evenly(tensors, 1), None
    if step.layout.startswith("even:"):
        layout = shard_evenly(tensors, int(step.layout.removeprefix("even:")))
        return layout, index_json(layout)
    raise DemoDataError(f"unknown weights layout {step.layout!r}")


def plan_weights(repo_dir: Path) -> dict[int, tuple[list[Shard], bytes | None]]:
    """For each WEIGHTS.tsv step: the shards to write and the generated index (if any), by seq.

    The config (and index, for layout `index`) are those in effect after that seq's files.
    """
    rows = load_history(repo_dir)
    state: dict[str, str | None] = {}
    plans: dict[int, tuple[list[Shard], bytes | None]] = {}
    steps = {s.seq: s for s in load_weights(repo_dir)}
    for seq in sorted({r.seq for r in rows}):
        for r in rows:
            if r.seq == seq:
                state[r.path] = r.local_file
        if seq not in steps:
            continue
        cfg_file = state.get("config.json")
        if cfg_file is None:
            raise DemoDataError(f"{repo_dir}: weights at seq {seq} but no config.json yet")
        idx_file = state.get("model.safetensors.index.json")
        index = (repo_dir / idx_file).read_bytes() if idx_file else None
        layout, generated = _layout(
            steps[seq], json.loads((repo_dir / cfg_file).read_bytes()), index
        )
        plans[seq] = (build_shards(layout), generated)
    return plans


def _commit_files(
    repo_dir: Path,
    rows: Sequence[HistoryRow],
    weights: Mapping[str, LfsPointer | None],
    gen_index: bytes | None,
) -> dict[str, bytes | LfsPointer | None]:
    files: dict[str, bytes | LfsPointer | None] = {}
    for r in rows:
        files[r.path] = None if r.local_file is None else (repo_dir / r.local_file).read_bytes()
    files.update(weights)
    if gen_index is not None:
        files["model.safetensors.index.json"] = gen_index
    return files


def replay_repo(
    root: Path, repo_id: str, data: Path, cache: OidCache, *, workers: int = 2
) -> Iterator[Sha]:
    """Replay the demo data dir `data` of `repo_id` into a new replica repo under `root`, one
    commit per HISTORY.tsv seq, yielding each commit's sha once it is made (oldest first): a
    caller may stop, poll, and resume to let a history grow the way it did upstream."""
    repo = init_repo(root, repo_id)
    rows = load_history(data)
    plans = plan_weights(data)
    current_shards: set[str] = set()
    for seq in sorted({r.seq for r in rows}):
        group = [r for r in rows if r.seq == seq]
        weights: dict[str, LfsPointer | None] = {}
        gen_index = None
        if seq in plans:
            shards, gen_index = plans[seq]
            new = write_shards(repo, shards, cache, workers)
            weights.update({p: None for p in sorted(current_shards - set(new))})
            weights.update(new)
            current_shards = set(new)
        head = group[0]
        yield commit(
            repo,
            _commit_files(data, group, weights, gen_index),
            head.message,
            author=f"{head.author} <>",
            date=head.date,
        )


def build_repo(
    root: Path, repo_id: str, data: Path, cache: OidCache, *, workers: int = 2
) -> list[Sha]:
    """Replay the demo data dir `data` of `repo_id` into a new replica repo under `root`.

    Returns the commit shas, oldest first (one per HISTORY.tsv seq)."""
    return list(replay_repo(root, repo_id, data, cache, workers=workers))


def build_demo_hub(
    root: Path,
    *,
    data_dir: Path = DEMO_DIR,
    oid_cache: Path | None = None,
    workers: int = 2,
    gated: bool = False,
) -> list[RepoId]:
    """Create every demo repo under `root` (which must not hold them yet); returns their ids.

    Weights are sparse LFS objects of real size; their sha256 oids come from `oid_cache`
    (default `data_dir/lfs-oids.tsv`, read only) or are computed (slow: ~1.5 GB/s per worker).
    With `gated`, the repos in GATED get a `.replica.json` and `DEMO_TOKEN` is granted them in
    `root/.replica-tokens.json`. Deterministic: the same data gives the same commit shas.
    """
    cache = OidCache(oid_cache if oid_cache is not None else data_dir / "lfs-oids.tsv")
    cache.path = None  # never write the checked-in cache from a build
    ids = demo_repo_ids(data_dir)
    for rid in ids:
        build_repo(root, rid, data_dir / "repos" / rid.replace("/", "__"), cache, workers=workers)
    if gated:
        grants = []
        for gated_id, mode in GATED.items():
            if gated_id in ids:
                org, name = gated_id.split("/")
                (root / org / f"{name}.replica.json").write_text(json.dumps({"gated": mode}) + "\n")
                grants.append(gated_id)
        (root / ".replica-tokens.json").write_text(json.dumps({DEMO_TOKEN: grants}) + "\n")
    return ids


def refresh_oid_cache(data_dir: Path = DEMO_DIR, *, workers: int = os.cpu_count() or 2) -> int:
    """Compute and save the oid of every demo shard missing from `data_dir/lfs-oids.tsv`.

    Returns the number of entries; stale entries (no longer used by any demo shard) are dropped.
    """
    cache = OidCache(data_dir / "lfs-oids.tsv")
    shards = [
        s
        for rid in demo_repo_ids(data_dir)
        for plan in plan_weights(data_dir / "repos" / rid.replace("/", "__")).values()
        for s in plan[0]
    ]
    cache.oids(shards, workers)
    used = {s.key for s in shards}
    cache.entries = {k: v for k, v in cache.entries.items() if k in used}
    cache.dirty = True
    cache.save()
    return len(cache.entries)


DEEPSEEK_V3_CONFIG = "deepseek_v3_config.json"


def build_sharded_repo(
    root: Path, repo_id: str, shards: int = 163, *, scale: int = 64, data_dir: Path = DEMO_DIR
) -> Path:
    """A one-commit repo with a DeepSeek-V3-style checkpoint in `shards` safetensors shards.

    The tensors are every tensor of DeepSeek-V3 (671B + MTP; names, dtypes and FP8 scale
    tensors as its checkpoint declares them, from `demo/deepseek_v3_config.json`) with each
    dimension divided by `scale` (rounded up), so the headers are full-size (91,991 tensors in
    all) while the objects stay small enough to hash at once; the index is generated to match.
    For ingestion benchmarks: the cost is in the number and size of headers, not the data.
    """
    config = json.loads((data_dir / DEEPSEEK_V3_CONFIG).read_bytes())
    tensors = [
        Tensor(t.name, t.dtype, tuple(-(-d // scale) for d in t.shape))
        for t in model_tensors(config)
    ]
    layout = shard_evenly(tensors, shards)
    repo = init_repo(root, repo_id)
    files: dict[str, bytes | LfsPointer | None] = {
        "config.json": (data_dir / DEEPSEEK_V3_CONFIG).read_bytes(),
        "model.safetensors.index.json": index_json(layout),
    }
    for path in sorted(layout):
        head, size = encode_header(layout[path], {"format": "pt"})
        files[path] = write_sparse_lfs_object(repo, head, size)
    commit(
        repo,
        files,
        "Add DeepSeek-V3-shaped checkpoint (scaled) for benchmarks",
        date=datetime(2025, 1, 1),
    )
    return repo


if __name__ == "__main__":  # pragma: no cover - maintenance entry point
    import sys

    if sys.argv[1:] == ["--refresh-cache"]:
        print(refresh_oid_cache(), "entries in", DEMO_DIR / "lfs-oids.tsv")
    else:
        sys.exit("usage: python -m tracker.replica.demo --refresh-cache")
