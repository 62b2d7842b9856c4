"""GGUF test files written by llama.cpp's own `gguf` package (gguf-py's GGUFWriter and
SpecialVocab), from real corpus files, the way `convert_hf_to_gguf.py` writes them.

- `llama2`: Llama-2-7b-hf's real config.json, tokenizer.json (corpus pairs, rev e469318) and
  tokenizer_config.json: `llama.*` keys from the config, the tokenizer as LlamaHfVocab yields it
  (tokens in id order, score -1000.0, BYTE for `<0x..>`, CONTROL for the special ids), merges,
  special ids and add_bos/add_eos from gguf-py's SpecialVocab.
- `qwen25`: Qwen2.5-7B's real config.json and Qwen2.5-7B-Instruct's real chat template, with the
  real special ids; the 151,643 base tokens and their merges are a STAND-IN (the corpus holds no
  Qwen tokenizer.json): generated strings of Qwen's vocabulary size and typical lengths.
- every file: the tensor names convert_hf_to_gguf gives the config's layers, at stand-in small
  shapes (256 x 4 for matrices, 256 for norms: the weights are never read), mixed quant types.
"""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gguf
import numpy as np

CORPUS = Path("/work/shared/corpus")
LLAMA2 = CORPUS / "models/meta-llama__Llama-2-7b-hf"
LLAMA2_TOKENIZER = CORPUS / "pairs/meta-llama__Llama-2-7b-hf/rev-e469318/tokenizer.json"
QWEN25_CONFIG = CORPUS / "models/Qwen__Qwen2.5-7B/config.json"
QWEN25_TEMPLATE = CORPUS / "models/Qwen__Qwen2.5-7B-Instruct/chat_template.jinja"
Q = gguf.GGMLQuantizationType


def _arch_keys(w: gguf.GGUFWriter, cfg: dict[str, Any]) -> None:
    """What convert_hf_to_gguf's TextModel.set_gguf_parameters writes from a config."""
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg.get("num_key_value_heads", cfg["num_attention_heads"]))
    w.add_rope_freq_base(float(cfg.get("rope_theta", 10000.0)))
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_vocab_size(cfg["vocab_size"])
    w.add_rope_dimension_count(cfg["hidden_size"] // cfg["num_attention_heads"])


def _tensors(w: gguf.GGUFWriter, layers: int, quant: Q = Q.Q4_K) -> None:
    """convert_hf_to_gguf's llama tensor names, at stand-in small shapes (the weights are zeros;
    tracker never reads them)."""

    def matrix(name: str, qtype: Q) -> None:
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        if qtype in (Q.F32, Q.F16, Q.BF16):
            dtype = {Q.F32: np.float32, Q.F16: np.float16, Q.BF16: np.uint16}[qtype]
            data = np.zeros((4, 256), dtype=dtype)
            w.add_tensor(name, data, raw_dtype=qtype if qtype is Q.BF16 else None)
        else:
            data = np.zeros((4, 256 // block * size), dtype=np.uint8)
            w.add_tensor(name, data, raw_dtype=qtype)

    def norm(name: str) -> None:
        w.add_tensor(name, np.zeros(256, dtype=np.float32))

    matrix("token_embd.weight", Q.Q6_K if quant is not Q.F16 else Q.F16)
    for i in range(layers):
        norm(f"blk.{i}.attn_norm.weight")
        for part in ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up"):
            matrix(f"blk.{i}.{part}.weight", quant)
        matrix(f"blk.{i}.ffn_down.weight", Q.Q6_K if quant is Q.Q4_K else quant)
        norm(f"blk.{i}.ffn_norm.weight")
    norm("output_norm.weight")
    matrix("output.weight", Q.Q6_K if quant is not Q.F16 else Q.F16)


def _llama_vocab(tokenizer: dict[str, Any], specials: set[int]) -> tuple[list[str], list[int]]:
    """Tokens and token types as gguf-py's LlamaHfVocab yields them (without transformers)."""
    by_id = {i: t for t, i in tokenizer["model"]["vocab"].items()}
    for added in tokenizer["added_tokens"]:
        by_id[added["id"]] = added["content"]
    tokens, types = [], []
    for i in range(len(by_id)):
        text = by_id[i]
        tokens.append(text)
        if text.startswith("<0x") and text.endswith(">") and len(text) == 6:
            types.append(gguf.TokenType.BYTE)
        elif i in specials:
            types.append(gguf.TokenType.CONTROL)
        else:
            types.append(gguf.TokenType.NORMAL)
    return tokens, types


def write_llama2(
    path: Path,
    work: Path,
    *,
    eos_id: int | None = None,
    template: str | None = None,
    quant: Q = Q.Q4_K,
    split_max_tensors: int = 0,
    layers: int | None = None,
) -> list[Path]:
    """A Llama-2-7b-hf GGUF at `path` (or its shards, with `split_max_tensors`); `eos_id` and
    `template` override what the corpus files give (a re-upload's change). Returns the files."""
    src = work / "llama2-src"
    if not src.exists():
        src.mkdir(parents=True)
        shutil.copy(LLAMA2_TOKENIZER, src / "tokenizer.json")
        shutil.copy(LLAMA2 / "tokenizer_config.json", src / "tokenizer_config.json")
        shutil.copy(LLAMA2 / "config.json", src / "config.json")
    cfg = json.loads((src / "config.json").read_text())
    tok = json.loads((src / "tokenizer.json").read_text())
    special = gguf.SpecialVocab(src, load_merges=True, n_vocab=cfg["vocab_size"])
    tokens, types = _llama_vocab(tok, set(special.special_token_ids.values()))
    w = gguf.GGUFWriter(path, "llama", split_max_tensors=split_max_tensors)
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name("Llama 2 7b Hf")
    w.add_basename("Llama-2")
    w.add_size_label("7B")
    w.add_license("llama2")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M if quant is Q.Q4_K else 1)
    _arch_keys(w, cfg)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores([-1000.0] * len(tokens))
    w.add_token_types(types)
    special.add_to_gguf(w, quiet=True)
    if eos_id is not None:
        w.add_eos_token_id(eos_id)  # replaces the value SpecialVocab set (same key)
    if template is not None:
        w.add_chat_template(template)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    _tensors(w, layers if layers is not None else cfg["num_hidden_layers"], quant)
    return _finish(w, path)


def _real_tensor_infos(w: gguf.GGUFWriter, cfg: dict[str, Any], quant: Q) -> None:
    """convert_hf_to_gguf's llama tensors at the config's REAL shapes, declared only (the header
    is written, the data never: it is the zero-filled rest of a sparse LFS object). Types as
    `_tensors` mixes them: `quant` for the matrices, Q6_K for ffn_down, token_embd and output
    under Q4_K (F16 throughout under F16), F32 norms."""
    hidden, inter, vocab = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    heads, kv = (
        cfg["num_attention_heads"],
        cfg.get("num_key_value_heads", cfg["num_attention_heads"]),
    )
    kv_dim = hidden // heads * kv

    def info(name: str, shape: tuple[int, ...], qtype: Q) -> None:
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        n = 1
        for d in shape:
            n *= d
        w.add_tensor_info(name, shape, np.dtype(np.float32), n // block * size, raw_dtype=qtype)

    edge = Q.Q6_K if quant is Q.Q4_K else quant
    info("token_embd.weight", (vocab, hidden), edge)
    for i in range(cfg["num_hidden_layers"]):
        info(f"blk.{i}.attn_norm.weight", (hidden,), Q.F32)
        info(f"blk.{i}.attn_q.weight", (hidden, hidden), quant)
        info(f"blk.{i}.attn_k.weight", (kv_dim, hidden), quant)
        info(f"blk.{i}.attn_v.weight", (kv_dim, hidden), quant)
        info(f"blk.{i}.attn_output.weight", (hidden, hidden), quant)
        info(f"blk.{i}.ffn_gate.weight", (inter, hidden), quant)
        info(f"blk.{i}.ffn_up.weight", (inter, hidden), quant)
        info(f"blk.{i}.ffn_down.weight", (hidden, inter), edge)
        info(f"blk.{i}.ffn_norm.weight", (hidden,), Q.F32)
    info("output_norm.weight", (hidden,), Q.F32)
    info("output.weight", (vocab, hidden), edge)


def llama2_full_size(path: Path, work: Path, *, config: Path, quant: Q = Q.Q4_K) -> int:
    """Llama-2-7b-hf's GGUF as convert_hf_to_gguf writes it from `config` (a real config.json of
    its history: the context length is its `max_position_embeddings`), with the real tokenizer
    and the tensors at their REAL shapes: only the header is written to `path`; returns the whole
    file's size (header, padding and every tensor's bytes), for `write_sparse_lfs_object`."""
    src = work / "llama2-src"
    if not src.exists():
        src.mkdir(parents=True)
        shutil.copy(LLAMA2_TOKENIZER, src / "tokenizer.json")
        shutil.copy(LLAMA2 / "tokenizer_config.json", src / "tokenizer_config.json")
        shutil.copy(LLAMA2 / "config.json", src / "config.json")
    cfg = json.loads(config.read_text())
    tok = json.loads((src / "tokenizer.json").read_text())
    special = gguf.SpecialVocab(src, load_merges=True, n_vocab=cfg["vocab_size"])
    tokens, types = _llama_vocab(tok, set(special.special_token_ids.values()))
    w = gguf.GGUFWriter(path, "llama")
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name("Llama 2 7b Hf")
    w.add_file_type(
        {Q.Q4_K: gguf.LlamaFileType.MOSTLY_Q4_K_M, Q.Q8_0: gguf.LlamaFileType.MOSTLY_Q8_0,
         Q.F16: gguf.LlamaFileType.MOSTLY_F16}[quant]
    )  # fmt: skip
    _arch_keys(w, cfg)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores([-1000.0] * len(tokens))
    w.add_token_types(types)
    special.add_to_gguf(w, quiet=True)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    _real_tensor_infos(w, cfg, quant)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    assert w.fout is not None
    for fout in w.fout:
        w.write_padding(fout, fout.tell())
    w.close()
    data = sum(w.ggml_pad(t.nbytes, w.data_alignment) for t in w.tensors[0].values())
    return path.stat().st_size + data


def stand_in_vocab(n: int) -> list[str]:
    """`n` distinct byte-level-BPE-like token strings of Qwen's typical lengths (STAND-IN;
    computed once per process)."""
    return list(_stand_in_vocab(n))


@functools.cache
def _stand_in_vocab(n: int) -> tuple[str, ...]:
    alphabet = "abcdefghijklmnopqrstuvwxyzĠĊ"
    out = []
    for i in range(n):
        s, k = [], i
        while True:
            s.append(alphabet[k % len(alphabet)])
            k //= len(alphabet)
            if k == 0:
                break
        out.append("".join(s) + alphabet[i % 7] * (i % 5))
    return tuple(out)


QWEN25_ADDED = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>",
                "<|object_ref_end|>", "<|box_start|>", "<|box_end|>", "<|quad_start|>",
                "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
                "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>",
                "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>",
                "<|file_sep|>"]  # fmt: skip


def write_qwen25(path: Path, *, template: str | None = None, version: int = 3) -> list[Path]:
    """Qwen2.5-7B-Instruct as convert_hf_to_gguf writes it (gpt2 tokenizer, qwen2 pre-tokenizer):
    real config, template and special ids; stand-in base tokens and merges (see the module
    docstring). `version` 2 rewrites the version field (v2 and v3 differ only in v3's
    big-endian support, so the bytes are otherwise the same)."""
    return write_qwen_like(
        path,
        config=QWEN25_CONFIG,
        name="Qwen2.5 7B Instruct",
        template=template if template is not None else QWEN25_TEMPLATE.read_text(),
        added=QWEN25_ADDED,
        specials={"eos": 151645, "pad": 151643, "bos": 151643},
        version=version,
    )


def write_qwen_like(
    path: Path,
    *,
    config: Path,
    name: str,
    template: str,
    added: list[str],
    specials: dict[str, int],
    quant: Q = Q.Q4_K,
    version: int = 3,
    base_models: tuple[tuple[str, str, str], ...] = (),
) -> list[Path]:
    """A qwen2-architecture GGUF from `config` (a real config.json) with `template`, the stand-in
    151,643 base tokens followed by `added`, and `specials` (`eos`: id …). `base_models`: (name,
    organization, repo URL) of each base, as convert_hf_to_gguf writes `general.base_model.*`
    from the card's `base_model`."""
    cfg = json.loads(config.read_text())
    base = stand_in_vocab(151_643)
    w = gguf.GGUFWriter(path, "qwen2")
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name(name)
    if base_models:
        w.add_base_model_count(len(base_models))
        for i, (base_name, org, url) in enumerate(base_models):
            w.add_base_model_name(i, base_name)
            w.add_base_model_organization(i, org)
            w.add_base_model_repo_url(i, url)
    w.add_file_type(
        gguf.LlamaFileType.MOSTLY_Q4_K_M if quant is Q.Q4_K else gguf.LlamaFileType.MOSTLY_Q8_0
    )
    _arch_keys(w, cfg)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(base + added)
    w.add_token_types([gguf.TokenType.NORMAL] * len(base) + [gguf.TokenType.CONTROL] * len(added))
    w.add_token_merges([f"{base[i]} {base[(7 * i + 1) % len(base)]}" for i in range(151_387)])
    for kind, token_id in specials.items():
        getattr(w, f"add_{kind}_token_id")(token_id)
    w.add_add_bos_token(False)
    w.add_chat_template(template)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    _tensors(w, 2, quant)
    files = _finish(w, path)
    if version != 3:
        with open(path, "r+b") as fh:
            fh.seek(4)
            fh.write(struct.pack("<I", version))
    return files


def write_kinds(path: Path) -> list[Path]:
    """A file holding a value of every GGUF type, arrays of each and nested arrays, under the
    `general.*` keys convert_hf_to_gguf never writes but readers must accept (any key is
    allowed); tensors: two F32 norms."""
    w = gguf.GGUFWriter(path, "llama")
    w.add_uint8("kinds.uint8", 255)
    w.add_int8("kinds.int8", -128)
    w.add_uint16("kinds.uint16", 65535)
    w.add_int16("kinds.int16", -32768)
    w.add_uint32("kinds.uint32", 4294967295)
    w.add_int32("kinds.int32", -2147483648)
    w.add_float32("kinds.float32", 0.1)
    w.add_uint64("kinds.uint64", 2**64 - 1)
    w.add_int64("kinds.int64", -(2**63))
    w.add_float64("kinds.float64", 1e-300)
    w.add_bool("kinds.bool", True)
    w.add_string("kinds.string", "déjà vu ✓")
    w.add_string("kinds.empty", "")
    w.add_array("kinds.ints", [1, -2, 3])
    w.add_array("kinds.floats", [0.5, -1.25])
    w.add_array("kinds.bools", [True, False, True])
    w.add_array("kinds.strings", ["a", "", "ü"])
    w.add_array("kinds.nested", [[1, 2], [3]])
    w.add_array("kinds.nested_strings", [["x", "y"], ["z"]])
    w.add_tensor("a.weight", np.zeros(32, dtype=np.float32))
    w.add_tensor("b.weight", np.zeros((3, 32), dtype=np.float16))
    return _finish(w, path)


def _finish(w: gguf.GGUFWriter, path: Path) -> list[Path]:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    shards = sorted(path.parent.glob(path.stem + "-*-of-*.gguf"))
    return shards or [path]


# -- the oracle: every key of a file as gguf-py's GGUFReader reads it, compared -------------

_NP = {"uint8": "<u1", "int8": "<i1", "uint16": "<u2", "int16": "<i2", "uint32": "<u4",
       "int32": "<i4", "float32": "<f4", "bool": "?", "uint64": "<u8", "int64": "<i8",
       "float64": "<f8"}  # fmt: skip


def element_bytes(values: list[Any], item_type: str) -> bytes:
    """An array's element bytes as GGUF stores them (for the digest), from decoded values."""
    if item_type == "string":
        out = bytearray()
        for v in values:
            raw = v.encode() if isinstance(v, str) else bytes(v)
            out += struct.pack("<Q", len(raw)) + raw
        return bytes(out)
    return np.array(values, dtype=_NP[item_type]).tobytes()


def gguf_reader(path: Path) -> gguf.GGUFReader:
    """gguf-py's GGUFReader of `path`, made once per file content (a 150k-token file takes
    seconds to read; each oracle check reads the same file several times)."""
    stat = path.stat()
    return _reader(path, stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _reader(path: Path, size: int, mtime_ns: int) -> gguf.GGUFReader:
    return gguf.GGUFReader(path)


def reader_fields(path: Path) -> Iterator[tuple[str, str, Any]]:
    """(key, type name as tracker writes it, value) of every key/value GGUFReader reads."""
    reader = gguf_reader(path)
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        main = field.types[0]
        if main == gguf.GGUFValueType.ARRAY:
            sub = field.types[1] if len(field.types) > 1 else field.types[-1]
            if sub == gguf.GGUFValueType.ARRAY:
                yield key, "array[array]", field  # nested: compared by bytes
                continue
            yield key, f"array[{sub.name.lower()}]", field.contents()
        else:
            yield key, main.name.lower(), field.contents()


def nested_digest(path: Path, key: str) -> tuple[int, str]:
    """(count, sha256 of the element bytes) of a nested array, from the file's raw bytes at the
    offsets GGUFReader found the field."""
    reader = gguf_reader(path)
    field = reader.fields[key]
    start = field.offset + 8 + len(key.encode()) + 4 + 4 + 8  # key, value type, item type, count
    end = field.offset + sum(int(p.nbytes) for p in field.parts)
    count = int(field.parts[4][0])
    return count, hashlib.sha256(bytes(reader.data[start:end])).hexdigest()


def assert_agrees_with_gguf_py(path: Path, header: Any) -> None:
    """tracker's header of `path` says what gguf-py's GGUFReader reads, on every key and tensor:
    values kept whole equal; digested arrays by count, the sha256 of the element bytes rebuilt
    from the reader's values, and the special entries; nested arrays by count and bytes."""
    from tracker.shared.domain import GGUFArray

    reader = gguf_reader(path)
    assert header.version == reader.fields["GGUF.version"].contents()
    assert header.data_offset == reader.data_offset
    assert header.alignment == reader.alignment
    ids = sorted(set(header.special_ids.values()))
    seen = []
    for key, type_name, value in reader_fields(path):
        seen.append(key)
        assert header.types[key] == type_name, key
        mine = header.metadata[key]
        if type_name == "array[array]":
            count, digest = nested_digest(path, key)
            assert mine == GGUFArray("array", count, digest), key
        elif isinstance(mine, GGUFArray):
            item = type_name.removeprefix("array[").removesuffix("]")
            assert mine.item_type == item and mine.count == len(value), key
            assert mine.sha256 == hashlib.sha256(element_bytes(value, item)).hexdigest(), key
            want = {i: value[i] for i in ids if i < len(value)}
            per_token = key in ("tokenizer.ggml.tokens", "tokenizer.ggml.scores",
                                 "tokenizer.ggml.token_type")  # fmt: skip
            assert dict(mine.special) == (want if per_token else {}), key
        else:
            assert mine == value and type(mine) is type(value), (key, mine, value)
    assert seen == list(header.metadata)
    assert list(header.tensors) == [t.name for t in reader.tensors]
    for t in reader.tensors:
        mine = header.tensors[t.name]
        assert mine.ggml_type == t.tensor_type.name, t.name
        assert mine.shape == tuple(int(d) for d in t.shape), t.name
        assert mine.nbytes == int(t.n_bytes), t.name
        assert mine.offset == int(t.data_offset) - reader.data_offset, t.name
