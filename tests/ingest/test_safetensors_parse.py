"""The pure safetensors header parser: round trips, hard caps, and typed errors on any bad input."""

from __future__ import annotations

import contextlib
import json
import struct

import pytest
from helpers_ingest import safetensors_bytes
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.shared.errors import OversizedArtifactError, UnreadableArtifactError
from tracker.sources.safetensors import header_length, parse_file_prefix, parse_header

DTYPES = {"F32": 4, "BF16": 2, "F16": 2, "I64": 8}


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.text("abcdefghij._0123456789", min_size=1, max_size=12).filter(
            lambda s: s != "__metadata__"
        ),
        st.tuples(st.sampled_from(sorted(DTYPES)), st.lists(st.integers(0, 64), max_size=4)),
        max_size=8,
    )
)
def test_round_trip(tensors: dict[str, tuple[str, list[int]]]) -> None:
    data = safetensors_bytes(tensors)
    header = parse_file_prefix(data, 1_000_000)
    assert header.metadata == {"format": "pt"}
    assert set(header.tensors) == set(tensors)
    for name, (dtype, shape) in tensors.items():
        info = header.tensors[name]
        n = DTYPES[dtype]
        for d in shape:
            n *= d
        assert (info.dtype, info.shape, info.nbytes) == (dtype, tuple(shape), n)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_give_a_header_or_a_typed_error(data: bytes) -> None:
    with contextlib.suppress(UnreadableArtifactError, OversizedArtifactError):
        parse_file_prefix(data, 150)


def test_caps_and_truncation() -> None:
    with pytest.raises(
        OversizedArtifactError, match="declares 10737418240 bytes, over the cap of 100000000"
    ):
        header_length(struct.pack("<Q", 10 * 1024**3), 100_000_000)
    with pytest.raises(UnreadableArtifactError, match="shorter than its 8-byte length prefix"):
        header_length(b"\x01\x02", 100)
    with pytest.raises(UnreadableArtifactError, match="length is 0"):
        header_length(bytes(8), 100)
    data = safetensors_bytes({"w": ("F32", [2])})
    with pytest.raises(UnreadableArtifactError, match="truncated"):
        parse_file_prefix(data[:20], 1000)


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ([1, 2], "JSON list, not an object"),
        (
            {"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 7]}},
            "needs 8 bytes but data_offsets span 7",
        ),
        (
            {"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 0]}},
            "shape must be a list of ints",
        ),
        ({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}}, "data_offsets must be"),
        ({"w": {"shape": [2], "data_offsets": [0, 8]}}, "dtype missing"),
        ({"w": "x"}, "entry is not an object"),
        ({"__metadata__": {"a": 1}}, "__metadata__ must map strings to strings"),
    ],
)
def test_malformed_headers_name_the_problem(obj: object, message: str) -> None:
    with pytest.raises(UnreadableArtifactError, match=message):
        parse_header(json.dumps(obj).encode())


def test_unknown_dtypes_take_nbytes_from_offsets_and_file_size_is_checked() -> None:
    raw = json.dumps({"w": {"dtype": "F8_E4M3FNUZ", "shape": [3], "data_offsets": [0, 3]}}).encode()
    assert parse_header(raw).tensors["w"].nbytes == 3
    with pytest.raises(UnreadableArtifactError, match="past the 2-byte data section"):
        parse_header(raw, file_size=8 + len(raw) + 2)
    assert parse_header(b"{}").tensors == {}
    with pytest.raises(UnreadableArtifactError, match="not UTF-8 JSON"):
        parse_header(b"\xff{")
