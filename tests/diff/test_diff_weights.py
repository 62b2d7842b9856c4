"""Weights manifests from Mixtral-8x7B's real index (headers synthesised from its real config's dimensions)."""

from __future__ import annotations

import json
from collections import defaultdict

from diffkit import DATA, make_snapshot

from tracker.diff import diff_snapshots
from tracker.shared.domain import Artifact, ChangeKind, SafetensorsHeader, TensorInfo

MIXTRAL = DATA / "models" / "mistralai__Mixtral-8x7B-v0.1"
INDEX = (MIXTRAL / "model.safetensors.index.json").read_bytes()
CONFIG = json.loads((MIXTRAL / "config.json").read_text())
BYTES = {"BF16": 2, "F16": 2, "F32": 4, "F8_E4M3": 1}


def _shape(name: str) -> tuple[int, ...]:
    c = CONFIG
    h, inter, vocab = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    kv = c["num_key_value_heads"] * (h // c["num_attention_heads"])
    table = {
        "embed_tokens": (vocab, h),
        "lm_head": (vocab, h),
        "q_proj": (h, h),
        "o_proj": (h, h),
        "k_proj": (kv, h),
        "v_proj": (kv, h),
        "w1": (inter, h),
        "gate_proj": (inter, h),
        "w3": (inter, h),
        "w2": (h, inter),
        "gate": (c["num_local_experts"], h),
    }
    part = name.split(".")[-2]
    return table.get(part, (h,))


def _headers(weight_map: dict[str, str], dtype: str = "BF16") -> dict[str, SafetensorsHeader]:
    shards: dict[str, dict[str, TensorInfo]] = defaultdict(dict)
    for name, shard in weight_map.items():
        shape = _shape(name)
        n = 1
        for d in shape:
            n *= d
        shards[shard][name] = TensorInfo(dtype, shape, n * BYTES[dtype])
    return {s: SafetensorsHeader(t) for s, t in shards.items()}


def _snap(
    weight_map: dict[str, str], headers: dict[str, SafetensorsHeader] | None, ident: str = "a"
) -> object:
    index = json.loads(INDEX)
    index["weight_map"] = weight_map
    shards = {s: f"{ident}-{s}" for s in set(weight_map.values())}
    return make_snapshot(
        {"model.safetensors.index.json": json.dumps(index).encode()},
        extra_tree=shards,
        headers=headers,
    )


def test_headers_total_matches_the_real_index_total() -> None:
    wm = json.loads(INDEX)["weight_map"]
    total = sum(t.nbytes for h in _headers(wm).values() for t in h.tensors.values())
    assert total == json.loads(INDEX)["metadata"]["total_size"] == 93405585408


def test_identical_manifests_give_nothing_and_first_revision_is_silent() -> None:
    wm = json.loads(INDEX)["weight_map"]
    a = _snap(wm, _headers(wm))
    assert diff_snapshots(a, _snap(wm, _headers(wm))) == ()  # type: ignore[arg-type]
    assert diff_snapshots(None, a) == ()  # type: ignore[arg-type]


def test_rename_reshape_retype_add_remove() -> None:
    wm = json.loads(INDEX)["weight_map"]
    before = _headers(wm)
    wm2 = dict(wm)
    # rename the 8 experts' w1 of layer 0 (same shape and dtype: paired in sorted order)
    for e in range(8):
        old = f"model.layers.0.block_sparse_moe.experts.{e}.w1.weight"
        wm2[f"model.layers.0.block_sparse_moe.experts.{e}.gate_proj.weight"] = wm2.pop(old)
    del wm2["model.layers.31.self_attn.v_proj.weight"]
    wm2["model.layers.31.self_attn.rotary_emb.inv_freq"] = wm[
        "model.layers.31.self_attn.q_proj.weight"
    ]
    after = _headers(wm2)
    shard0 = wm["model.layers.0.self_attn.q_proj.weight"]
    tensors = dict(after[shard0].tensors)
    tensors["model.layers.0.self_attn.q_proj.weight"] = TensorInfo(
        "BF16", (4096, 4608), 4096 * 4608 * 2
    )
    tensors["model.layers.0.input_layernorm.weight"] = TensorInfo("F32", (4096,), 4096 * 4)
    after[shard0] = SafetensorsHeader(tensors)
    changes = diff_snapshots(_snap(wm, before), _snap(wm2, after))  # type: ignore[arg-type]
    assert all(c.artifact is Artifact.WEIGHTS for c in changes)
    got = [
        (c.kind.value, c.key, c.before, c.after)
        for c in changes
        if c.key not in ("total_bytes", "dtypes")
    ]
    renames = [g for g in got if g[0] == "renamed"]
    assert renames == [
        (
            "renamed",
            f"model.layers.0.block_sparse_moe.experts.{e}.gate_proj.weight",
            f"model.layers.0.block_sparse_moe.experts.{e}.w1.weight",
            f"model.layers.0.block_sparse_moe.experts.{e}.gate_proj.weight",
        )
        for e in range(8)
    ]
    others = [g for g in got if g[0] != "renamed"]
    assert others == [
        ("retyped", "model.layers.0.input_layernorm.weight", "BF16", "F32"),
        ("reshaped", "model.layers.0.self_attn.q_proj.weight", [4096, 4096], [4096, 4608]),
        ("added", "model.layers.31.self_attn.rotary_emb.inv_freq", None, "BF16 [4096]"),
        ("removed", "model.layers.31.self_attn.v_proj.weight", "BF16 [1024, 4096]", None),
    ]
    census = next(c for c in changes if c.key == "dtypes")
    assert census.before == {"BF16": 995} and census.after == {"BF16": 994, "F32": 1}
    total = next(c for c in changes if c.key == "total_bytes")
    # q_proj grows, the norm doubles its bytes, v_proj goes, inv_freq (BF16 [4096]) comes
    assert (
        total.after - total.before
        == 4096 * 512 * 2 + (4096 * 4 - 4096 * 2) - 1024 * 4096 * 2 + 4096 * 2
    )


def test_index_only_manifest_reports_adds_and_removes_and_shard_count() -> None:
    wm = json.loads(INDEX)["weight_map"]
    wm2 = {
        k: ("model-00001-of-00001.safetensors" if "layers.31" in k else v) for k, v in wm.items()
    }
    wm2["lm_head.bias"] = wm2["lm_head.weight"]
    changes = diff_snapshots(_snap(wm, None), _snap(wm2, None))  # type: ignore[arg-type]
    assert [(c.kind.value, c.key) for c in changes] == [
        ("added", "lm_head.bias"),
        ("changed", "shards"),
    ]
    shards = changes[1]
    assert (shards.before, shards.after) == (19, 20)
    assert shards.detail == "+ model-00001-of-00001.safetensors"


def test_new_shard_content_with_same_header_is_reported_once() -> None:
    wm = json.loads(INDEX)["weight_map"]
    changes = diff_snapshots(_snap(wm, _headers(wm), "a"), _snap(wm, _headers(wm), "b"))  # type: ignore[arg-type]
    assert [(c.kind.value, c.key, c.after, c.summary) for c in changes] == [
        ("changed", "content", 19, "19 of 19 shard files have new content")
    ]


def test_malformed_index_and_unreadable_header_are_unreadable() -> None:
    wm = json.loads(INDEX)["weight_map"]
    good = _snap(wm, None)
    bad = make_snapshot({"model.safetensors.index.json": b'{"weight_map": ["a"]}'})
    (c,) = diff_snapshots(good, bad)  # type: ignore[arg-type]
    assert (c.kind, c.summary) == (
        ChangeKind.UNREADABLE,
        "could not read model.safetensors.index.json: `weight_map` is not an object of tensor → shard file",
    )
    hdr = make_snapshot(
        {}, unreadable={"model.safetensors": "header declares 12000000000 bytes (cap 100000000)"}
    )
    (d,) = diff_snapshots(None, hdr)
    assert (d.artifact, d.kind, d.file) == (
        Artifact.WEIGHTS,
        ChangeKind.UNREADABLE,
        "model.safetensors",
    )
    assert (
        d.summary
        == "could not read model.safetensors: header declares 12000000000 bytes (cap 100000000)"
    )


def test_falcon_40b_real_bin_index_change_layernorm_split() -> None:
    # 56dde4bf "Upload RWForCausalLM": each block's input_layernorm became ln_attn + ln_mlp
    from diffkit import version

    name = "tiiuae__falcon-40b"
    before = make_snapshot({"pytorch_model.bin.index.json": version(name, "01_e7950c40")})
    after = make_snapshot({"pytorch_model.bin.index.json": version(name, "02_56dde4bf")})
    changes = diff_snapshots(before, after)
    kinds = {(c.kind.value, c.key) for c in changes}
    assert ("removed", "transformer.h.0.input_layernorm.weight") in kinds
    assert ("added", "transformer.h.0.ln_attn.weight") in kinds
    assert ("added", "transformer.h.0.ln_mlp.bias") in kinds
    assert sum(1 for k, _ in kinds if k == "removed") == 120  # 60 layers x (weight, bias)
    assert sum(1 for k, _ in kinds if k == "added") == 240
    total = next(c for c in changes if c.key == "total_bytes")
    assert (total.file, total.before, total.after) == (
        "pytorch_model.bin.index.json",
        83669975040,
        83671941120,
    )


def test_one_rewritten_shard_with_a_new_header_is_compared() -> None:
    wm = json.loads(INDEX)["weight_map"]
    before = make_snapshot(
        {"model.safetensors.index.json": INDEX},
        extra_tree={s: f"a-{s}" for s in set(wm.values())},
        headers=_headers(wm),
    )
    after_headers = _headers(wm)
    shard = wm["model.norm.weight"]
    after_headers[shard] = SafetensorsHeader(
        {**after_headers[shard].tensors, "model.norm.weight": TensorInfo("F32", (4096,), 4096 * 4)}
    )
    ids = {s: f"a-{s}" for s in set(wm.values())}
    ids[shard] = "rewritten"
    after = make_snapshot(
        {"model.safetensors.index.json": INDEX}, extra_tree=ids, headers=after_headers
    )
    got = [(c.kind.value, c.key) for c in diff_snapshots(before, after)]
    # diff order is (artifact, file, key): "" (repo-wide), the shard, then the index
    assert got == [
        ("changed", "content"),
        ("retyped", "model.norm.weight"),
        ("changed", "dtypes"),
        ("changed", "total_bytes"),
    ]
