"""The analysis worker imports transformers and torch (3.5 s idle, 15 s on this 2-core machine
under load) only for the first revision whose config.json or generation_config.json changed,
the executed effects' inputs; a worker whose revisions change neither never imports them. The
import runs outside that revision's memory budget (a 400 MiB budget is far below what importing
torch maps) and its time budget: the revision's config change is still decided by running
transformers."""

from __future__ import annotations

from pathlib import Path

import pytest
from workkit import commit_eos

from tracker.app import build
from tracker.ingest.snapshots import poll_all
from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo
from tracker.settings import load_settings

pytestmark = pytest.mark.replica


def _has_torch(pid: int | None) -> bool:
    assert pid is not None
    return "libtorch" in Path(f"/proc/{pid}/maps").read_text()


def test_transformers_is_imported_for_the_first_config_change_outside_its_budget(
    tmp_path: Path,
) -> None:
    root = tmp_path / "hub"
    repo = init_repo(root, "acme/lazy")
    first = commit_eos(repo, 2)
    readme = commit(repo, {"README.md": b"# lazy\n"}, "a card")
    (tmp_path / "watchlist.yaml").write_text("repos:\n  - id: acme/lazy\n")
    with Replica(root) as hub:
        settings = load_settings(
            state_dir=tmp_path / "state",
            watchlist=tmp_path / "watchlist.yaml",
            hf_endpoint=hub.url,
            analysis_memory_mib=400,
            effects_cache_dir=tmp_path / "effects",
        )
        app = build(settings)
        try:
            pipeline = app.pipeline
            [watched] = pipeline.watchlist().repos
            [poll] = poll_all(app.store, [watched], pipeline.source_for)
            assert poll.new_revisions == (first, readme)
            analysed, _withdrawn, error, overran = pipeline.analyse_repo(watched)
            assert ([a.sha for a in analysed], error, overran) == ([first, readme], None, ())
            # the first revision and a card change: no config to execute, no torch
            assert not _has_torch(pipeline.worker.pid)
            third = commit_eos(repo, 7)
            [poll] = poll_all(app.store, [watched], pipeline.source_for)
            assert poll.new_revisions == (third,)
            analysed, _withdrawn, error, overran = pipeline.analyse_repo(watched)
            assert ([a.sha for a in analysed], error, overran) == ([third], None, ())
            assert _has_torch(pipeline.worker.pid)
            [advisory] = [app.advisories.get(i) for i in analysed[0].advisories]
        finally:
            app.close()
    assert advisory is not None
    changes = advisory.record["database_specific"]["changes"]  # type: ignore[index]
    [eos] = [c for c in changes if c["key"] == "eos_token_id"]  # type: ignore[index,union-attr]
    assert (eos["rule"], eos["decided_by"]) == ("executed-generation-ids", "transformers 5.24.0")
    assert list((tmp_path / "effects").rglob("*.json")), "the executed effect was not cached"

    # A second deployment (its own store) with the same effect cache analyses the same history
    # without importing transformers or torch, and publishes the same advisory.
    with Replica(root) as hub:
        again = build(settings.model_copy(update={"state_dir": tmp_path / "state-2",
                                                  "hf_endpoint": hub.url}))  # fmt: skip
        try:
            pipeline = again.pipeline
            [watched] = pipeline.watchlist().repos
            poll_all(again.store, [watched], pipeline.source_for)
            analysed, _withdrawn, error, overran = pipeline.analyse_repo(watched)
            assert ([a.sha for a in analysed], error, overran) == ([first, readme, third], None, ())
            assert not _has_torch(pipeline.worker.pid)
            [cached] = [again.advisories.get(i) for i in analysed[2].advisories]
        finally:
            again.close()
    assert cached is not None
    assert cached.record["database_specific"] == advisory.record["database_specific"]
    assert cached.record["details"] == advisory.record["details"]
