"""Tests for tracker.replica.stgen: tensor sets from real configs, header layout, sharding, oid cache."""

from __future__ import annotations

import hashlib
import json
import math
import struct
from pathlib import Path

import pytest

from tracker.replica.repos import zero_padded_sha256
from tracker.replica.stgen import (
    OidCache,
    Shard,
    Tensor,
    WeightsSpecError,
    build_shards,
    encode_header,
    index_json,
    model_tensors,
    shard_by_index,
    shard_evenly,
)

DEMO = Path(__file__).resolve().parents[2] / "tracker" / "demo_data"
REPOS = DEMO / "repos"


def config(repo_dir: str, local: str) -> dict[str, object]:
    loaded: dict[str, object] = json.loads((REPOS / repo_dir / local).read_bytes())
    return loaded


def params(tensors: list[Tensor]) -> int:
    return sum(math.prod(t.shape) for t in tensors)


def test_parameter_counts_match_published_totals() -> None:
    # bloom-560m: 559,214,592 (model card); Qwen-7B: 7,721,324,544 (Qwen's README);
    # granite-3.1-1b-a400m: 1,334,628,352 (total_size / 4 of its fp32 upload would be 5.34 GB).
    bloom = config("bigscience__bloom-560m", "09_e985a63c_config.json")
    bloom["architectures"] = ["BloomModel"]
    assert params(model_tensors(bloom, dtype="F16")) == 559_214_592
    qwen = config("Qwen__Qwen-7B-Chat", "06_04df5dd5_config.json")
    assert params(model_tensors(qwen, dtype="BF16")) == 7_721_324_544
    granite = config("ibm-granite__granite-3.1-1b-a400m-instruct", "02_8290d32f_config.json")
    assert params(model_tensors(granite)) == 1_334_628_352
    v3 = json.loads((DEMO / "deepseek_v3_config.json").read_bytes())
    assert params(model_tensors(v3)) == 684_531_386_000


@pytest.mark.parametrize(
    ("repo_dir", "local"),
    [
        ("meta-llama__Llama-2-7b-hf", "01_637a7485_config.json"),
        ("mistralai__Mixtral-8x7B-v0.1", "02_4dd4b0f2_config.json"),
    ],
)
def test_real_index_total_size_is_reproduced(repo_dir: str, local: str) -> None:
    index = json.loads((REPOS / repo_dir / "base_model.safetensors.index.json").read_bytes())
    cfg = config(repo_dir, local)
    layout = shard_by_index(model_tensors(cfg), index["weight_map"], cfg)
    assert sum(t.nbytes for ts in layout.values() for t in ts) == index["metadata"]["total_size"]
    assert {t.name: p for p, ts in layout.items() for t in ts} == index["weight_map"]


def test_llama_index_inv_freq_buffers_are_fp32() -> None:
    cfg = config("meta-llama__Llama-2-7b-hf", "01_637a7485_config.json")
    index = json.loads(
        (REPOS / "meta-llama__Llama-2-7b-hf" / "base_model.safetensors.index.json").read_bytes()
    )
    layout = shard_by_index(model_tensors(cfg), index["weight_map"], cfg)
    inv = [t for ts in layout.values() for t in ts if t.name.endswith("inv_freq")]
    assert len(inv) == 32
    assert {(t.dtype, t.shape) for t in inv} == {("F32", (64,))}


def test_index_and_config_disagreeing_is_an_error() -> None:
    cfg = config("meta-llama__Llama-2-7b-hf", "01_637a7485_config.json")
    tensors = model_tensors(cfg)
    weight_map = {t.name: "a.safetensors" for t in tensors[1:]}
    with pytest.raises(WeightsSpecError, match="config-only"):
        shard_by_index(tensors, weight_map, cfg)
    weight_map = {t.name: "a.safetensors" for t in tensors} | {
        "model.extra.weight": "a.safetensors"
    }
    with pytest.raises(WeightsSpecError, match="index-only"):
        shard_by_index(tensors, weight_map, cfg)


def test_unknown_architecture_and_bad_config() -> None:
    with pytest.raises(WeightsSpecError, match="no tensor naming"):
        model_tensors({"architectures": ["NopeForCausalLM"]})
    with pytest.raises(WeightsSpecError, match="hidden_size"):
        model_tensors({"architectures": ["LlamaForCausalLM"], "torch_dtype": "float16"})
    with pytest.raises(WeightsSpecError, match="dtype"):
        model_tensors({"architectures": ["LlamaForCausalLM"], "torch_dtype": "float7"})


def test_encode_header_layout() -> None:
    tensors = [Tensor("b", "F32", (2, 3)), Tensor("a", "BF16", (5,))]
    head, size = encode_header(tensors, {"format": "pt"})
    (n,) = struct.unpack("<Q", head[:8])
    assert n == len(head) - 8 and n % 8 == 0
    doc = json.loads(head[8:])
    assert list(doc) == ["__metadata__", "a", "b"]
    assert doc["a"] == {"dtype": "BF16", "shape": [5], "data_offsets": [0, 10]}
    assert doc["b"] == {"dtype": "F32", "shape": [2, 3], "data_offsets": [10, 34]}
    assert size == 8 + n + 34
    with pytest.raises(WeightsSpecError, match="duplicate"):
        encode_header([Tensor("a", "F32", (1,)), Tensor("a", "F32", (1,))], {})


def test_shard_evenly_keeps_order_and_balances() -> None:
    tensors = [Tensor(f"t{i:02d}", "F32", (100,)) for i in range(40)]
    layout = shard_evenly(tensors, 4)
    assert list(layout) == [f"model-0000{i}-of-00004.safetensors" for i in range(1, 5)]
    assert [t for ts in layout.values() for t in ts] == tensors
    assert [len(ts) for ts in layout.values()] == [10, 10, 10, 10]
    assert list(shard_evenly(tensors, 1)) == ["model.safetensors"]
    assert len(shard_evenly(tensors, 40)) == 40
    with pytest.raises(WeightsSpecError):
        shard_evenly(tensors, 41)


def test_index_json_matches_layout() -> None:
    layout = {
        "x.safetensors": [Tensor("w", "F16", (4, 4))],
        "y.safetensors": [Tensor("v", "F32", (3,))],
    }
    doc = json.loads(index_json(layout))
    assert doc == {
        "metadata": {"total_size": 44},
        "weight_map": {"v": "y.safetensors", "w": "x.safetensors"},
    }


def test_oid_cache_computes_saves_and_reloads(tmp_path: Path) -> None:
    shards = build_shards({"m.safetensors": [Tensor("w", "F32", (1024, 300))]})
    cache = OidCache(tmp_path / "oids.tsv")
    oids = cache.oids(shards, workers=2)
    full = shards[0].head + bytes(shards[0].size - len(shards[0].head))
    assert oids == {"m.safetensors": hashlib.sha256(full).hexdigest()}
    cache.save()
    again = OidCache(tmp_path / "oids.tsv")
    assert again.entries == {shards[0].key: (shards[0].size, oids["m.safetensors"])}


def test_checked_in_oid_cache_entries_are_correct_for_small_objects() -> None:
    cache = OidCache(DEMO / "lfs-oids.tsv")
    small = [(k, s, o) for k, (s, o) in cache.entries.items() if s <= 1_200_000_000]
    assert small, "the cache should hold at least the bloom-560m shard"
    # The head is not stored; rebuild it from the demo plan to recompute the oid.
    from tracker.replica.demo import demo_repo_ids, plan_weights

    heads: dict[str, Shard] = {}
    for rid in demo_repo_ids(DEMO):
        for shards, _ in plan_weights(REPOS / rid.replace("/", "__")).values():
            heads.update({s.key: s for s in shards})
    for key, size, oid in small:
        shard = heads[key]
        assert shard.size == size
        assert zero_padded_sha256(shard.head, size) == oid


@pytest.mark.slow
@pytest.mark.parametrize(
    ("local", "architecture", "auto"),
    [
        ("meta-llama__Llama-2-7b-hf/05_87a34353_config.json", None, "AutoModelForCausalLM"),
        ("bigscience__bloom-560m/09_e985a63c_config.json", "BloomModel", "AutoModel"),
        ("Qwen__Qwen3-VL-32B-Instruct/base_config.json", None, "AutoModelForImageTextToText"),
    ],
)
def test_tensor_sets_match_transformers_state_dict(
    local: str, architecture: str | None, auto: str
) -> None:
    """Oracle: names and shapes equal those of transformers' own model (built on the meta device).

    Only for architectures whose transformers state dict is still the checkpoint's naming
    (transformers 5 fuses MoE experts, so Mixtral/granite-moe are checked by real indexes instead).
    """
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    raw = json.loads((REPOS / local).read_bytes())
    if architecture is not None:
        raw["architectures"] = [architecture]
    cfg = transformers.AutoConfig.for_model(**raw)
    with torch.device("meta"):
        model = getattr(transformers, auto).from_config(cfg)
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert {t.name: t.shape for t in model_tensors(raw)} == expected
