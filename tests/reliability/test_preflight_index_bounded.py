"""Preflight's read of an index's weight_map goes through the bounded JSON reader (issue 10): a
hostile index is refused as the diff refuses it, within the same memory, never parsed in full."""

from __future__ import annotations

import tracemalloc

from tracker.preflight.census_lora import tensor_names

INDEX = "model.safetensors.index.json"
MiB = 1 << 20


def test_a_hostile_index_is_refused_within_the_readers_bound() -> None:
    deep = b'{"weight_map": {"a.weight": ' + b"[" * 900 + b"]" * 900 + b"}}"
    assert tensor_names({INDEX: deep}, {}) == f"{INDEX} does not parse"
    many = b'{"weight_map": {"a.weight": "x", "b": [' + b",".join([b"[]"] * 5_000_000) + b"]}}"
    tracemalloc.start()
    try:
        assert tensor_names({INDEX: many}, {}) == f"{INDEX} does not parse"
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * MiB, peak  # refused by the pre-scan: nothing is built


def test_a_real_shaped_index_still_gives_its_names() -> None:
    index = b'{"metadata": {"total_size": 4}, "weight_map": {"m.q_proj.weight": "a.safetensors"}}'
    names, source = tensor_names({INDEX: index}, {})  # type: ignore[misc]
    assert names == {"m.q_proj.weight": None}
    assert INDEX in source
