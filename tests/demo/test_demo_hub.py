"""Tests for tracker.replica.demo: the demo Hub replays every history row, deterministically,
and holds every change kind the pipeline must show, with consistent generated weights."""

from __future__ import annotations

import json
import struct
import subprocess
import time
from pathlib import Path

import pytest
from huggingface_hub import HfApi
from huggingface_hub.errors import GatedRepoError
from safetensors import safe_open

from tracker.replica import Replica
from tracker.replica.demo import (
    DEMO_DIR,
    DEMO_TOKEN,
    build_demo_hub,
    build_sharded_repo,
    demo_repo_ids,
    load_history,
    plan_weights,
)
from tracker.replica.repos import lfs_object_path, parse_lfs_pointer
from tracker.replica.stgen import DTYPE_BYTES, OidCache

REPOS = DEMO_DIR / "repos"


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("demo-hub")
    start = time.perf_counter()
    build_demo_hub(root, gated=True)
    print(f"build_demo_hub: {time.perf_counter() - start:.2f} s")
    return root


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(
        ["git", f"--git-dir={repo}", *args], capture_output=True, check=True
    ).stdout


def shas(root: Path, repo_id: str) -> list[str]:
    out = git(root / repo_id, "rev-list", "--reverse", "--first-parent", "main")
    return out.decode().split()


def show(root: Path, repo_id: str, seq: int, path: str) -> bytes:
    return git(root / repo_id, "show", f"{shas(root, repo_id)[seq - 1]}:{path}")


def changed_paths(root: Path, repo_id: str, seq: int) -> list[str]:
    commits = shas(root, repo_id)
    out = git(root / repo_id, "diff", "--name-only", commits[seq - 2], commits[seq - 1])
    return out.decode().split()


def read_header(root: Path, repo_id: str, seq: int, path: str) -> tuple[dict[str, object], int]:
    pointer = parse_lfs_pointer(show(root, repo_id, seq, path))
    assert pointer is not None
    obj = lfs_object_path(root / repo_id, pointer.oid)
    assert obj.stat().st_size == pointer.size
    with obj.open("rb") as fh:
        (n,) = struct.unpack("<Q", fh.read(8))
        header: dict[str, object] = json.loads(fh.read(n))
    return header, pointer.size - 8 - n


def test_demo_has_at_least_eight_repos() -> None:
    assert len(demo_repo_ids()) >= 8


def test_build_is_deterministic(hub: Path, tmp_path: Path) -> None:
    start = time.perf_counter()
    ids = build_demo_hub(tmp_path / "again")
    print(f"second build_demo_hub: {time.perf_counter() - start:.2f} s")
    for rid in ids:
        assert shas(tmp_path / "again", rid) == shas(hub, rid), rid


def test_every_history_row_became_a_commit(hub: Path) -> None:
    for rid in demo_repo_ids():
        rows = load_history(REPOS / rid.replace("/", "__"))
        commits = shas(hub, rid)
        assert len(commits) == max(r.seq for r in rows), rid
        log = git(hub / rid, "log", "--reverse", "--format=%H%x00%an%x00%aI%x00%cI%x00%s", "main")
        entries = [line.split("\0") for line in log.decode().splitlines()]
        for seq, (sha, author, adate, cdate, subject) in enumerate(entries, start=1):
            row = next(r for r in rows if r.seq == seq)
            assert sha == commits[seq - 1]
            assert (author, subject) == (row.author, row.message), (rid, seq)
            assert adate == cdate == row.date.isoformat(), (rid, seq)
            for r in (r for r in rows if r.seq == seq):
                if r.local_file is None:
                    continue
                data = (REPOS / rid.replace("/", "__") / r.local_file).read_bytes()
                assert show(hub, rid, seq, r.path) == data, (rid, seq, r.path)
        assert git(hub / rid, "rev-list", "--count", "--all").decode().strip() == str(len(commits))


def test_synthetic_commits_say_so(hub: Path) -> None:
    for rid in demo_repo_ids():
        for r in load_history(REPOS / rid.replace("/", "__")):
            assert r.message.startswith("[synthetic]") == r.source_commit.startswith("synthetic-")


def test_chat_template_change(hub: Path) -> None:
    rid = "ibm-granite/granite-3.1-1b-a400m-instruct"
    old = json.loads(show(hub, rid, 1, "tokenizer_config.json"))["chat_template"]
    new = json.loads(show(hub, rid, 2, "tokenizer_config.json"))["chat_template"]
    assert old != new
    assert changed_paths(hub, rid, 2) == ["tokenizer_config.json"]


def test_real_revert_of_add_bos_token(hub: Path) -> None:
    # DeepSeek-R1's real history: add_bos_token true -> false -> true, the last byte-identical to the first.
    rid = "deepseek-ai/DeepSeek-R1"
    values = [
        json.loads(show(hub, rid, s, "tokenizer_config.json"))["add_bos_token"] for s in (1, 2, 3)
    ]
    assert values == [True, False, True]
    assert show(hub, rid, 3, "tokenizer_config.json") == show(hub, rid, 1, "tokenizer_config.json")


def test_generation_config_eos_change_and_revert(hub: Path) -> None:
    rid = "meta-llama/Llama-2-7b-hf"
    eos = [
        json.loads(show(hub, rid, s, "generation_config.json"))["eos_token_id"]
        for s in (12, 13, 15)
    ]
    assert eos == [2, 32000, 2]
    assert show(hub, rid, 15, "generation_config.json") == show(
        hub, rid, 12, "generation_config.json"
    )
    assert changed_paths(hub, rid, 15) == ["generation_config.json"]


def test_special_token_change(hub: Path) -> None:
    rid = "meta-llama/Llama-2-7b-hf"
    before = json.loads(show(hub, rid, 1, "special_tokens_map.json"))
    after = json.loads(show(hub, rid, 2, "special_tokens_map.json"))
    assert before["pad_token"] == "<unk>"
    assert "pad_token" not in after


def test_architecture_change(hub: Path) -> None:
    rid = "bigscience/bloom-560m"
    archs = [json.loads(show(hub, rid, s, "config.json"))["architectures"] for s in (10, 11, 12)]
    assert archs == [["BloomModel"], ["BloomModelForCausalLM"], ["BloomForCausalLM"]]


def test_weights_dtype_change(hub: Path) -> None:
    rid = "ibm-granite/granite-3.1-1b-a400m-instruct"
    h1, _ = read_header(hub, rid, 1, "model.safetensors")
    h3, _ = read_header(hub, rid, 3, "model.safetensors")
    assert set(h1) == set(h3)
    dtypes1 = {v["dtype"] for k, v in h1.items() if k != "__metadata__"}  # type: ignore[index]
    dtypes3 = {v["dtype"] for k, v in h3.items() if k != "__metadata__"}  # type: ignore[index]
    assert (dtypes1, dtypes3) == ({"F32"}, {"BF16"})
    assert "model.safetensors" in changed_paths(hub, rid, 3)
    assert json.loads(show(hub, rid, 3, "config.json"))["torch_dtype"] == "bfloat16"


def test_custom_code_change(hub: Path) -> None:
    rid = "THUDM/chatglm2-6b"
    auto_map = json.loads(show(hub, rid, 10, "config.json"))["auto_map"]
    assert auto_map["AutoConfig"] == "configuration_chatglm.ChatGLMConfig"
    assert changed_paths(hub, rid, 10) == ["configuration_chatglm.py"]
    assert show(hub, rid, 9, "configuration_chatglm.py") != show(
        hub, rid, 10, "configuration_chatglm.py"
    )
    assert b"rope_ratio" in show(hub, rid, 10, "configuration_chatglm.py")


def test_readme_only_change_keeps_front_matter(hub: Path) -> None:
    rid = "meta-llama/Llama-2-7b-hf"
    assert changed_paths(hub, rid, 14) == ["README.md"]
    before, after = show(hub, rid, 13, "README.md"), show(hub, rid, 14, "README.md")
    front = before[: before.index(b"\n---\n", 4) + 5]
    assert front.startswith(b"---\n") and after.startswith(front)
    assert before != after


def test_no_op_reserialisation(hub: Path) -> None:
    rid = "mistralai/Mixtral-8x7B-v0.1"
    assert changed_paths(hub, rid, 9) == ["config.json"]
    before, after = show(hub, rid, 8, "config.json"), show(hub, rid, 9, "config.json")
    assert before != after
    assert json.loads(before) == json.loads(after)


def test_generated_headers_parse_and_match_index(hub: Path) -> None:
    checked = 0
    for rid in demo_repo_ids():
        data = REPOS / rid.replace("/", "__")
        for seq in plan_weights(data):
            tree = (
                git(hub / rid, "ls-tree", "-r", "--name-only", shas(hub, rid)[seq - 1])
                .decode()
                .split()
            )
            files = [p for p in tree if p.endswith(".safetensors")]
            assert files, (rid, seq)
            declared: dict[str, str] = {}
            total = 0
            for path in files:
                header, data_len = read_header(hub, rid, seq, path)
                assert header.pop("__metadata__") == {"format": "pt"}
                offset = 0
                for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):  # type: ignore[index]
                    begin, end = info["data_offsets"]  # type: ignore[index]
                    assert begin == offset
                    nbytes = DTYPE_BYTES[info["dtype"]]  # type: ignore[index]
                    for dim in info["shape"]:  # type: ignore[index]
                        nbytes *= dim
                    assert end - begin == nbytes, (rid, name)
                    offset = end
                    declared[name] = path
                assert offset == data_len
                total += offset
                checked += 1
            if "model.safetensors.index.json" in tree:
                index = json.loads(show(hub, rid, seq, "model.safetensors.index.json"))
                assert index["weight_map"] == declared, rid
                assert index["metadata"]["total_size"] == total, rid
    assert checked >= 30


def test_safetensors_library_reads_a_generated_file(hub: Path) -> None:
    rid = "bigscience/bloom-560m"
    pointer = parse_lfs_pointer(show(hub, rid, 2, "model.safetensors"))
    assert pointer is not None
    with safe_open(str(lfs_object_path(hub / rid, pointer.oid)), framework="numpy") as f:
        assert f.metadata() == {"format": "pt"}
        keys = list(f.keys())
        assert len(keys) == 293
        assert f.get_slice("word_embeddings.weight").get_shape() == [250880, 1024]
        assert f.get_slice("h.23.mlp.dense_4h_to_h.weight").get_dtype() == "F16"


def test_checked_in_oid_cache_covers_every_demo_shard() -> None:
    cache = OidCache(DEMO_DIR / "lfs-oids.tsv")
    for rid in demo_repo_ids():
        for shards, _ in plan_weights(REPOS / rid.replace("/", "__")).values():
            for s in shards:
                assert cache.entries.get(s.key, (None, None))[0] == s.size, (rid, s.path)


def test_gated_settings_and_token(hub: Path) -> None:
    assert json.loads((hub / "meta-llama" / "Llama-2-7b-hf.replica.json").read_text()) == {
        "gated": "manual"
    }
    tokens = json.loads((hub / ".replica-tokens.json").read_text())
    assert tokens == {DEMO_TOKEN: ["meta-llama/Llama-2-7b-hf"]}


def test_build_sharded_repo(tmp_path: Path) -> None:
    start = time.perf_counter()
    repo = build_sharded_repo(tmp_path, "bench/deepseek-sharded")
    print(f"build_sharded_repo(163): {time.perf_counter() - start:.2f} s")
    tree = git(repo, "ls-tree", "-r", "--name-only", "main").decode().split()
    shards = [p for p in tree if p.endswith(".safetensors")]
    assert len(shards) == 163
    assert shards[0] == "model-00001-of-00163.safetensors"
    index = json.loads(git(repo, "show", "main:model.safetensors.index.json"))
    assert len(index["weight_map"]) == 91_991
    assert set(index["weight_map"].values()) == set(shards)
    header, _ = read_header(tmp_path, "bench/deepseek-sharded", 1, shards[5])
    header.pop("__metadata__")
    assert set(header) == {k for k, v in index["weight_map"].items() if v == shards[5]}


def test_deepseek_r1_fp8_checkpoint(hub: Path) -> None:
    rid = "deepseek-ai/DeepSeek-R1"
    index = json.loads(show(hub, rid, 1, "model.safetensors.index.json"))
    files = sorted(set(index["weight_map"].values()))
    assert len(files) == 163 and files[-1] == "model-00163-of-00163.safetensors"
    header, _ = read_header(
        hub, rid, 1, index["weight_map"]["model.layers.3.self_attn.q_a_proj.weight"]
    )
    assert header["model.layers.3.self_attn.q_a_proj.weight"] == {
        **header["model.layers.3.self_attn.q_a_proj.weight"],  # type: ignore[dict-item]
        "dtype": "F8_E4M3",
        "shape": [1536, 7168],
    }
    scale = "model.layers.3.self_attn.q_a_proj.weight_scale_inv"
    assert index["weight_map"][scale]
    assert "model.layers.61.eh_proj.weight" in index["weight_map"]  # the MTP module
    assert "model.layers.62.input_layernorm.weight" not in index["weight_map"]


@pytest.mark.replica
def test_demo_over_the_hub_client(hub: Path) -> None:
    """The demo as the real huggingface_hub client sees it through the replica server."""
    with Replica(hub) as server:
        api = HfApi(endpoint=server.url, token=False)
        rid = "ibm-granite/granite-3.1-1b-a400m-instruct"
        commits = api.list_repo_commits(rid)
        assert [c.title for c in commits] == [
            "Added bf16 tensors",
            "Updated chat template",
            "Model upload",
        ]
        assert commits[-1].authors == ["Matt Stallone"]
        first = api.get_safetensors_metadata(rid, revision=commits[-1].commit_id)
        last = api.get_safetensors_metadata(rid, revision=commits[0].commit_id)
        assert first.parameter_count == {"F32": 1_334_628_352}
        assert last.parameter_count == {"BF16": 1_334_628_352}
        mixtral = api.get_safetensors_metadata("mistralai/Mixtral-8x7B-v0.1")
        assert mixtral.parameter_count == {"BF16": 46_702_792_704}
        assert len(mixtral.files_metadata) == 19
        with pytest.raises(GatedRepoError):
            api.list_repo_commits("meta-llama/Llama-2-7b-hf")
        granted = HfApi(endpoint=server.url, token=DEMO_TOKEN)
        rows = load_history(DEMO_DIR / "repos" / "meta-llama__Llama-2-7b-hf")
        assert len(granted.list_repo_commits("meta-llama/Llama-2-7b-hf")) == max(
            r.seq for r in rows
        )
