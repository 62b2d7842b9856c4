"""GGUF headers (issue 28): hostile headers with the reader's peak memory, and the bytes read per
GGUF revision for a 150k-token vocabulary.

`python -m bench.run gguf`. The hostile inputs are the cases tests/reliability/test_gguf_hostile.py
asserts on; the peak is what `tracemalloc` traced while `parse_gguf_bytes` ran with the default
100 MB header cap. The 150k-vocabulary file is Qwen2.5-7B-Instruct as convert_hf_to_gguf writes it
at Q4_K_M: its real config.json and chat template, its real special ids, the tensor infos of its
28 layers at their real shapes (Q4_K matrices, Q6_K embeddings and ffn_down, F32 norms), and a
STAND-IN vocabulary of its size (151,665 tokens, 151,387 merges; the corpus holds no Qwen
tokenizer.json); the weights are zeros past the header (a sparse 4.4 GB file). Bytes read are
counted at the reader's `read(offset, n)`, which the Hub source serves with one Range GET each.
"""

from __future__ import annotations

import struct
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tracker.shared.errors import TrackerError
from tracker.sources.gguf import parse_gguf, parse_gguf_bytes

MiB = 1024 * 1024
CAP = 100_000_000


def _kv_prefix(n_tensors: int, n_kv: int) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv)


def _key(name: str) -> bytes:
    raw = name.encode()
    return struct.pack("<Q", len(raw)) + raw


def hostile_headers() -> dict[str, bytes]:
    """Each hostile header, by what it does (the whole file: what the tree's size says)."""
    deep = b"".join(struct.pack("<IQ", 9, 1) for _ in range(10_000)) + struct.pack("<IQ", 5, 0)
    return {
        "array length 2^63": _kv_prefix(0, 1)
        + _key("tokenizer.ggml.tokens")
        + struct.pack("<IIQ", 9, 8, 2**63),
        "10^9 keys": _kv_prefix(0, 10**9) + _key("general.architecture"),
        "string length 2^62": _kv_prefix(0, 1)
        + _key("general.name")
        + struct.pack("<IQ", 8, 2**62)
        + b"x" * 64,
        "tensor count 2^63": _kv_prefix(2**63, 0) + bytes(64),
        "truncated header (cut in its token list)": _truncated(),
        "bad magic": b"GGML" + struct.pack("<IQQ", 3, 0, 0),
        "arrays nested 10,000 deep": _kv_prefix(0, 1)
        + _key("general.nested")
        + struct.pack("<I", 9)
        + deep,
    }


def _truncated() -> bytes:
    """The first 1 MiB of a 150k-vocabulary header (the file is that long: the tree says so)."""
    header, _ = qwen_header()
    return header[:MiB]


_QWEN: tuple[bytes, int] | None = None


def qwen_header() -> tuple[bytes, int]:
    """(the header bytes, the whole file's size) of the 150k-vocabulary Q4_K_M file."""
    global _QWEN
    if _QWEN is None:
        _QWEN = _write_qwen()
    return _QWEN


def _write_qwen() -> tuple[bytes, int]:
    import json
    import tempfile

    import gguf

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "ingest"))
    from ggufkit import QWEN25_CONFIG, QWEN25_TEMPLATE, _arch_keys, stand_in_vocab

    cfg = json.loads(QWEN25_CONFIG.read_text())
    q = gguf.GGMLQuantizationType
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "qwen2.5-7b-instruct-q4_k_m.gguf"
        w = gguf.GGUFWriter(path, "qwen2")
        w.add_type(gguf.GGUFType.MODEL)
        w.add_name("Qwen2.5 7B Instruct")
        w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)
        _arch_keys(w, cfg)
        base = stand_in_vocab(151_643)
        added = [f"<|special_{i}|>" for i in range(22)]
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("qwen2")
        w.add_token_list(base + added)
        w.add_token_types([1] * len(base) + [3] * len(added))
        w.add_token_merges([f"{base[i]} {base[(7 * i + 1) % len(base)]}" for i in range(151_387)])
        w.add_eos_token_id(151645)
        w.add_pad_token_id(151643)
        w.add_bos_token_id(151643)
        w.add_chat_template(QWEN25_TEMPLATE.read_text())
        w.add_quantization_version(gguf.GGML_QUANT_VERSION)
        h, f, kv = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_key_value_heads"]
        head = h // cfg["num_attention_heads"]
        total = 0

        def info(name: str, shape: tuple[int, ...], qtype: Any) -> None:
            nonlocal total
            block, size = gguf.GGML_QUANT_SIZES[qtype]
            n = 1
            for d in shape:
                n *= d
            nbytes = n // block * size
            # gguf-py takes numpy order (ne0, the input dimension, last), in bytes when quantized
            if block > 1:
                stored = (*shape[:-1], shape[-1] // block * size)
                w.add_tensor_info(name, stored, gguf.np.uint8, nbytes, raw_dtype=qtype)
            else:
                w.add_tensor_info(name, shape, gguf.np.float32, nbytes, raw_dtype=qtype)
            total += -(-nbytes // 32) * 32

        info("token_embd.weight", (cfg["vocab_size"], h), q.Q6_K)
        for i in range(cfg["num_hidden_layers"]):
            info(f"blk.{i}.attn_norm.weight", (h,), q.F32)
            info(f"blk.{i}.attn_q.weight", (h, h), q.Q4_K)
            info(f"blk.{i}.attn_q.bias", (h,), q.F32)
            info(f"blk.{i}.attn_k.weight", (kv * head, h), q.Q4_K)
            info(f"blk.{i}.attn_k.bias", (kv * head,), q.F32)
            info(f"blk.{i}.attn_v.weight", (kv * head, h), q.Q6_K)
            info(f"blk.{i}.attn_v.bias", (kv * head,), q.F32)
            info(f"blk.{i}.attn_output.weight", (h, h), q.Q4_K)
            info(f"blk.{i}.ffn_gate.weight", (f, h), q.Q4_K)
            info(f"blk.{i}.ffn_up.weight", (f, h), q.Q4_K)
            info(f"blk.{i}.ffn_down.weight", (h, f), q.Q6_K)
            info(f"blk.{i}.ffn_norm.weight", (h,), q.F32)
        info("output_norm.weight", (h,), q.F32)
        info("output.weight", (cfg["vocab_size"], h), q.Q6_K)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        w.close()
        header = path.read_bytes()
    return header, -(-len(header) // 32) * 32 + total


def _peak(fn: Callable[[], object]) -> tuple[str, int, float]:
    tracemalloc.start()
    started = time.perf_counter()
    try:
        try:
            fn()
            outcome = "read"
        except TrackerError as exc:
            outcome = f"could not read: {exc}"
        return outcome, tracemalloc.get_traced_memory()[1], time.perf_counter() - started
    finally:
        tracemalloc.stop()


def run() -> str:
    rows = []
    for what, data in hostile_headers().items():
        outcome, peak, seconds = _peak(
            lambda data=data: parse_gguf_bytes(data, max_bytes=CAP, file_size=len(data))  # type: ignore[misc]
        )
        rows.append((what, len(data), outcome, peak, seconds))
    header, size = qwen_header()
    reads: list[int] = []

    def read(offset: int, n: int) -> bytes:
        reads.append(n)
        chunk = header[offset : offset + n]
        return chunk + bytes(min(n, size - offset) - len(chunk))  # zeros: the weights

    started = time.perf_counter()
    parsed = parse_gguf(read, max_bytes=CAP, file_size=size)
    seconds = time.perf_counter() - started
    out = [
        "## GGUF headers: hostile headers and bytes read per revision (`python -m bench.run gguf`)",
        "",
        "Peak bytes traced by `tracemalloc` while `tracker.sources.gguf.parse_gguf_bytes` read "
        "each hostile header (the whole file, its size the tree's; cap 100 MB). Each is one "
        "'could not read' line for its file (tests/reliability/test_gguf_hostile.py asserts "
        "the same cases inside a revision whose other files are stored).",
        "",
        "| input | bytes | outcome | peak MiB | s |",
        "| --- | --- | --- | --- | --- |",
    ]
    for what, n, outcome, peak, secs in rows:
        out.append(
            f"| {what} | {n:,} | {outcome.replace('|', '/')} | {peak / MiB:.2f} | {secs:.3f} |"
        )
    out += [
        "",
        "Bytes read for one GGUF revision of a 150k-token vocabulary (Qwen2.5-7B-Instruct Q4_K_M "
        "layout, real config, template and tensor shapes, stand-in tokens: see bench/gguf.py):",
        "",
        "| file bytes | header bytes | reads | bytes read | share of the file | s |",
        "| --- | --- | --- | --- | --- | --- |",
        f"| {size:,} | {parsed.data_offset:,} | {len(reads)} ({', '.join(f'{n / MiB:.2f}' for n in reads)} MiB) "
        f"| {sum(reads):,} | {sum(reads) / size:.4%} | {seconds:.2f} |",
    ]
    return "\n".join(out) + "\n"
