"""The git source: a local path or URL read through a bare mirror, same semantics as the Hub."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from helpers_ingest import open_store, safetensors_bytes

from tracker.ingest.snapshots import poll_repo
from tracker.replica.repos import commit, init_repo, lfs_object_path, set_ref
from tracker.shared.domain import RepoId, Sha
from tracker.shared.errors import EntryNotFoundError, RepoNotFoundError, RevisionNotFoundError
from tracker.sources.git import GitSource
from tracker.store import RepoStatus, Store
from tracker.watchlist import WatchedRepo

RID = RepoId("acme/gitty")
T0 = datetime(2025, 3, 1, tzinfo=UTC)
WEIGHTS = safetensors_bytes({"w": ("BF16", [8, 8])})


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = open_store(tmp_path)
    yield s
    s.close()


def make_repo(tmp_path: Path) -> tuple[Path, list[Sha]]:
    repo = init_repo(tmp_path / "upstream", RID)
    shas = [
        commit(repo, {"config.json": b'{"a": 1}'}, "one", date=T0),
        commit(
            repo,
            {"model.safetensors": WEIGHTS, "config.json": b'{"a": 2}'},
            "two\n\nbody",
            date=T0 + timedelta(hours=1),
        ),
    ]
    return repo, shas


def test_git_source_reads_history_tree_files_and_lfs_headers(tmp_path: Path) -> None:
    repo, shas = make_repo(tmp_path)
    src = GitSource(tmp_path / "mirrors", str(repo))
    assert src.resolve_ref(RID, "main") == shas[1]
    assert (tmp_path / "mirrors" / "acme__gitty.git" / "HEAD").is_file()
    commits = src.list_commits(RID, "main")
    assert [c.sha for c in commits] == shas[::-1]
    assert commits[0].parents == (shas[0],) and commits[0].title == "two"
    assert commits[0].message == "body" and commits[0].date == T0 + timedelta(hours=1)
    tree = {e.path: e for e in src.list_tree(RID, shas[1])}
    assert tree["model.safetensors"].size == len(WEIGHTS)
    assert tree["model.safetensors"].lfs_sha256 is not None
    assert tree["config.json"].lfs_sha256 is None and tree["config.json"].size == 8
    assert src.read_file(RID, shas[0], "config.json", 100) == b'{"a": 1}'
    header = src.read_safetensors_header(RID, shas[1], "model.safetensors", 10_000)
    assert header.tensors["w"].shape == (8, 8)
    with pytest.raises(EntryNotFoundError):
        src.read_file(RID, shas[0], "nope.json", 100)
    with pytest.raises(RevisionNotFoundError):
        src.resolve_ref(RID, "dev")


def test_git_poll_follows_new_commits_force_push_and_missing_lfs(
    tmp_path: Path, store: Store
) -> None:
    repo, shas = make_repo(tmp_path)
    watched = WatchedRepo(RID, git=str(repo))
    src = GitSource(tmp_path / "mirrors", str(repo))
    assert poll_repo(store, src, watched).new_revisions == tuple(shas)
    new = commit(repo, {"tokenizer_config.json": b"{}"}, "three", date=T0 + timedelta(hours=2))
    assert poll_repo(store, src, watched).new_revisions == (new,)
    assert poll_repo(store, src, watched).revisions_ingested == 0
    # force-push back, then a commit whose LFS object is missing locally
    set_ref(repo, "main", shas[0])
    other = safetensors_bytes({"w": ("F32", [2])})
    lost = commit(repo, {"model.safetensors": other}, "lfs", date=T0 + timedelta(hours=3))
    pointer_oid = hashlib.sha256(other).hexdigest()
    lfs_object_path(repo, pointer_oid).unlink()
    report = poll_repo(store, src, watched)
    assert report.status is RepoStatus.OK and report.rewritten == 2
    reason = store.snapshot(RID, lost).unreadable["model.safetensors"]
    assert "not in the local LFS store" in reason


def test_missing_git_repo_is_gone(tmp_path: Path, store: Store) -> None:
    src = GitSource(tmp_path / "mirrors", str(tmp_path / "nowhere"))
    with pytest.raises(RepoNotFoundError):
        src.resolve_ref(RID, "main")
    report = poll_repo(store, src, WatchedRepo(RID, git=str(tmp_path / "nowhere")))
    assert report.status is RepoStatus.GONE
