"""Issue 10, item 1: every fetched byte is checked against the tree before it is stored.

Against the FakeSource, whose `damage` returns a file's bytes damaged the way a broken transfer
does while the tree still names the real content. Before the check, the damaged bytes were stored
as that revision's file for ever and analysed (spurious advisories); now a mismatch is re-read,
and if it persists the revision is neither stored nor analysed this poll and is fetched again
the next.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest
from helpers_ingest import open_store, safetensors_bytes

from tracker.ingest.integrity import check_content, check_object, content_mismatch, git_blob_id
from tracker.ingest.snapshots import INTEGRITY_READS, poll_repo
from tracker.shared.domain import RepoId, TreeEntry
from tracker.shared.errors import IntegrityError
from tracker.sources.fake import FakeSource
from tracker.store import RepoStatus, Store
from tracker.watchlist import WatchedRepo

RID = RepoId("acme/tiny")
CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "models"
CONFIG = (CORPUS / "openai__gpt-oss-20b" / "config.json").read_bytes()
"""openai/gpt-oss-20b's real config.json."""
WEIGHTS = safetensors_bytes({"w": ("F32", [4, 4]), "b": ("BF16", [4])})


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = open_store(tmp_path)
    yield s
    s.close()


def test_git_blob_id_is_gits_own(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_bytes(CONFIG)
    out = subprocess.run(
        ["git", "hash-object", str(tmp_path / "config.json")],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert git_blob_id(CONFIG) == out.stdout.strip()
    entry = TreeEntry("config.json", out.stdout.strip(), len(CONFIG))
    assert content_mismatch(entry, CONFIG) is None
    assert check_content(entry, CONFIG, "c") == CONFIG


def test_each_kind_of_mismatch_is_named() -> None:
    entry = TreeEntry("config.json", git_blob_id(CONFIG), len(CONFIG))
    cut = content_mismatch(entry, CONFIG[:100])
    assert cut is not None and cut.startswith(f"100 bytes, the tree says {len(CONFIG):,}; ")
    flipped = CONFIG[:10] + b"X" + CONFIG[11:]
    assert content_mismatch(entry, flipped) == (
        f"git blob id {git_blob_id(flipped)[:12]} is not the tree's {entry.blob_id[:12]}"
    )
    lfs = TreeEntry("tokenizer.json", "p" * 40, 3, hashlib.sha256(b"abc").hexdigest())
    assert content_mismatch(lfs, b"abc") is None
    assert content_mismatch(lfs, b"abd") == (
        f"sha256 {hashlib.sha256(b'abd').hexdigest()[:12]} is not the tree's LFS oid "
        f"{lfs.lfs_sha256[:12]}"  # type: ignore[index]
    )
    with pytest.raises(IntegrityError, match=r"^c: integrity check failed: got 2 bytes"):
        check_content(lfs, b"ab", "c")
    with pytest.raises(IntegrityError, match="the server's object is 9 bytes, the tree says 3"):
        check_object(lfs, "w", total_size=9, oid=None)
    with pytest.raises(IntegrityError, match="the server's object is aaaaaaaaaaaa"):
        check_object(lfs, "w", total_size=3, oid="a" * 64)
    check_object(lfs, "w", total_size=3, oid=lfs.lfs_sha256)


def test_a_damaged_read_is_read_again_and_only_the_real_bytes_are_stored(store: Store) -> None:
    src = FakeSource()
    sha = src.commit(RID, {"config.json": CONFIG}, "upload")
    src.damage("config.json", times=INTEGRITY_READS - 1)
    report = poll_repo(store, src, WatchedRepo(RID))
    assert (report.status, report.new_revisions) == (RepoStatus.OK, (sha,))
    assert src.calls["read_file"] == INTEGRITY_READS
    assert store.snapshot(RID, sha).files == {"config.json": CONFIG}


@pytest.mark.parametrize("keep", [None, 100, 0])
def test_persistent_damage_stores_nothing_and_the_next_poll_repairs(
    store: Store, keep: int | None
) -> None:
    src = FakeSource()
    first = src.commit(RID, {"config.json": CONFIG}, "upload")
    assert poll_repo(store, src, WatchedRepo(RID)).status is RepoStatus.OK
    edited = CONFIG.replace(b'"gpt_oss"', b'"gpt-oss"')
    second = src.commit(RID, {"config.json": edited}, "edit")
    src.damage("config.json", times=INTEGRITY_READS, keep=keep)
    report = poll_repo(store, src, WatchedRepo(RID))
    assert report.status is RepoStatus.FAILING
    assert report.error is not None and report.error.startswith(
        f"IntegrityError: {RID}@{second}:config.json: integrity check failed "
        f"{INTEGRITY_READS} times: "
    )
    assert [r.sha for r in store.revisions(RID)] == [first]  # nothing stored, cursor kept
    assert store.repo_state(RID).cursor == first
    assert store.pending_analysis(RID) == [first]  # never analysed: it was never stored
    again = poll_repo(store, src, WatchedRepo(RID))  # the fault has stopped
    assert (again.status, again.new_revisions) == (RepoStatus.OK, (second,))
    assert store.snapshot(RID, second).files == {"config.json": edited}


def test_a_header_damaged_in_transit_is_read_again(store: Store) -> None:
    src = FakeSource()
    sha = src.commit(RID, {"model.safetensors": WEIGHTS}, "weights")
    src.damage("model.safetensors", times=1, keep=20)  # cut inside the header
    report = poll_repo(store, src, WatchedRepo(RID))
    assert report.status is RepoStatus.OK
    snap = store.snapshot(RID, sha)
    assert snap.unreadable == {}
    assert snap.headers["model.safetensors"].tensors["w"].shape == (4, 4)


def test_a_header_broken_in_the_file_itself_is_recorded_unreadable(store: Store) -> None:
    src = FakeSource()
    broken = WEIGHTS[:8] + WEIGHTS[8:].replace(b'"F32"', b'"F64"')
    sha = src.commit(RID, {"model.safetensors": broken}, "weights")
    report = poll_repo(store, src, WatchedRepo(RID))
    assert report.status is RepoStatus.OK
    assert store.snapshot(RID, sha).unreadable == {
        "model.safetensors": "UnreadableArtifactError: tensor 'w': F64[4, 4] needs 128 bytes "
        "but data_offsets span 64"
    }
    assert src.calls["read_safetensors_header"] == 2  # read twice: the same reason both times
