"""The real huggingface_hub 2.4.0 client against the replica: metadata, listings and downloads."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers_replica import T0, safetensors_bytes
from huggingface_hub import HfApi, hf_hub_download, snapshot_download
from huggingface_hub.errors import BadRequestError

from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo

pytestmark = pytest.mark.replica


def _api(hub: Replica) -> HfApi:
    return HfApi(endpoint=hub.url, token=False)


def test_model_info_with_files_metadata(hub: Replica, llama: dict[str, Any]) -> None:
    info = _api(hub).model_info("acme/llama", files_metadata=True)
    files: dict[str, bytes] = llama["files"]
    st = files["model.safetensors"]
    assert info.id == "acme/llama"
    assert info.sha == llama["second"]
    assert info.last_modified is not None and info.last_modified == T0 + timedelta(days=1)
    assert info.created_at == T0
    assert info.private is False
    assert info.gated is False
    assert info.library_name == "transformers"
    assert info.pipeline_tag == "text-generation"
    assert info.config is not None
    assert info.config["architectures"] == ["LlamaForCausalLM"]
    assert info.config["model_type"] == "llama"
    assert info.config["tokenizer_config"]["bos_token"]["content"] == "<s>"
    assert info.config["tokenizer_config"]["pad_token"] is None
    assert info.card_data is not None and info.card_data["pipeline_tag"] == "text-generation"
    assert info.card_data["tags"] == ["facebook", "meta", "pytorch", "llama", "llama-2"]
    assert info.tags is not None and {"transformers", "safetensors", "llama", "meta"} <= set(
        info.tags
    )
    assert info.safetensors is not None
    assert info.safetensors.parameters == {"BF16": 3, "F32": 6, "I64": 1}
    assert info.safetensors.total == 10
    assert info.transformers_info is not None
    assert info.transformers_info.auto_model == "AutoModelForCausalLM"
    siblings = {s.rfilename: s for s in info.siblings or []}
    assert sorted(siblings) == [
        "README.md", "config.json", "extra.txt", "model.safetensors", "sub/dir/notes.txt",
        "tokenizer_config.json",
    ]  # fmt: skip
    model = siblings["model.safetensors"]
    assert model.size == len(st)
    assert model.lfs is not None
    assert model.lfs.sha256 == hashlib.sha256(st).hexdigest()
    assert model.lfs.size == len(st)
    pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{model.lfs.sha256}\nsize {len(st)}\n"
    assert model.lfs.pointer_size == len(pointer)
    assert model.blob_id == hashlib.sha1(b"blob %d\0" % len(pointer) + pointer.encode()).hexdigest()
    config = siblings["config.json"]
    assert config.lfs is None
    assert config.size == len(files["config.json"])
    assert config.blob_id == _git_blob_id(files["config.json"])


def _git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def test_model_info_revision_and_expand(hub: Replica, llama: dict[str, Any]) -> None:
    api = _api(hub)
    assert api.model_info("acme/llama", revision="v1.0").sha == llama["first"]
    assert api.model_info("acme/llama", revision="refs/pr/1").sha == llama["pr"]
    assert api.model_info("acme/llama", revision=llama["first"]).sha == llama["first"]
    unencoded = httpx.get(f"{hub.url}/api/models/acme/llama/revision/refs/pr/1").json()
    assert unencoded["sha"] == llama["pr"]
    info = api.model_info("acme/llama", expand=["sha", "safetensors"])
    assert info.sha == llama["second"]
    assert info.safetensors is not None and info.safetensors.total == 10
    assert info.siblings is None and info.card_data is None
    # The web API spelling `expand[]=` is accepted too, and only `_id`, `id` and the fields come back.
    raw = httpx.get(f"{hub.url}/api/models/acme/llama?expand[]=sha&expand[]=gated").json()
    assert set(raw) == {"_id", "id", "sha", "gated"}
    with pytest.raises(BadRequestError):
        api.model_info("acme/llama", expand=["nonsense"])  # type: ignore[list-item]


def test_model_info_security_status(hub: Replica, llama: dict[str, Any]) -> None:
    info = _api(hub).model_info("acme/llama", securityStatus=True)
    assert info.security_repo_status == {"scansDone": True, "filesWithIssues": []}


def test_list_repo_refs(hub: Replica, llama: dict[str, Any]) -> None:
    refs = _api(hub).list_repo_refs("acme/llama", include_pull_requests=True)
    assert {(b.name, b.ref, b.target_commit) for b in refs.branches} == {
        ("main", "refs/heads/main", llama["second"]),
        ("dev", "refs/heads/dev", llama["first"]),
    }
    assert [(t.name, t.target_commit) for t in refs.tags] == [("v1.0", llama["first"])]
    assert refs.converts == []
    assert refs.pull_requests is not None
    assert [(p.name, p.ref, p.target_commit) for p in refs.pull_requests] == [
        ("refs/pr/1", "refs/pr/1", llama["pr"])
    ]
    assert _api(hub).list_repo_refs("acme/llama").pull_requests is None


def test_list_repo_commits_paginates(root: Path, hub: Replica) -> None:
    repo = init_repo(root, "acme/history")
    shas = [
        commit(repo, {"n.txt": f"{i}\n".encode()}, f"commit {i}", date=T0 + timedelta(hours=i))
        for i in range(120)
    ]
    hub.reset_requests()
    listed = list(_api(hub).list_repo_commits("acme/history", formatted=True))
    assert [c.commit_id for c in listed] == shas[::-1]
    assert listed[0].title == "commit 119"
    assert listed[0].formatted_title == "commit 119"
    assert listed[-1].created_at == T0
    assert listed[0].authors == ["tracker-test"]
    pages = [r for r in hub.requests if "/commits/" in r.path]
    assert [r.status for r in pages] == [200, 200, 200]
    assert all(
        "expand%5B%5D=formatted" in r.query or "expand[]=formatted" in r.query for r in pages
    )
    first = httpx.get(f"{hub.url}/api/models/acme/history/commits/main")
    assert first.headers["X-Total-Count"] == "120"
    assert (
        first.links["next"]["url"] == f"{hub.url}/api/models/acme/history/commits/main?p=1&limit=50"
    )
    assert len(first.json()) == 50


def test_list_repo_tree_paginates(root: Path, hub: Replica) -> None:
    repo = init_repo(root, "acme/wide")
    files = {f"d{i % 10}/f{i:04d}.txt": f"{i}\n".encode() for i in range(1100)}
    commit(repo, files, "many files", date=T0)
    api = _api(hub)
    hub.reset_requests()
    entries = list(api.list_repo_tree("acme/wide", recursive=True))
    listed_files = sorted(e.path for e in entries if e.__class__.__name__ == "RepoFile")
    listed_dirs = sorted(e.path for e in entries if e.__class__.__name__ == "RepoFolder")
    assert listed_files == sorted(files)
    assert listed_dirs == [f"d{i}" for i in range(10)]
    assert len([r for r in hub.requests if "/tree/" in r.path]) == 2  # 1110 entries, 1000 a page
    assert sorted(api.list_repo_files("acme/wide")) == sorted(files)
    top = list(api.list_repo_tree("acme/wide"))
    assert sorted(e.path for e in top) == [f"d{i}" for i in range(10)]
    sub = list(api.list_repo_tree("acme/wide", path_in_repo="d3", expand=True))
    assert len(sub) == 110
    assert all(e.last_commit is not None and e.security is not None for e in sub)


def test_tree_expand_and_paths_info(hub: Replica, llama: dict[str, Any]) -> None:
    api = _api(hub)
    tree = {e.path: e for e in api.list_repo_tree("acme/llama", recursive=True, expand=True)}
    notes = tree["sub/dir/notes.txt"]
    assert notes.last_commit is not None and notes.last_commit.oid == llama["second"]
    assert notes.last_commit.title == "Update notes"
    assert tree["config.json"].last_commit.oid == llama["first"]  # type: ignore[union-attr]
    assert tree["sub"].last_commit.oid == llama["second"]  # type: ignore[union-attr]
    model = tree["model.safetensors"]
    assert model.lfs is not None and model.security is not None
    assert model.security["status"] == "safe"
    infos = api.get_paths_info(
        "acme/llama", ["config.json", "missing.bin", "sub", "model.safetensors"]
    )
    assert [i.path for i in infos] == ["config.json", "sub", "model.safetensors"]
    assert infos[2].lfs is not None and infos[2].lfs.sha256 == model.lfs.sha256
    # JSON bodies are accepted as well as the client's form body.
    raw = httpx.post(
        f"{hub.url}/api/models/acme/llama/paths-info/main",
        json={"paths": ["extra.txt", "nope"], "expand": True},
    ).json()
    assert [(r["path"], r["lastCommit"]["id"]) for r in raw] == [("extra.txt", llama["second"])]


def test_downloads_regular_and_lfs(hub: Replica, llama: dict[str, Any], cache_dir: Path) -> None:
    files: dict[str, bytes] = llama["files"]
    config = hf_hub_download(
        "acme/llama", "config.json", endpoint=hub.url, cache_dir=cache_dir, token=False
    )
    assert Path(config).read_bytes() == files["config.json"]
    model = hf_hub_download(
        "acme/llama", "model.safetensors", endpoint=hub.url, cache_dir=cache_dir, token=False
    )
    data = Path(model).read_bytes()
    assert data == files["model.safetensors"]
    # The cache is keyed by the Hub's etags: git blob id for regular files, sha256 for LFS files.
    assert Path(model).resolve().name == hashlib.sha256(data).hexdigest()
    assert Path(config).resolve().name == _git_blob_id(files["config.json"])
    assert f"snapshots/{llama['second']}/" in model
    nested = hf_hub_download(
        "acme/llama", "sub/dir/notes.txt", endpoint=hub.url, cache_dir=cache_dir, token=False
    )
    assert Path(nested).read_bytes() == b"notes v2\n"
    pr = hf_hub_download(
        "acme/llama", "pr.txt", revision="refs/pr/1", endpoint=hub.url, cache_dir=cache_dir
    )
    assert Path(pr).read_bytes() == b"pr\n"


def test_branch_versus_full_sha(
    root: Path, hub: Replica, llama: dict[str, Any], cache_dir: Path
) -> None:
    def fetch(revision: str) -> bytes:
        path = hf_hub_download(
            "acme/llama", "sub/dir/notes.txt", revision=revision, endpoint=hub.url,
            cache_dir=cache_dir, token=False,
        )  # fmt: skip
        return Path(path).read_bytes()

    assert fetch("main") == b"notes v2\n"
    assert fetch(llama["first"]) == b"notes v1\n"
    new = commit(llama["repo"], {"sub/dir/notes.txt": b"notes v3\n"}, "v3", date=T0 + timedelta(3))
    assert fetch("main") == b"notes v3\n"  # visible at once, no stale cache
    hub.reset_requests()
    assert fetch(new) == b"notes v3\n"
    assert hub.requests == []  # a cached full-sha download costs zero requests


def test_snapshot_download_allow_patterns(
    hub: Replica, llama: dict[str, Any], cache_dir: Path
) -> None:
    folder = Path(
        snapshot_download(
            "acme/llama",
            endpoint=hub.url,
            cache_dir=cache_dir,
            token=False,
            allow_patterns=["*.json", "*.safetensors"],
        )
    )
    got = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert got == ["config.json", "model.safetensors", "tokenizer_config.json"]
    files: dict[str, bytes] = llama["files"]
    assert (folder / "model.safetensors").read_bytes() == files["model.safetensors"]
    assert folder.name == llama["second"]


def test_safetensors_metadata_single_and_sharded(
    root: Path, hub: Replica, llama: dict[str, Any]
) -> None:
    api = _api(hub)
    single = api.get_safetensors_metadata("acme/llama")
    assert single.sharded is False
    assert single.parameter_count == {"F32": 6, "BF16": 3, "I64": 1}
    assert single.files_metadata["model.safetensors"].tensors["step"].shape == []

    repo = init_repo(root, "acme/sharded")
    shard1 = safetensors_bytes({"a": ("F32", [4, 4])})
    shard2 = safetensors_bytes({"b": ("F16", [8])}, pad_header_to=150_000)  # forces a 2nd range GET
    index = {
        "metadata": {"total_size": 64 + 16},
        "weight_map": {
            "a": "model-00001-of-00002.safetensors",
            "b": "model-00002-of-00002.safetensors",
        },
    }
    commit(
        repo,
        {
            "model-00001-of-00002.safetensors": shard1,
            "model-00002-of-00002.safetensors": shard2,
            "model.safetensors.index.json": json.dumps(index).encode(),
        },
        "sharded",
        date=T0,
    )
    hub.reset_requests()
    sharded = api.get_safetensors_metadata("acme/sharded")
    assert sharded.sharded is True
    assert sharded.metadata == {"total_size": 80}
    assert sharded.parameter_count == {"F32": 16, "F16": 8}
    ranges = sorted(r.range for r in hub.requests if r.range and r.path.startswith("/cdn-lfs/"))
    assert ranges == ["bytes=0-100000", "bytes=0-100000", "bytes=8-150007"]
    shortcut = api.get_sharded_safetensors_metadata("acme/sharded")  # the Hub-only endpoint
    assert shortcut.metadata == {"total_size": 80}
    assert shortcut.weight_map == index["weight_map"]
    assert shortcut.parameter_count == {"F32": 16, "F16": 8}
    parsed = api.parse_safetensors_file_metadata("acme/sharded", "model-00002-of-00002.safetensors")
    assert parsed.tensors["b"].dtype == "F16" and parsed.parameter_count == {"F16": 8}


def test_unusual_file_names(root: Path, hub: Replica, cache_dir: Path) -> None:
    repo = init_repo(root, "acme/names")
    names = {"docs/naïve file+1.txt": b"one\n", "a%20b.json": b"{}", "sp ace/x#y?.md": b"x\n"}
    commit(repo, names, "odd names", date=T0)
    api = _api(hub)
    assert sorted(api.list_repo_files("acme/names")) == sorted(names)
    for name, data in names.items():
        path = hf_hub_download(
            "acme/names", name, endpoint=hub.url, cache_dir=cache_dir, token=False
        )
        assert Path(path).read_bytes() == data
    infos = api.get_paths_info("acme/names", list(names))
    assert sorted(i.path for i in infos) == sorted(names)
    sub = list(api.list_repo_tree("acme/names", path_in_repo="sp ace"))
    assert [e.path for e in sub] == ["sp ace/x#y?.md"]
