"""The Hub adapter and ingestion driving the real huggingface_hub client against the Hub replica."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from helpers_ingest import open_store, safetensors_bytes

from tracker.ingest.snapshots import poll_all, poll_repo
from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo, set_ref
from tracker.shared.domain import RepoId, Sha
from tracker.shared.errors import (
    EntryNotFoundError,
    OversizedArtifactError,
    RepoNotFoundError,
    RevisionNotFoundError,
)
from tracker.sources.hub import HubSource
from tracker.store import EventKind, RepoStatus, Store
from tracker.watchlist import WatchedRepo

pytestmark = pytest.mark.replica

RID = RepoId("acme/tiny")
T0 = datetime(2025, 1, 1, tzinfo=UTC)
CONFIG = b'{"model_type": "llama", "hidden_size": 64}\n'
WEIGHTS = safetensors_bytes({"w": ("F32", [64, 64]), "b": ("BF16", [64])})


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "hub"
    r.mkdir()
    return r


@pytest.fixture
def hub(root: Path) -> Iterator[Replica]:
    with Replica(root) as h:
        yield h


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = open_store(tmp_path)
    yield s
    s.close()


def src_for(hub: Replica, token: str | None = None) -> HubSource:
    return HubSource(hub.url, token, timeout_s=10, retry_attempts=2, retry_base_s=0.01)


def make_tiny(root: Path) -> tuple[Path, list[Sha]]:
    repo = init_repo(root, RID)
    shas = [
        commit(repo, {"config.json": CONFIG, "README.md": b"---\nlicense: mit\n---\n# tiny\n"},
               "initial", date=T0),
        commit(repo, {"model.safetensors": WEIGHTS, "data.txt": b"d" * 5000}, "weights",
               date=T0 + timedelta(days=1)),
        commit(repo, {"tokenizer_config.json": b'{"eos_token": "</s>"}'}, "tokenizer",
               date=T0 + timedelta(days=2)),
    ]  # fmt: skip
    return repo, shas


def resolve_gets(hub: Replica) -> list[str]:
    return [r.path for r in hub.requests if r.method == "GET" and "/resolve/" in r.path]


def test_branch_tag_and_full_sha_revisions(root: Path, hub: Replica) -> None:
    repo, shas = make_tiny(root)
    set_ref(repo, "refs/tags/v1", shas[0])
    src = src_for(hub)
    hub.reset_requests()
    assert src.resolve_ref(RID, "main") == shas[2]
    assert len(hub.requests) == 1 and hub.requests[0].path.endswith("/refs")
    assert src.resolve_ref(RID, "v1") == shas[0]
    assert src.resolve_ref(RID, shas[1]) == shas[1]
    with pytest.raises(RevisionNotFoundError):
        src.resolve_ref(RID, "f" * 40)
    with pytest.raises(RevisionNotFoundError, match="no branch or tag named 'dev'"):
        src.resolve_ref(RID, "dev")
    # tree and file at a pinned sha differ from the branch head
    assert {e.path for e in src.list_tree(RID, shas[0])} == {"config.json", "README.md"}
    assert "tokenizer_config.json" in {e.path for e in src.list_tree(RID, shas[2])}
    tree = {e.path: e for e in src.list_tree(RID, shas[1])}
    assert tree["model.safetensors"].lfs_sha256 is not None
    assert tree["model.safetensors"].size == len(WEIGHTS)
    assert tree["config.json"].lfs_sha256 is None
    assert src.read_file(RID, shas[0], "config.json", 1000) == CONFIG


def test_commit_pagination_past_one_page(root: Path, hub: Replica) -> None:
    repo = init_repo(root, RID)
    shas = [
        commit(repo, {"config.json": json.dumps({"n": i}).encode()}, f"c{i}",
               date=T0 + timedelta(minutes=i))
        for i in range(57)
    ]  # fmt: skip
    hub.reset_requests()
    commits = src_for(hub).list_commits(RID, "main")
    assert [c.sha for c in commits] == shas[::-1]
    assert commits[0].parents == (shas[-2],) and commits[-1].parents == ()
    assert commits[0].title == "c56"
    assert commits[0].date == T0 + timedelta(minutes=56)
    pages = [r for r in hub.requests if "/commits/" in r.path]
    assert len(pages) == 2


def test_tree_pagination_past_one_page(root: Path, hub: Replica) -> None:
    repo = init_repo(root, RID)
    files = {f"shards/part-{i:04d}.txt": str(i).encode() for i in range(1003)}
    sha = commit(repo, files, "many", date=T0)  # type: ignore[arg-type]
    hub.reset_requests()
    tree = src_for(hub).list_tree(RID, sha)
    assert [e.path for e in tree] == sorted(files)
    assert {e.size for e in tree} == {1, 2, 3, 4}
    assert len([r for r in hub.requests if "/tree/" in r.path]) == 2


def test_every_not_found_kind(root: Path, hub: Replica) -> None:
    _, shas = make_tiny(root)
    src = src_for(hub)
    with pytest.raises(RepoNotFoundError):
        src.resolve_ref(RepoId("acme/nothere"), "main")
    with pytest.raises(RepoNotFoundError):
        src.list_commits(RepoId("acme/nothere"), "main")
    with pytest.raises(RevisionNotFoundError):
        src.list_commits(RID, "nobranch")
    with pytest.raises(RevisionNotFoundError):
        src.list_tree(RID, Sha("e" * 40))
    with pytest.raises(EntryNotFoundError):
        src.read_file(RID, shas[0], "missing.json", 1000)
    with pytest.raises(EntryNotFoundError):
        src.read_safetensors_header(RID, shas[0], "model.safetensors", 1000)


def test_safetensors_header_by_range_only(root: Path, hub: Replica) -> None:
    repo = init_repo(root, RID)
    big = safetensors_bytes({"w": ("F32", [512, 512])})  # 1 MiB of weights
    sha = commit(repo, {"model.safetensors": big}, "w", date=T0)
    src = src_for(hub)
    hub.reset_requests()
    header = src.read_safetensors_header(RID, sha, "model.safetensors", 10_000)
    assert header.tensors["w"].shape == (512, 512) and header.tensors["w"].nbytes == 1 << 20
    assert header.metadata == {"format": "pt"}
    n = int.from_bytes(big[:8], "little")
    resolves = [r for r in hub.requests if "/resolve/" in r.path]  # each 302s to the LFS CDN
    assert [r.range for r in resolves] == ["bytes=0-7", f"bytes=8-{n + 7}"]
    assert all(r.range for r in hub.requests)
    assert sum(r.bytes_sent for r in hub.requests) < 2_000


def test_ten_gigabyte_header_is_refused_without_download(
    root: Path, hub: Replica, store: Store
) -> None:
    repo = init_repo(root, RID)
    bomb = safetensors_bytes({"w": ("F32", [4])}, declared=10 * 1024**3)
    sha = commit(repo, {"model.safetensors": bomb, "config.json": CONFIG}, "bomb", date=T0)
    src = src_for(hub)
    with pytest.raises(OversizedArtifactError, match="10737418240 bytes, over the cap"):
        src.read_safetensors_header(RID, sha, "model.safetensors", 100_000_000)
    hub.reset_requests()
    report = poll_repo(store, src, WatchedRepo(RID))
    assert report.status is RepoStatus.OK
    assert "over the cap" in store.snapshot(RID, sha).unreadable["model.safetensors"]
    # The prefix is read twice (an unreadable header is re-read once, to tell a damaged transfer
    # from a broken file: tracker.ingest.snapshots.read_header), never more than its 8 bytes.
    assert [r.range for r in hub.requests if "/resolve/" in r.path and "model." in r.path] == [
        "bytes=0-7",
        "bytes=0-7",
    ]


def test_poll_ingests_all_then_one_request_then_exactly_the_new_revision(
    root: Path, hub: Replica, store: Store
) -> None:
    repo, shas = make_tiny(root)
    src = src_for(hub)
    report = poll_repo(store, src, WatchedRepo(RID))
    assert report.status is RepoStatus.OK and report.new_revisions == tuple(shas)
    snap = store.snapshot(RID, shas[2])
    assert snap.files["config.json"] == CONFIG
    assert snap.files["tokenizer_config.json"] == b'{"eos_token": "</s>"}'
    assert snap.headers["model.safetensors"].tensors["w"].shape == (64, 64)
    assert "data.txt" not in snap.files and snap.entry("data.txt") is not None

    hub.reset_requests()
    report = poll_repo(store, src, WatchedRepo(RID))
    assert len(hub.requests) == 1 and report.requests == 1
    assert report.revisions_ingested == 0

    new = commit(repo, {"generation_config.json": b'{"eos_token_id": 2}', "data.txt": b"e"},
                 "eos", date=T0 + timedelta(days=3))  # fmt: skip
    hub.reset_requests()
    report = poll_repo(store, src, WatchedRepo(RID))
    assert report.new_revisions == (new,)
    assert resolve_gets(hub) == [f"/{RID}/resolve/{new}/generation_config.json"]
    assert report.files_fetched == 1 and report.bytes_fetched == len(b'{"eos_token_id": 2}')
    assert report.requests == len(hub.requests)
    assert store.snapshot(RID, new).files["config.json"] == CONFIG


def test_force_push_is_recorded_and_nothing_is_lost(root: Path, hub: Replica, store: Store) -> None:
    repo, shas = make_tiny(root)
    src = src_for(hub)
    poll_repo(store, src, WatchedRepo(RID))
    set_ref(repo, "main", shas[0])
    rewritten = commit(repo, {"config.json": b'{"model_type": "mistral"}'}, "rewrite",
                       date=T0 + timedelta(days=5))  # fmt: skip
    report = poll_repo(store, src, WatchedRepo(RID))
    assert report.new_revisions == (rewritten,) and report.rewritten == 2
    revs = {r.sha: r for r in store.revisions(RID)}
    assert revs[shas[1]].rewritten_away and revs[shas[2]].rewritten_away
    assert not revs[rewritten].rewritten_away and revs[rewritten].previous == shas[0]
    assert store.snapshot(RID, shas[2]).files["tokenizer_config.json"] == b'{"eos_token": "</s>"}'
    assert [e.kind for e in store.events(RID)] == [EventKind.FORCE_PUSH]


def test_malformed_json_is_stored_as_fetched(root: Path, hub: Replica, store: Store) -> None:
    repo = init_repo(root, RID)
    truncated = b'{"model_type": "llama", "hidden_si'
    sha = commit(repo, {"config.json": truncated, "tokenizer.json": b"\xff\xfe not utf8"}, "bad",
                 date=T0)  # fmt: skip
    poll_repo(store, src_for(hub), WatchedRepo(RID))
    snap = store.snapshot(RID, sha)
    assert snap.files == {"config.json": truncated, "tokenizer.json": b"\xff\xfe not utf8"}


def test_html_instead_of_json_marks_repo_failing_and_others_continue(
    root: Path, hub: Replica, store: Store
) -> None:
    _, shas = make_tiny(root)
    other = RepoId("acme/other")
    other_sha = commit(init_repo(root, other), {"config.json": CONFIG}, "one", date=T0)
    html = b"<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1></body></html>"
    hub.inject_fault(r"/api/models/acme/tiny/tree/", status=200, body=html,
                     headers={"Content-Type": "text/html"}, times=1)  # fmt: skip
    src = src_for(hub)
    reports = poll_all(store, [WatchedRepo(RID), WatchedRepo(other)], lambda _w: src)
    assert reports[0].status is RepoStatus.FAILING
    state = store.repo_state(RID)
    assert state.status is RepoStatus.FAILING and state.consecutive_failures == 1
    assert state.last_error is not None and "not valid JSON" in state.last_error
    assert store.revisions(RID) == []  # nothing half-written
    assert state.cursor is None
    assert reports[1].status is RepoStatus.OK and store.revisions(other)[0].sha == other_sha
    report = poll_repo(store, src, WatchedRepo(RID))  # the fault is gone: the repo recovers
    assert report.status is RepoStatus.OK and report.new_revisions == tuple(shas)


def test_transient_503_is_retried(root: Path, hub: Replica) -> None:
    _, shas = make_tiny(root)
    hub.inject_fault(r"/api/models/acme/tiny/refs", status=503, body=b"busy",
                     headers={"Retry-After": "0"}, times=1)  # fmt: skip
    assert src_for(hub).resolve_ref(RID, "main") == shas[2]
    assert [r.status for r in hub.requests] == [503, 200]


def test_gated_and_private_repos_get_a_state(root: Path, hub: Replica, store: Store) -> None:
    make_tiny(root)
    gated = RepoId("acme/gated")
    commit(init_repo(root, gated), {"config.json": CONFIG}, "one", date=T0)
    (root / "acme" / "gated.replica.json").write_text('{"gated": "manual"}')
    private = RepoId("acme/private")
    commit(init_repo(root, private), {"config.json": CONFIG}, "one", date=T0)
    (root / "acme" / "private.replica.json").write_text('{"private": true}')
    src = src_for(hub)
    reports = poll_all(
        store, [WatchedRepo(gated), WatchedRepo(private), WatchedRepo(RID)], lambda _w: src
    )
    assert [r.status for r in reports] == [RepoStatus.GATED, RepoStatus.GONE, RepoStatus.OK]
    # with a granted token the gated repo is readable
    (root / ".replica-tokens.json").write_text(json.dumps({"hf_granted": ["acme/gated"]}))
    report = poll_repo(store, src_for(hub, "hf_granted"), WatchedRepo(gated))
    assert report.status is RepoStatus.OK and report.revisions_ingested == 1


def test_pickle_files_carry_their_scan_status_and_are_never_downloaded(
    root: Path, hub: Replica, store: Store
) -> None:
    import pickle

    repo = init_repo(root, RID)
    evil = b"cos\nsystem\n(S'echo pwned'\ntR."  # a pickle importing os.system (never executed)
    benign = pickle.dumps({"a": 1}, protocol=4)
    sha = commit(repo, {"pytorch_model.bin": evil, "optimizer.pt": benign, "config.json": CONFIG},
                 "pickles", date=T0)  # fmt: skip
    hub.reset_requests()
    report = poll_repo(store, src_for(hub), WatchedRepo(RID))
    assert report.status is RepoStatus.OK
    snap = store.snapshot(RID, sha)
    bin_entry, pt_entry = snap.entry("pytorch_model.bin"), snap.entry("optimizer.pt")
    assert bin_entry is not None and pt_entry is not None
    assert bin_entry.security is not None and pt_entry.security is not None
    assert bin_entry.security["status"] != "safe"
    assert pt_entry.security["status"] == "safe"
    assert (snap.entry("config.json") or bin_entry).security is None
    assert "pytorch_model.bin" not in snap.files and "optimizer.pt" not in snap.files
    assert not [
        r for r in hub.requests if "/resolve/" in r.path and r.path.endswith((".bin", ".pt"))
    ]
    assert len([r for r in hub.requests if "/paths-info/" in r.path]) == 1


def test_every_pickle_suffix_gets_its_scan_and_is_diffed(
    root: Path, hub: Replica, store: Store
) -> None:
    """`tracker.shared.artifacts` is the one pickle list: a `.pickle` file and an upper-case `.PT` are
    scanned by the Hub source, never fetched by ingest, and diffed as executables."""
    import pickle

    from tracker.diff import diff_snapshots
    from tracker.shared.domain import Artifact

    repo = init_repo(root, RID)
    first = commit(repo, {"config.json": CONFIG}, "config", date=T0)
    blob = pickle.dumps({"a": 1}, protocol=4)
    sha = commit(repo, {"extra/state.pickle": blob, "OPTIM.PT": blob}, "pickles", date=T0)
    report = poll_repo(store, src_for(hub), WatchedRepo(RID))
    assert report.status is RepoStatus.OK and report.revisions_ingested == 2
    snap = store.snapshot(RID, sha)
    for path in ("extra/state.pickle", "OPTIM.PT"):
        entry = snap.entry(path)
        assert entry is not None and entry.security is not None, path
        assert entry.security["status"] == "safe"
        assert path not in snap.files
    changes = diff_snapshots(store.snapshot(RID, first), snap)
    assert [(c.artifact, c.kind.value, c.key) for c in changes] == [
        (Artifact.EXECUTABLE, "added", "OPTIM.PT"),
        (Artifact.EXECUTABLE, "added", "extra/state.pickle"),
    ]
