"""Hypothesis strategies for hostile upstream content: real files mutated the way a broken
network or a hostile publisher would, and structural bombs (deep, wide, aliased, oversized).

Real files come from ../shared/corpus (each strategy names its source); the mutations are ours.
"""

from __future__ import annotations

import json
import struct
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import transformers
from hypothesis import strategies as st

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"
MODELS = CORPUS / "models"

REAL: dict[str, bytes] = {
    "config.json": (MODELS / "openai__gpt-oss-20b" / "config.json").read_bytes(),
    "generation_config.json": (MODELS / "openai__gpt-oss-20b" / "generation_config.json").read_bytes(),
    "tokenizer_config.json": (MODELS / "openai__gpt-oss-20b" / "tokenizer_config.json").read_bytes(),
    "special_tokens_map.json": (MODELS / "meta-llama__Llama-2-7b-hf" / "special_tokens_map.json").read_bytes(),
    "chat_template.jinja": (MODELS / "meta-llama__Llama-3.2-3B-Instruct" / "chat_template.jinja").read_bytes(),
    "chat_template.json": (MODELS / "openai__gpt-oss-20b" / "chat_template.json").read_bytes(),
    "model.safetensors.index.json": (MODELS / "meta-llama__Llama-2-7b-hf" / "model.safetensors.index.json").read_bytes(),
    "README.md": (MODELS / "meta-llama__Llama-4-Maverick-17B-128E-Instruct" / "README.frontmatter.md").read_bytes() + b"\n# Model card\n",
    "tokenizer.json": (CORPUS / "pairs" / "mistralai__Mistral-7B-Instruct-v0.3" / "rev-main-83e9aa1" / "tokenizer.json").read_bytes(),
    "modeling_deepseek.py": (Path(transformers.__file__).parent / "models" / "deepseek_v3" / "modeling_deepseek_v3.py").read_bytes(),
}  # fmt: skip
"""One real publisher file per reader (openai/gpt-oss-20b, Llama-2-7b-hf, Llama-3.2-3B-Instruct,
Llama-4-Maverick, Mistral-7B-Instruct-v0.3; the remote code module is transformers'
modeling_deepseek_v3.py, what DeepSeek-V3's auto_map names, as the preflight parses it)."""


def safetensors_file(header: dict[str, Any], data_bytes: int = 0) -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + bytes(data_bytes)


REAL_HEADER = safetensors_file(
    {
        "__metadata__": {"format": "pt"},
        "model.embed_tokens.weight": {
            "dtype": "BF16",
            "shape": [32, 16],
            "data_offsets": [0, 1024],
        },
        "model.norm.weight": {"dtype": "F32", "shape": [16], "data_offsets": [1024, 1088]},
    },
    1088,
)
"""A stand-in header in the real layout (names from Llama-2's index; sizes shrunk)."""

_HOSTILE_NUMBERS = [b"1e400", b"-1e999", b"9" * 5000, b"NaN", b"Infinity", b"-0", b"1e-400"]
_HOSTILE_STRINGS = [b'"\\ud800"', b'"\\udfff\\ud800"', b'"\\u0000"', b'"' + b"\\n" * 1000 + b'"']


def _mutate(real: bytes, op: int, at: float, size: int, payload: bytes) -> bytes:
    i = min(len(real), int(at * len(real)))
    if op == 0:  # truncated
        return real[:i]
    if op == 1:  # a run overwritten
        return real[:i] + payload[:size] + real[i + size :]
    if op == 2:  # something inserted
        return real[:i] + payload + real[i:]
    if op == 3:  # a segment duplicated
        return real[:i] + real[i : i + size] * 3 + real[i:]
    return payload + real  # a prefix (BOM, NUL, garbage)


def mutated(real: bytes) -> st.SearchStrategy[bytes]:
    """`real` truncated, overwritten, extended or prefixed with hostile bytes."""
    payloads = st.one_of(
        st.binary(min_size=1, max_size=32),
        st.sampled_from(_HOSTILE_NUMBERS + _HOSTILE_STRINGS),
        st.integers(60, 3000).map(lambda d: b"[" * d + b"]" * d),
        st.integers(60, 3000).map(lambda d: b'{"a":' * d + b"1" + b"}" * d),
        st.sampled_from([b"\xef\xbb\xbf", b"\x00", b"\xff\xfe", b"---\n", b"{{", b"{%"]),
    )
    return st.builds(
        _mutate,
        st.just(real),
        st.integers(0, 4),
        st.floats(0, 1),
        st.integers(1, 64),
        payloads,
    )


def json_bombs() -> st.SearchStrategy[bytes]:
    """Valid or nearly valid JSON that is deep, wide or numerically absurd."""
    deep = st.integers(1, 5000).map(lambda d: b'{"k":' * d + b"0" + b"}" * d)
    deep_arrays = st.integers(1, 5000).map(lambda d: b'{"a":' + b"[" * d + b"]" * d + b"}")
    wide = st.integers(1, 200_000).map(lambda n: b'{"a":[' + b",".join([b"{}"] * n) + b"]}")
    keys = st.integers(1, 50_000).map(
        lambda n: b"{" + b",".join(b'"k%d":%d' % (i, i) for i in range(n)) + b"}"
    )
    numbers = st.sampled_from(_HOSTILE_NUMBERS + _HOSTILE_STRINGS).map(
        lambda v: b'{"a":' + v + b"}"
    )
    long_string = st.integers(1, 2_000_000).map(lambda n: b'{"a":"' + b"x" * n + b'"}')
    return st.one_of(deep, deep_arrays, wide, keys, numbers, long_string)


def yaml_bombs() -> st.SearchStrategy[bytes]:
    """Front matter that is an alias bomb, recursive, deep, multi-document or tagged."""

    def laughs(levels: int, width: int) -> bytes:
        doc = "a0: &a0 [" + ",".join(["lol"] * width) + "]\n"
        for i in range(1, levels):
            doc += f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * width) + "]\n"
        return doc.encode()

    body = st.one_of(
        st.builds(laughs, st.integers(2, 12), st.integers(2, 12)),
        st.just(b"a: &x [*x, *x]\n"),
        st.integers(1, 3000).map(lambda d: b"a: " + b"[" * d + b"]" * d + b"\n"),
        st.integers(1, 200).map(lambda d: b"".join(b"  " * i + b"k:\n" for i in range(d))),
        st.just(b"a: 1\n---\nb: 2\n"),
        st.just(b"a: !!python/object/apply:os.system [echo]\n"),
        st.just(b"? [a, b]\n: 1\n"),
        st.text(max_size=200).map(str.encode),
    )
    return body.map(lambda b: b"---\n" + b + b"\n---\nbody\n")


def jinja_bombs() -> st.SearchStrategy[bytes]:
    """Templates that try to spend time or memory: huge loops and strings, deep nesting,
    recursive macros, growing lists."""
    return st.one_of(
        st.integers(1, 10**9).map(lambda n: b"{% for i in range(" + str(n).encode() + b") %}{{ 'x' * "
                                  + str(n).encode() + b" }}{% endfor %}"),
        st.integers(1, 800).map(lambda d: b"{% if true %}" * d + b"x" + b"{% endif %}" * d),
        st.integers(1, 800).map(lambda d: b"{{ " + b"(" * d + b"1" + b")" * d + b" }}"),
        st.just(b"{% macro m(x) %}{{ m(x ~ x) }}{% endmacro %}{{ m('a') }}"),
        st.just(b"{% set ns = namespace(a=[1]) %}{% for i in range(64) %}"
                b"{% set ns.a = ns.a + ns.a %}{% endfor %}{{ ns.a | length }}"),
        st.just(b"{{ messages | tojson(indent=100000) }}"),
        st.just(b"{{ ''.__class__.__mro__[1].__subclasses__() }}"),
    )  # fmt: skip


def hostile(name: str) -> st.SearchStrategy[bytes]:
    """Everything hostile for the reader of `name`."""
    real = REAL_HEADER if name.endswith(".safetensors") else REAL[name]
    parts = [mutated(real), st.binary(max_size=256)]
    if name.endswith((".json", ".safetensors")):
        bombs = json_bombs()
        if name.endswith(".safetensors"):
            bombs = bombs.map(lambda b: struct.pack("<Q", len(b)) + b)
        parts.append(bombs)
    if name.endswith(".jinja"):
        parts.append(jinja_bombs())
    if name == "README.md":
        parts.append(yaml_bombs())
    return st.one_of(*parts)


T = TypeVar("T")


def peak_of(fn: Callable[[], T]) -> tuple[T | BaseException, int]:
    """(result or the exception raised, peak bytes traced while `fn` ran)."""
    tracemalloc.start()
    try:
        try:
            result: T | BaseException = fn()
        except BaseException as exc:  # the caller decides what may escape
            result = exc
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
