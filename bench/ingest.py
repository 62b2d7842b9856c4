"""Ingest benchmark: HTTP requests and wall time of polls against the Hub replica (`make bench`).

(a) a no-change poll of N watched repos (default 1,000; BENCH_INGEST_REPOS overrides): requests per
repo (target 1) and wall time; (b) a repo with a 163-shard index (DeepSeek-R1's real config and
tokenizer files from ../shared/corpus, tensor layout from `tracker.replica.stgen`) where one small
file changed: requests and bytes to ingest the new revision, side by side with
`snapshot_download(allow_patterns=<tracked non-weight patterns>)` of the same revision, cold and
with the previous revision already in the HF cache.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_DISABLE_XET", "1")

from tracker.ingest.snapshots import poll_all, poll_repo
from tracker.logs import configure as configure_logs
from tracker.replica import Replica, RequestRecord
from tracker.replica.repos import commit, init_repo, write_lfs_object
from tracker.replica.stgen import build_shards, index_json, model_tensors, shard_evenly
from tracker.shared.artifacts import DEFAULT_TRACKED, is_header_only, is_pickle
from tracker.shared.domain import parse_repo_id
from tracker.sources.fake import FakeSource
from tracker.sources.hub import HubSource
from tracker.store import Store
from tracker.watchlist import WatchedRepo

T0 = datetime(2025, 1, 1, tzinfo=UTC)
CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "models"
SHARDED = parse_repo_id("deepseek-ai/DeepSeek-R1")
NON_WEIGHT_PATTERNS = [p for p in DEFAULT_TRACKED if not is_header_only(p) and not is_pickle(p)]


def _source(url: str) -> HubSource:
    return HubSource(url, None, timeout_s=30, retry_attempts=3)


def _make_repo(root: Path, i: int) -> WatchedRepo:
    rid = parse_repo_id(f"bench-org{i % 10}/model-{i:04d}")
    commit(init_repo(root, rid), {"config.json": json.dumps({"i": i}).encode()}, "init", date=T0)
    return WatchedRepo(rid)


def _no_change(tmp: Path, n: int) -> dict[str, float]:
    root = tmp / "hub-a"
    with ThreadPoolExecutor(8) as pool:
        repos = list(pool.map(lambda i: _make_repo(root, i), range(n)))
    store = Store.open(f"sqlite:///{tmp / 'a.db'}")
    try:
        with Replica(root) as hub:
            src = _source(hub.url)
            # setup: the first (ingesting) poll, 8 repos at a time like a busy daemon
            started = time.perf_counter()
            with ThreadPoolExecutor(8) as pool:
                first = list(pool.map(lambda w: poll_repo(store, src, w), repos))
            first_s = time.perf_counter() - started
            assert all(r.revisions_ingested == 1 for r in first), "first poll failed"
            # measured: one sequential no-change poll of every repo (`tracker poll --once`)
            hub.reset_requests()
            started = time.perf_counter()
            again = poll_all(store, repos, lambda _w: src)
            wall = time.perf_counter() - started
            requests = len(hub.requests)
            assert all(r.revisions_ingested == 0 and r.requests == 1 for r in again)
    finally:
        store.close()
    # the same no-change poll against the in-memory FakeSource: tracker + store overhead only
    fake = FakeSource()
    for w in repos:
        fake.commit(w.repo_id, {"config.json": b"{}"}, "init")
    fake_store = Store.open(f"sqlite:///{tmp / 'a-fake.db'}")
    try:
        poll_all(fake_store, repos, lambda _w: fake)
        fake.calls.clear()
        started = time.perf_counter()
        poll_all(fake_store, repos, lambda _w: fake)
        fake_s = time.perf_counter() - started
        assert dict(fake.calls) == {"resolve_ref": n}
    finally:
        fake_store.close()
    return {
        "repos": n,
        "requests": requests,
        "wall_s": wall,
        "first_poll_s": first_s,
        "fake_s": fake_s,
    }


def _corpus_file(name: str) -> bytes:
    return (CORPUS / "deepseek-ai__DeepSeek-R1" / name).read_bytes()


def _tally(records: Sequence[RequestRecord]) -> tuple[int, int, int]:
    """(requests, GETs on resolve URLs (file content), bytes sent)."""
    gets = sum(1 for r in records if r.method == "GET" and "/resolve/" in r.path)
    return len(records), gets, sum(r.bytes_sent for r in records)


def _sharded(tmp: Path) -> dict[str, object]:
    from huggingface_hub import snapshot_download

    config = json.loads(_corpus_file("config.json"))
    layout = shard_evenly(model_tensors(config), 163)
    shards = build_shards(layout)
    root = tmp / "hub-b"
    repo = init_repo(root, SHARDED)
    files: dict[str, object] = {
        "config.json": _corpus_file("config.json"),
        "generation_config.json": _corpus_file("generation_config.json"),
        "tokenizer_config.json": _corpus_file("tokenizer_config.json"),
        "README.md": _corpus_file("README.frontmatter.md"),
        "model.safetensors.index.json": index_json(layout),
    }
    # Shard objects hold the real headers; the weight bytes after them are omitted (nothing here
    # reads weights, and hashing 680 GB of zeros for real oids would dominate the run).
    for s in shards:
        files[s.path] = write_lfs_object(repo, s.head)
    first_sha = commit(repo, files, "initial", date=T0)  # type: ignore[arg-type]
    gen = json.loads(_corpus_file("generation_config.json"))
    gen["temperature"] = 0.7
    new = commit(repo, {"generation_config.json": (json.dumps(gen, indent=2) + "\n").encode()},
                 "bench: change one small file", date=T0 + timedelta(days=1))  # fmt: skip
    store = Store.open(f"sqlite:///{tmp / 'b.db'}")
    out: dict[str, object] = {"shards": len(shards), "tree_files": len(shards) + 6}
    try:
        with Replica(root) as hub:
            src = _source(hub.url)
            # ingest the previous revision first (pinned by sha: 163 headers by Range) ...
            pinned = poll_repo(store, src, WatchedRepo(SHARDED, ref=first_sha))
            assert pinned.new_revisions == (first_sha,), pinned
            out["setup_header_reads"] = pinned.files_fetched
            # ... then measure ingesting the new revision on main
            hub.reset_requests()
            started = time.perf_counter()
            report = poll_repo(store, src, WatchedRepo(SHARDED))
            out["ingest_s"] = time.perf_counter() - started
            assert report.new_revisions == (new,), report
            out["ingest"] = _tally(hub.requests)
            out["ingest_files"] = report.files_fetched
            out["ingest_file_bytes"] = report.bytes_fetched
            for label, warm in (("cold", False), ("warm", True)):
                cache = tmp / f"hf-cache-{label}"
                if warm:
                    snapshot_download(str(SHARDED), revision=first_sha, cache_dir=cache,
                                      allow_patterns=NON_WEIGHT_PATTERNS, endpoint=hub.url)  # fmt: skip
                hub.reset_requests()
                started = time.perf_counter()
                snapshot_download(str(SHARDED), revision=new, cache_dir=cache,
                                  allow_patterns=NON_WEIGHT_PATTERNS, endpoint=hub.url)  # fmt: skip
                out[f"snapshot_{label}_s"] = time.perf_counter() - started
                out[f"snapshot_{label}"] = _tally(hub.requests)
    finally:
        store.close()
    return out


def run() -> str:
    """Run both measurements and return the Markdown section."""
    n = int(os.environ.get("BENCH_INGEST_REPOS", "1000"))
    configure_logs(level="WARNING")
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp_s:
        tmp = Path(tmp_s)
        a = _no_change(tmp, n)
        b = _sharded(tmp)
    ing, cold, warm = b["ingest"], b["snapshot_cold"], b["snapshot_warm"]
    assert isinstance(ing, tuple) and isinstance(cold, tuple) and isinstance(warm, tuple)
    lines = [
        "## Ingest (`make bench`, `python -m bench.run ingest`)",
        "",
        f"### (a) No-change poll of {a['repos']:,} watched repos (replica on loopback, SQLite store)",
        "",
        "| repos | HTTP requests | requests per repo | wall time | per repo | setup: first poll, 8 threads |",
        "|---:|---:|---:|---:|---:|---:|",
        f"| {a['repos']:,} | {a['requests']:,} | {a['requests'] / a['repos']:.2f} | "
        f"{a['wall_s']:.1f} s | {1000 * a['wall_s'] / a['repos']:.1f} ms | {a['first_poll_s']:.1f} s |",
        "",
        f"The same no-change poll against the in-memory FakeSource (tracker and SQLite store only, "
        f"no HTTP): {a['fake_s']:.1f} s, {1000 * a['fake_s'] / a['repos']:.1f} ms per repo; the rest "
        "of the wall time above is the replica answering `GET /api/models/{repo}/refs`.",
        "",
        f"### (b) New revision of a {b['shards']}-shard repo ({SHARDED}) where one small file changed "
        "(`generation_config.json`)",
        "",
        "| method | HTTP requests | file GETs (resolve) | bytes sent by the server | wall time |",
        "|---|---:|---:|---:|---:|",
        f"| tracker ingest (`poll_repo`) | {ing[0]} | {ing[1]} | {ing[2]:,} | {b['ingest_s']:.2f} s |",
        f"| `snapshot_download(allow_patterns=tracked non-weight)`, cold cache | {cold[0]} | {cold[1]} "
        f"| {cold[2]:,} | {b['snapshot_cold_s']:.2f} s |",
        f"| same, previous revision already cached | {warm[0]} | {warm[1]} | {warm[2]:,} "
        f"| {b['snapshot_warm_s']:.2f} s |",
        "",
        f"tracker fetched {b['ingest_files']} file(s), {b['ingest_file_bytes']:,} bytes of file "
        "content; its requests are: refs, commits, tree (1000 entries per page), the changed file. "
        f"allow_patterns = `{', '.join(NON_WEIGHT_PATTERNS)}`. Shard objects hold DeepSeek-R1's "
        "real tensor headers (163 files from `stgen.shard_evenly`) with the weight bytes omitted; "
        "neither method reads weights.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(run())
