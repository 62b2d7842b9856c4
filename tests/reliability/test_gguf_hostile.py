"""Hostile GGUF headers (issue 28): each is one recorded "could not read" line for its file, the
rest of the revision is stored, and the reader's peak memory stays within a few times the input;
a header cut in transit is the transport's fault (read again), never the file's content.

The cases are bench/gguf.py's (its table in bench/RESULTS.md gives their peaks)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ggufkit import write_llama2
from hostile import peak_of

from bench.gguf import CAP, hostile_headers
from tracker.ingest.snapshots import poll_repo
from tracker.shared.domain import RepoId
from tracker.shared.errors import UnreadableArtifactError
from tracker.sources.fake import FakeSource
from tracker.sources.gguf import parse_gguf_bytes
from tracker.store import RepoStatus, Store
from tracker.watchlist import WatchedRepo

RID = RepoId("acme/hostile-gguf")
CONFIG = Path("/work/shared/corpus/models/meta-llama__Llama-2-7b-hf/config.json").read_bytes()
CASES = hostile_headers()
REASONS = {
    "array length 2^63": "tokenizer.ggml.tokens: array length: declares "
    "9,223,372,036,854,775,808 of at least 8 bytes each, more than the file holds (0 bytes left)",
    "10^9 keys": "key/value count: declares 1,000,000,000, over the bound of 10,000",
    "string length 2^62": "general.name: string length: declares 4,611,686,018,427,387,904 of "
    "at least 1 bytes each, more than the file holds (64 bytes left)",
    "tensor count 2^63": "tensor count: declares 9,223,372,036,854,775,808, over the bound of "
    "100,000",
    "truncated header (cut in its token list)": "tokenizer.ggml.tokens: array length: declares "
    "151,665 of at least 8 bytes each, more than the file holds (1,047,855 bytes left)",
    "bad magic": "not a GGUF file: it begins b'GGML', not b'GGUF'",
    "arrays nested 10,000 deep": "general.nested: arrays nested deeper than 4",
}


@pytest.mark.parametrize("what", sorted(CASES))
def test_each_hostile_header_is_refused_in_bounded_memory(what: str) -> None:
    data = CASES[what]
    result, peak = peak_of(lambda: parse_gguf_bytes(data, max_bytes=CAP, file_size=len(data)))
    assert isinstance(result, UnreadableArtifactError) and str(result) == REASONS[what]
    assert peak <= 2 * len(data) + (1 << 20), f"{what}: peak {peak:,} bytes"


def test_hostile_files_are_could_not_read_and_the_revision_is_stored(tmp_path: Path) -> None:
    src = FakeSource()
    files = {f"hostile-{i}.gguf": data for i, data in enumerate(CASES.values())}
    sha = src.commit(RID, {"config.json": CONFIG, **files}, "upload")
    store = Store.open(f"sqlite:///{tmp_path / 'tracker.db'}")
    try:
        report = poll_repo(store, src, WatchedRepo(RID))
        assert report.status is RepoStatus.OK and report.new_revisions == (sha,)
        snap = store.snapshot(RID, sha)
        assert snap.files == {"config.json": CONFIG} and not snap.gguf
        assert snap.unreadable == {
            f"hostile-{i}.gguf": f"UnreadableArtifactError: {REASONS[what]}"
            for i, what in enumerate(CASES)
        }
        assert all("\n" not in why for why in snap.unreadable.values())
    finally:
        store.close()


def test_a_header_cut_in_transit_is_read_again_not_recorded(tmp_path: Path) -> None:
    src = FakeSource()
    (path,) = write_llama2(tmp_path / "l.gguf", tmp_path, layers=1)
    good = path.read_bytes()
    sha = src.commit(RID, {"config.json": CONFIG, "model.gguf": good}, "upload")
    src.damage("model.gguf", times=1, keep=len(good) // 3)  # one read cut short
    store = Store.open(f"sqlite:///{tmp_path / 'tracker.db'}")
    try:
        first = poll_repo(store, src, WatchedRepo(RID))
        assert first.status is RepoStatus.FAILING and "IntegrityError" in (first.error or "")
        assert "cut in transit" in (first.error or "") and first.new_revisions == ()
        second = poll_repo(store, src, WatchedRepo(RID))
        assert second.status is RepoStatus.OK and second.new_revisions == (sha,)
        snap = store.snapshot(RID, sha)
        assert not snap.unreadable and snap.gguf["model.gguf"].metadata["llama.block_count"] == 32
    finally:
        store.close()
