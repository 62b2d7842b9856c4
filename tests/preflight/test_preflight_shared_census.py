"""The checkpoint census is walked once per shard header and shared by the estimate's `compare`
and preflight's capacity; read from its groups, it counts as the per-tensor rules say."""

from __future__ import annotations

import pytest

from tracker.estimate import checkpoint
from tracker.estimate.checkpoint import compare, header_by_dtype, header_census
from tracker.preflight.report import run_preflight
from tracker.preflight.settings import PreflightSettings
from tracker.shared.domain import SafetensorsHeader, TensorInfo, TreeEntry


def _header() -> SafetensorsHeader:
    t = TensorInfo
    return SafetensorsHeader(
        {
            "model.layers.0.mlp.experts.0.down_proj.qweight": t("I32", (10, 4), 160),
            "model.layers.1.mlp.experts.0.up_proj.weight_blocks": t("U8", (6,), 6),
            "model.layers.1.mlp.experts.0.up_proj.weight_scale_inv": t("F32", (3,), 12),
            "model.layers.2.self_attn.q_proj.weight": t("BF16", (5, 2), 20),
            "model.layers.2.attn.bias": t("F32", (4,), 16),
            "model.rotary_emb.inv_freq": t("F32", (2,), 8),
            "mtp.layers.0.proj.weight": t("BF16", (7,), 14),
            "lm_head.weight": t("BF16", (9,), 18),
        }
    )


@pytest.mark.parametrize(
    ("layers", "bits", "by_dtype", "not_built"),
    [
        # I32 qweight: 40 × 32/4; U8 blocks: 6 × 8/4; BF16 10 + 9; mtp 7 not built
        (None, 4, {"BF16": 19, "I32": 320, "U8": 12}, 7),
        # layer 2's q_proj (10) is not built with 2 layers
        (2, 4, {"BF16": 9, "I32": 320, "U8": 12}, 17),
        # 8-bit: I32 holds 4 values, U8 weights are not packed
        (1, 8, {"BF16": 9, "I32": 160}, 23),
        # layer 0 not built either: nothing unpacked
        (0, 4, {"BF16": 9}, 63),
    ],
)
def test_the_census_groups_count_as_the_rules_say(
    layers: int | None, bits: int, by_dtype: dict[str, int], not_built: int
) -> None:
    header = _header()
    assert header_by_dtype(header, layers=layers, bits=bits) == by_dtype
    ck = compare({"a.safetensors": header}, 1000, layers=layers, bits=bits)
    assert ck is not None
    assert ck.params == sum(by_dtype.values())
    assert ck.dtypes == {"BF16": 26, "F32": 9, "I32": 40, "U8": 6}
    assert ck.bytes == 254
    assert (ck.scale_elements, ck.bookkeeping_elements, ck.not_built_elements) == (3, 6, not_built)
    assert ck.already_quantized  # I32 and U8 tensors are stored whatever is built


def test_the_estimate_and_the_preflight_of_a_revision_walk_each_shard_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    walked: list[int] = []
    real = checkpoint.shard_census

    def counting(header: SafetensorsHeader) -> checkpoint.ShardCensus:
        walked.append(id(header))
        return real(header)

    monkeypatch.setattr(checkpoint, "shard_census", counting)
    headers = {"a.safetensors": _header(), "b.safetensors": _header()}
    ck = compare(headers, 1000, layers=2, bits=4)
    assert ck is not None and ck.params == 2 * 341
    assert sorted(walked) == sorted(id(h) for h in headers.values())
    result = run_preflight(
        files={},
        headers=headers,
        tree=tuple(TreeEntry(p, f"oid-{p}", 254) for p in headers),
        tables={},
        settings=PreflightSettings(),
        shard_cache={},
    )
    assert result.capacity is not None
    # no config.json: every layer counts as built (the estimate above was told 2)
    assert result.capacity.params == 2 * 351
    assert result.capacity.params_by_dtype == {"BF16": 38, "I32": 640, "U8": 24}
    assert len(walked) == 2  # preflight read the census the estimate left


def test_a_shard_content_seen_in_an_earlier_revision_is_not_walked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    walked: list[str] = []
    real = checkpoint.shard_census

    def counting(header: SafetensorsHeader) -> checkpoint.ShardCensus:
        walked.append(next(iter(header.tensors)))
        return real(header)

    monkeypatch.setattr(checkpoint, "shard_census", counting)
    cache: checkpoint.CensusCache = {}
    first = {"a.safetensors": _header(), "b.safetensors": _header()}
    checkpoint.count_shards(first, {"a.safetensors": "oid-a", "b.safetensors": "oid-b"}, cache)
    assert len(walked) == 2 and len(cache) == 2
    # the next revision, read afresh: a kept, b re-uploaded, c without an identity
    second = {"a.safetensors": _header(), "b.safetensors": _header(), "c.safetensors": _header()}
    checkpoint.count_shards(second, {"a.safetensors": "oid-a", "b.safetensors": "oid-b2"}, cache)
    assert len(walked) == 3 and len(cache) == 3
    assert header_census(second["a.safetensors"]) is header_census(first["a.safetensors"])
    assert header_census(second["b.safetensors"]) is not header_census(first["b.safetensors"])
    ck = compare(second, 1000, layers=2, bits=4)
    assert ck is not None and ck.params == 3 * 341
    assert len(walked) == 4  # c, walked when the estimate read it
