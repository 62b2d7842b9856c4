"""Capacity from bytes: numbers reproduced by hand for a census of a real shape.

The census: 2,779,931,837,184 stored parameters, of which 2,722,740,830,208 U8 (4-bit values
packed two to a byte in `*_blocks` tensors, MXFP4-style, with one U8 scale per 32 values),
57,179,884,544 BF16 and 11,122,432 F32; the index's total_size 1,560,860,324,864 bytes (1,561 GB).
By hand:
- bytes: U8 blocks 2,722,740,830,208 / 2 = 1,361,370,415,104; U8 scales 2,722,740,830,208 / 32 =
  85,085,650,944; BF16 57,179,884,544 × 2 = 114,359,769,088; F32 11,122,432 × 4 = 44,489,728;
  sum 1,560,860,324,864 (= total_size);
- bytes per parameter 1,560,860,324,864 / 2,779,931,837,184 = 0.5615: already quantized, no 4× left;
- 8 × B200 180 GB hold 1,440 GB: 120.86 GB short (121 GB); 8 × H200 141 GB hold 1,128 GB: 432.86
  GB short; weights-only H200s: ceil(1,560.86 / 141) = 12; B200s: ceil(1,560.86 / 180) = 9;
- download at 126.3 MB/s: 1,560,860,324,864 / 126,300,000 = 12,358.4 s = 3.43 hours (3.4 hours),
  longer than a 1-hour provisioning window, shorter than a 4-hour one.
"""

from __future__ import annotations

import json

import pytest

from tracker.estimate import EstimateSettings
from tracker.estimate.checkpoint import compare, stored_by_dtype
from tracker.preflight.capacity import Box
from tracker.preflight.report import run_preflight
from tracker.preflight.settings import PreflightSettings
from tracker.shared.domain import SafetensorsHeader, TensorInfo, TreeEntry

U8_PARAMS = 2_722_740_830_208
BF16 = 57_179_884_544
F32 = 11_122_432
TOTAL_SIZE = 1_560_860_324_864
BOXES = (Box(8, "H200 141 GB", 141.0), Box(8, "B200 180 GB", 180.0))


def _t(dtype: str, n: int, size: int) -> TensorInfo:
    return TensorInfo(dtype, (n,), n * size)


def census_headers() -> dict[str, SafetensorsHeader]:
    return {
        "model-00001-of-00002.safetensors": SafetensorsHeader(
            {
                "model.layers.0.mlp.experts.down_proj_blocks": _t("U8", U8_PARAMS // 2, 1),
                "model.layers.0.mlp.experts.down_proj_scales": _t("U8", U8_PARAMS // 32, 1),
            }
        ),
        "model-00002-of-00002.safetensors": SafetensorsHeader(
            {
                "model.embed_tokens.weight": _t("BF16", BF16, 2),
                "model.layers.0.input_layernorm.weight": _t("F32", F32, 4),
            }
        ),
    }


def _preflight(window: float = 1.0, throughput: float = 126.3) -> dict[str, object]:
    index = {"metadata": {"total_size": TOTAL_SIZE}, "weight_map": {}}
    settings = PreflightSettings(
        throughput_mb_s=throughput, provisioning_window_h=window, boxes=BOXES
    )
    result = run_preflight(
        files={"model.safetensors.index.json": json.dumps(index).encode()},
        headers=census_headers(),
        tree=(),
        tables={},
        settings=settings,
        estimate_settings=EstimateSettings(),
    )
    assert result.capacity is not None
    return result.capacity.to_json()


def test_the_census_is_the_estimates_checkpoint_census_split_by_dtype() -> None:
    headers = census_headers()
    by_dtype = stored_by_dtype(headers)
    assert by_dtype == {"BF16": BF16, "F32": F32, "U8": U8_PARAMS}
    assert sum(by_dtype.values()) == 2_779_931_837_184
    census = compare(headers, 2_779_931_837_184)
    assert census is not None
    assert census.params == sum(by_dtype.values())
    assert census.bytes == TOTAL_SIZE


def test_capacity_and_download_reproduce_by_hand() -> None:
    c = _preflight()
    assert c["weights_bytes"] == TOTAL_SIZE
    assert c["weights_source"] == "index metadata.total_size"
    assert c["params"] == 2_779_931_837_184
    assert c["bytes_per_param"] == 0.5615
    assert c["note"] == "already quantized: 0.56 bytes/parameter, no 4× left"
    assert c["cards"] == {
        "T4 16 GB": 98,
        "L4 24 GB": 66,
        "A100 40 GB": 40,
        "A100/H100 80 GB": 20,
        "H200 141 GB": 12,
    }
    b200 = c["boxes"]["8 × B200 180 GB"]
    assert (b200["fits"], b200["short_gb"], round(b200["short_gb"])) == (False, 120.9, 121)
    assert c["boxes"]["8 × H200 141 GB"]["short_gb"] == 432.9
    assert c["download_hours"] == 3.43
    assert f"{c['download_hours']:.1f}" == "3.4"
    assert c["outlives_window"] is True
    assert _preflight(window=4.0)["outlives_window"] is False


@pytest.mark.parametrize(("throughput", "hours"), [(126.0, 3.44), (1000.0, 0.43), (12.63, 34.33)])
def test_download_time_follows_the_configured_throughput(throughput: float, hours: float) -> None:
    assert _preflight(throughput=throughput)["download_hours"] == hours


def test_a_bf16_checkpoint_has_four_times_left_and_tree_sizes_are_what_a_download_fetches() -> None:
    header = SafetensorsHeader({"model.layers.0.mlp.up_proj.weight": _t("BF16", 1_000_000, 2)})
    result = run_preflight(
        files={},
        headers={"model.safetensors": header},
        tree=(TreeEntry("model.safetensors", "b", 2_000_128),),
        tables={},
        settings=PreflightSettings(),
    )
    c = result.capacity
    assert c is not None
    assert (c.weights_bytes, c.weights_source) == (2_000_000, "safetensors headers")
    assert (c.download_bytes, c.download_source) == (2_000_128, "weight files in the tree")
    assert c.quantization_note == "2.00 bytes/parameter: 4-bit weights would take 4.0× less"
    assert c.cards["T4 16 GB"] == 1


def test_a_shard_counted_once_is_not_counted_again_and_gives_the_same_answer() -> None:
    index = json.dumps({"metadata": {"total_size": TOTAL_SIZE}, "weight_map": {"a": "b"}})
    tree = tuple(TreeEntry(p, f"oid-{p}", 1) for p in census_headers())
    cache: dict = {}  # type: ignore[type-arg]

    def once() -> dict[str, object]:
        result = run_preflight(
            files={"model.safetensors.index.json": index.encode()},
            headers=census_headers(),
            tree=tree,
            tables={},
            settings=PreflightSettings(throughput_mb_s=126.3, boxes=BOXES),
            shard_cache=cache,
        )
        assert result.capacity is not None
        return result.capacity.to_json()

    first = once()
    assert len(cache) == 2
    cache[next(iter(cache))][0]["U8"] += 1  # a hit is used as is: the count shows it
    assert once()["params"] == first["params"] + 1


@pytest.mark.parametrize(
    "index",
    [
        {"metadata": {"total_size": 7}, "weight_map": {"x": "a.safetensors"}},
        {"weight_map": {"total_size": "a.safetensors"}, "metadata": {"total_size": 7}},
        {"metadata": {"total_size": 7, "other": {"total_size": 9}}, "weight_map": {}},
    ],
)
def test_total_size_is_the_metadatas_whatever_else_the_index_holds(index: dict) -> None:  # type: ignore[type-arg]
    from tracker.estimate.checkpoint import index_total_size as _total_size

    assert _total_size({"model.safetensors.index.json": json.dumps(index).encode()}) == 7
