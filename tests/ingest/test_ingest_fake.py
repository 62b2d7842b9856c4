"""Ingestion against the in-memory FakeSource: backfill, incremental fetch, force-push, failures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers_ingest import open_store, safetensors_bytes

from tracker.ingest.snapshots import auto_map_modules, poll_all, poll_repo
from tracker.shared.domain import RepoId, Sha
from tracker.shared.errors import BadResponseError, TransientSourceError
from tracker.sources.fake import FakeSource
from tracker.store import EventKind, RepoStatus, Store
from tracker.watchlist import WatchedRepo

RID = RepoId("acme/tiny")
CONFIG_1 = b'{"model_type": "llama", "hidden_size": 64}\n'
CONFIG_2 = b'{"model_type": "llama", "hidden_size": 128}\n'
WEIGHTS = safetensors_bytes({"w": ("F32", [4, 4]), "b": ("BF16", [4])})


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = open_store(tmp_path)
    yield s
    s.close()


def three_commits(src: FakeSource) -> list[Sha]:
    return [
        src.commit(RID, {"config.json": CONFIG_1, "README.md": b"# tiny\n"}, "initial"),
        src.commit(RID, {"model.safetensors": WEIGHTS, "notes.txt": b"x" * 1000}, "weights"),
        src.commit(RID, {"config.json": CONFIG_2}, "bigger"),
    ]


def test_first_poll_backfills_every_revision_oldest_first(store: Store) -> None:
    src = FakeSource()
    shas = three_commits(src)
    report = poll_repo(store, src, WatchedRepo(RID))
    assert report.status is RepoStatus.OK
    assert report.new_revisions == tuple(shas)
    revs = store.revisions(RID)
    assert [r.sha for r in revs] == shas
    assert [r.seq for r in revs] == [1, 2, 3]
    assert [r.previous for r in revs] == [None, shas[0], shas[1]]
    assert [r.commit.title for r in revs] == ["initial", "weights", "bigger"]
    # config+README at 1, header at 2, config at 3; notes.txt is untracked and never fetched
    assert report.files_fetched == 4
    assert src.calls["read_file"] == 3
    assert src.calls["read_safetensors_header"] == 1
    snap = store.snapshot(RID, shas[2])
    assert snap.files == {"config.json": CONFIG_2, "README.md": b"# tiny\n"}
    assert set(snap.headers) == {"model.safetensors"}
    assert snap.headers["model.safetensors"].tensors["w"].shape == (4, 4)
    assert snap.headers["model.safetensors"].tensors["b"].nbytes == 8
    assert {e.path for e in snap.tree} == {
        "config.json",
        "README.md",
        "model.safetensors",
        "notes.txt",
    }
    assert store.snapshot(RID, shas[0]).files["config.json"] == CONFIG_1
    assert store.repo_state(RID).cursor == shas[2]


def test_no_change_poll_makes_exactly_one_call(store: Store) -> None:
    src = FakeSource()
    three_commits(src)
    poll_repo(store, src, WatchedRepo(RID))
    src.calls.clear()
    report = poll_repo(store, src, WatchedRepo(RID))
    assert dict(src.calls) == {"resolve_ref": 1}
    assert report.revisions_ingested == 0 and report.files_fetched == 0
    assert report.status is RepoStatus.OK


def test_commit_between_polls_fetches_only_the_changed_file(store: Store) -> None:
    src = FakeSource()
    three_commits(src)
    poll_repo(store, src, WatchedRepo(RID))
    src.calls.clear()
    new = src.commit(RID, {"generation_config.json": b'{"eos_token_id": 2}'}, "eos")
    report = poll_repo(store, src, WatchedRepo(RID))
    assert report.new_revisions == (new,)
    assert src.calls["read_file"] == 1
    assert src.calls["read_safetensors_header"] == 0
    assert report.files_fetched == 1
    snap = store.snapshot(RID, new)
    assert snap.files["generation_config.json"] == b'{"eos_token_id": 2}'
    assert snap.files["config.json"] == CONFIG_2  # carried forward, not refetched
    assert "model.safetensors" in snap.headers


def test_changed_weights_reread_only_that_header(store: Store) -> None:
    src = FakeSource()
    three_commits(src)
    poll_repo(store, src, WatchedRepo(RID))
    src.calls.clear()
    src.commit(RID, {"model.safetensors": safetensors_bytes({"w": ("BF16", [4, 4])})}, "bf16")
    poll_repo(store, src, WatchedRepo(RID))
    assert src.calls["read_safetensors_header"] == 1
    assert src.calls["read_file"] == 0
    head = store.resolve(RID, "HEAD")
    assert store.snapshot(RID, head).headers["model.safetensors"].tensors["w"].dtype == "BF16"


def test_backfill_takes_the_last_n(store: Store) -> None:
    src = FakeSource()
    shas = three_commits(src)
    report = poll_repo(store, src, WatchedRepo(RID, backfill=2))
    assert report.new_revisions == tuple(shas[1:])
    assert [r.previous for r in store.revisions(RID)] == [None, shas[1]]
    with pytest.raises(Exception, match="only 1 earlier"):
        store.resolve(RID, "HEAD~2")


def test_rerun_is_idempotent(store: Store) -> None:
    src = FakeSource()
    three_commits(src)
    poll_repo(store, src, WatchedRepo(RID))
    poll_repo(store, src, WatchedRepo(RID))
    assert len(store.revisions(RID)) == 3


def test_force_push_records_event_and_keeps_everything(store: Store) -> None:
    src = FakeSource()
    shas = three_commits(src)
    poll_repo(store, src, WatchedRepo(RID))
    # rewrite: drop the last two commits and commit something else on top of the first
    src.set_ref(RID, "main", shas[0])
    rewritten = src.commit(RID, {"config.json": b'{"model_type": "mistral"}'}, "rewritten")
    report = poll_repo(store, src, WatchedRepo(RID))
    assert report.status is RepoStatus.OK
    assert report.rewritten == 2
    assert report.new_revisions == (rewritten,)
    revs = {r.sha: r for r in store.revisions(RID)}
    assert set(revs) == {*shas, rewritten}
    assert [revs[s].rewritten_away for s in shas] == [False, True, True]
    assert revs[rewritten].previous == shas[0]
    assert revs[rewritten].seq == 4
    # nothing previously stored is lost
    assert store.snapshot(RID, shas[2]).files["config.json"] == CONFIG_2
    (event,) = store.events(RID)
    assert event.kind is EventKind.FORCE_PUSH
    assert event.details["old_head"] == shas[2]
    assert event.details["new_head"] == rewritten
    assert event.details["dropped"] == [shas[1], shas[2]]
    assert event.details["fork_point"] == shas[0]
    assert store.resolve(RID, "HEAD~1") == shas[0]
    assert store.pending_analysis(RID) == [shas[0], rewritten]


def test_force_push_back_to_an_older_commit(store: Store) -> None:
    src = FakeSource()
    shas = three_commits(src)
    poll_repo(store, src, WatchedRepo(RID))
    src.set_ref(RID, "main", shas[1])
    report = poll_repo(store, src, WatchedRepo(RID))
    assert report.rewritten == 1 and report.revisions_ingested == 0
    assert store.resolve(RID, "HEAD") == shas[1]
    src.set_ref(RID, "main", shas[2])  # and forward again: the dropped revision is revived
    report = poll_repo(store, src, WatchedRepo(RID))
    assert report.new_revisions == (shas[2],)
    assert [r.rewritten_away for r in store.revisions(RID)] == [False, False, False]


def test_deleted_ref_gated_and_gone_repos_get_a_state_and_others_continue(store: Store) -> None:
    src = FakeSource()
    three_commits(src)
    other = RepoId("acme/other")
    src.commit(other, {"config.json": b"{}"}, "one")
    gated = RepoId("acme/gated")
    src.commit(gated, {"config.json": b"{}"}, "one")
    src.repos[gated].access = "gated"
    src.set_ref(RID, "main", None)
    repos = [
        WatchedRepo(RID),
        WatchedRepo(RepoId("acme/missing")),
        WatchedRepo(gated),
        WatchedRepo(other),
    ]
    reports = {r.repo_id: r for r in poll_all(store, repos, lambda _w: src)}
    assert reports[RID].status is RepoStatus.GONE
    assert "ref 'main' not found" in (reports[RID].error or "")
    assert reports[RepoId("acme/missing")].status is RepoStatus.GONE
    assert [e.kind for e in store.events(RID)] == [EventKind.REF_DELETED]
    assert [e.kind for e in store.events(RepoId("acme/missing"))] == [EventKind.REPO_GONE]
    assert store.events(RID)[0].details["ref"] == "main"
    assert reports[gated].status is RepoStatus.GATED
    assert reports[other].status is RepoStatus.OK and reports[other].revisions_ingested == 1
    state = store.repo_state(gated)
    assert state.status is RepoStatus.GATED and state.consecutive_failures == 1
    assert [e.kind for e in store.events(gated)] == [EventKind.ACCESS_DENIED]
    # a second failing poll counts up but records no second event
    poll_all(store, [WatchedRepo(gated)], lambda _w: src)
    assert store.repo_state(gated).consecutive_failures == 2
    assert len(store.events(gated)) == 1
    src.repos[gated].access = "ok"
    poll_all(store, [WatchedRepo(gated)], lambda _w: src)
    state = store.repo_state(gated)
    assert (
        state.status is RepoStatus.OK
        and state.consecutive_failures == 0
        and state.last_error is None
    )
    assert [e.kind for e in store.events(gated)] == [EventKind.ACCESS_DENIED, EventKind.RECOVERED]


def test_source_error_mid_repo_keeps_whole_revisions_only(store: Store) -> None:
    src = FakeSource()
    shas = three_commits(src)
    src.fail("read_safetensors_header", TransientSourceError("503 Service Unavailable"))
    report = poll_repo(store, src, WatchedRepo(RID))
    assert report.status is RepoStatus.FAILING
    assert "503" in (report.error or "")
    assert [r.sha for r in store.revisions(RID)] == shas[:1]  # revision 2 rolled back entirely
    state = store.repo_state(RID)
    assert state.cursor == shas[0] and state.consecutive_failures == 1
    assert state.last_error is not None and "503" in state.last_error
    report = poll_repo(store, src, WatchedRepo(RID))
    assert report.status is RepoStatus.OK and report.new_revisions == tuple(shas[1:])
    assert store.snapshot(RID, shas[1]).headers["model.safetensors"].tensors["w"].nbytes == 64


def test_bad_response_marks_failing_with_reason(store: Store) -> None:
    src = FakeSource()
    three_commits(src)
    src.fail("list_commits", BadResponseError("expected JSON, got text/html"))
    report = poll_repo(store, src, WatchedRepo(RID))
    assert report.status is RepoStatus.FAILING
    assert store.repo_state(RID).last_error == "BadResponseError: expected JSON, got text/html"
    assert store.revisions(RID) == []


def test_huge_declared_header_and_malformed_json_are_recorded(store: Store) -> None:
    src = FakeSource()
    bomb = safetensors_bytes({"w": ("F32", [2])}, declared=10 * 1024**3)
    sha = src.commit(
        RID,
        {"config.json": b'{"model_type": "llama", "hidden', "model.safetensors": bomb},
        "broken",
    )
    report = poll_repo(store, src, WatchedRepo(RID))
    assert report.status is RepoStatus.OK
    snap = store.snapshot(RID, sha)
    assert snap.files["config.json"] == b'{"model_type": "llama", "hidden'  # stored as fetched
    assert "10737418240 bytes, over the cap" in snap.unreadable["model.safetensors"]
    assert "OversizedArtifactError" in snap.unreadable["model.safetensors"]
    assert src.bytes_read < 1000  # the 10 GB header was never read


def test_oversized_file_is_unreadable_not_fetched(store: Store) -> None:
    src = FakeSource()
    sha = src.commit(RID, {"tokenizer.json": b"x" * 5000}, "big")
    from tracker.shared.artifacts import Limits

    poll_repo(store, src, WatchedRepo(RID), limits=Limits(max_file_bytes=1000))
    assert src.calls["read_file"] == 0
    assert store.snapshot(RID, sha).unreadable == {
        "tokenizer.json": "5000 bytes, over the cap of 1000 bytes"
    }


def test_auto_map_code_files_are_tracked(store: Store) -> None:
    src = FakeSource()
    config = {
        "auto_map": {
            "AutoConfig": "configuration_x.XConfig",
            "AutoModel": "deepseek-ai/other--modeling_y.YModel",
        }
    }
    tok = {"auto_map": {"AutoTokenizer": ["tokenization_x.XTok", None]}}
    sha = src.commit(
        RID,
        {
            "config.json": json.dumps(config).encode(),
            "tokenizer_config.json": json.dumps(tok).encode(),
            "configuration_x.py": b"class XConfig: ...\n",
            "tokenization_x.py": b"class XTok: ...\n",
            "modeling_y.py": b"# not named by this repo's auto_map\n",
            "setup.py": b"",
        },
        "code",
    )
    poll_repo(store, src, WatchedRepo(RID))
    files = store.snapshot(RID, sha).files
    assert set(files) == {
        "config.json",
        "tokenizer_config.json",
        "configuration_x.py",
        "tokenization_x.py",
    }


def test_auto_map_modules_parses_values() -> None:
    files = {
        "config.json": b'{"auto_map": {"A": "pkg.mod_a.Cls", "B": "o/r--mod_b.C", "C": 3}}',
        "tokenizer_config.json": b"not json",
    }
    assert auto_map_modules(files) == {"pkg/mod_a.py"}


def test_pickle_files_are_tracked_by_identity_only(store: Store) -> None:
    src = FakeSource()
    sha = src.commit(RID, {"pytorch_model.bin": b"\x80\x04pickle", "config.json": b"{}"}, "bin")
    poll_repo(store, src, WatchedRepo(RID))
    snap = store.snapshot(RID, sha)
    assert "pytorch_model.bin" not in snap.files and "pytorch_model.bin" not in snap.unreadable
    entry = snap.entry("pytorch_model.bin")
    assert entry is not None and entry.lfs_sha256 is not None
    assert src.calls["read_file"] == 1
