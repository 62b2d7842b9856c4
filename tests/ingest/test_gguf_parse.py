"""The GGUF header reader (tracker/sources/gguf.py) against llama.cpp's own gguf-py: files written
by its GGUFWriter from real corpus configs, tokenizers and templates (tests/ingest/ggufkit.py) read
the same by tracker as by its GGUFReader, on every key and tensor."""

from __future__ import annotations

from pathlib import Path

import gguf
import pytest
from ggufkit import assert_agrees_with_gguf_py, write_kinds, write_llama2, write_qwen25

from tracker.shared.domain import GGUFArray, gguf_models, gguf_shard
from tracker.shared.errors import IntegrityError, UnreadableArtifactError
from tracker.sources.gguf import GGML_TYPES, parse_gguf, parse_gguf_bytes

CAP = 100_000_000


def parse_file(path: Path) -> object:
    data = path.read_bytes()
    return parse_gguf_bytes(data, max_bytes=CAP, file_size=len(data))


def test_ggml_type_table_is_gguf_pys() -> None:
    assert {i: (n, b, s) for i, (n, b, s) in GGML_TYPES.items()} == {
        int(t): (t.name, *gguf.GGML_QUANT_SIZES[t]) for t in gguf.GGMLQuantizationType
    }


def test_llama2_every_key_and_tensor_as_gguf_py_reads_it(tmp_path: Path) -> None:
    (path,) = write_llama2(tmp_path / "llama-2-7b.Q4_K_M.gguf", tmp_path, layers=3)
    header = parse_file(path)
    assert_agrees_with_gguf_py(path, header)
    meta = header.metadata  # type: ignore[attr-defined]
    # from the real Llama-2-7b-hf config.json and tokenizer files
    assert meta["llama.context_length"] == 4096 and meta["llama.block_count"] == 32
    assert meta["llama.attention.head_count"] == 32 and meta["llama.feed_forward_length"] == 11008
    assert header.special_ids == {  # type: ignore[attr-defined]
        "tokenizer.ggml.bos_token_id": 1,
        "tokenizer.ggml.eos_token_id": 2,
        "tokenizer.ggml.unknown_token_id": 0,
    }
    tokens = meta["tokenizer.ggml.tokens"]
    assert isinstance(tokens, GGUFArray) and tokens.count == 32000
    assert dict(tokens.special) == {0: "<unk>", 1: "<s>", 2: "</s>"}
    merges = meta["tokenizer.ggml.merges"]
    assert isinstance(merges, GGUFArray) and merges.count == 61249 and not merges.special
    assert header.tensors["blk.0.attn_q.weight"].ggml_type == "Q4_K"  # type: ignore[attr-defined]


def test_qwen_version_2_with_template_and_150k_vocabulary(tmp_path: Path) -> None:
    (path,) = write_qwen25(tmp_path / "qwen2.5-7b-instruct-q4_k_m.gguf", version=2)
    header = parse_file(path)
    assert header.version == 2  # type: ignore[attr-defined]
    assert_agrees_with_gguf_py(path, header)
    meta = header.metadata  # type: ignore[attr-defined]
    template = (Path("/work/shared/corpus/models/Qwen__Qwen2.5-7B-Instruct/chat_template.jinja")
                .read_text())  # fmt: skip
    assert meta["tokenizer.chat_template"] == template
    assert meta["tokenizer.ggml.tokens"].special == {151643: "<|endoftext|>", 151645: "<|im_end|>"}
    assert meta["qwen2.attention.head_count_kv"] == 4


def test_every_value_type_and_nested_arrays(tmp_path: Path) -> None:
    (path,) = write_kinds(tmp_path / "kinds.gguf")
    header = parse_file(path)
    assert_agrees_with_gguf_py(path, header)
    meta = header.metadata  # type: ignore[attr-defined]
    assert meta["kinds.uint64"] == 2**64 - 1 and meta["kinds.int64"] == -(2**63)
    assert meta["kinds.float32"] == 0.10000000149011612 and meta["kinds.bool"] is True
    assert meta["kinds.strings"] == ["a", "", "ü"] and meta["kinds.bools"] == [True, False, True]
    assert header.types["kinds.nested"] == "array[array]"  # type: ignore[attr-defined]
    assert meta["kinds.nested"].count == 2


def test_split_shards_are_one_model(tmp_path: Path) -> None:
    files = write_llama2(tmp_path / "llama-2-7b.gguf", tmp_path, layers=2, split_max_tensors=8)
    assert [f.name for f in files] == [f"llama-2-7b-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    headers = {f"q/{f.name}": parse_file(f) for f in files}
    for f in files:
        assert_agrees_with_gguf_py(f, headers[f"q/{f.name}"])
    assert gguf_shard("q/llama-2-7b-00002-of-00003.gguf") == ("q/llama-2-7b.gguf", 2, 3)
    models = gguf_models(set(headers) | {"README.md"}, headers, {})  # type: ignore[arg-type]
    model = models["q/llama-2-7b.gguf"]
    assert list(models) == ["q/llama-2-7b.gguf"] and model.complete
    assert model.metadata["split.count"] == 3 and model.metadata["llama.block_count"] == 32
    assert len(model.tensors) == 2 + 2 * 9 + 1 == sum(len(h.tensors) for h in headers.values())  # type: ignore[attr-defined]
    # a shard missing from the tree, or unreadable, leaves the model incomplete, never smaller
    two = {p: h for p, h in headers.items() if "00002" not in p}
    partial = gguf_models(set(two), two, {})["q/llama-2-7b.gguf"]  # type: ignore[arg-type]
    assert partial.missing == ("q/llama-2-7b-00002-of-00003.gguf",) and not partial.complete


def test_reads_only_the_header_in_growing_ranges(tmp_path: Path) -> None:
    (path,) = write_qwen25(tmp_path / "q.gguf")
    data = path.read_bytes()
    reads: list[tuple[int, int]] = []

    def read(offset: int, n: int) -> bytes:
        reads.append((offset, n))
        return data[offset : offset + n]

    header = parse_gguf(read, max_bytes=CAP, file_size=len(data))
    # 1 MiB, then as much again as read so far, never past the file's end (its tensors here are
    # stand-ins of a few KB: with real weights the header is all that is read)
    last = len(data) - (4 << 20)
    assert reads == [(0, 1 << 20), (1 << 20, 1 << 20), (2 << 20, 2 << 20), (4 << 20, last)]
    assert header.data_offset == 5_938_880


def test_a_short_read_is_the_transport_and_a_short_file_is_the_content(tmp_path: Path) -> None:
    (path,) = write_llama2(tmp_path / "l.gguf", tmp_path, layers=1)
    data = path.read_bytes()
    with pytest.raises(IntegrityError, match="cut in transit"):
        parse_gguf(lambda o, n: data[o : o + n // 2], max_bytes=CAP, file_size=len(data))
    cut = data[:300_000]  # inside the token list: its count fits, its strings do not
    with pytest.raises(UnreadableArtifactError) as short:
        parse_gguf_bytes(cut, max_bytes=CAP, file_size=len(cut))
    assert str(short.value) == "the header runs past the end of the 300,000-byte file (truncated)"
    cut = data[:500_000]  # past the tokens: the scores' count cannot fit
    with pytest.raises(UnreadableArtifactError) as short:
        parse_gguf_bytes(cut, max_bytes=CAP, file_size=len(cut))
    assert str(short.value) == (
        "tokenizer.ggml.scores: array length: declares 32,000 of at least 4 bytes each, more "
        "than the file holds (32,194 bytes left)"
    )
    longer = data + bytes(4096)  # a file longer than its tensors (and their padding) fill
    with pytest.raises(UnreadableArtifactError, match=r"the file.s size .* leaves"):
        parse_gguf_bytes(longer, max_bytes=CAP, file_size=len(longer))
    with pytest.raises(IntegrityError, match="cut in transit"):  # the tree says longer: a cut
        parse_gguf_bytes(data, max_bytes=CAP, file_size=len(data) + 4096)
