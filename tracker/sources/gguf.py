"""Pure reader of GGUF headers (llama.cpp's file format), incremental and bounded.

Format (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md), versions 2 and 3, little
endian: the magic `GGUF`, a u32 version, a u64 tensor count and a u64 key/value count; each
key/value is a string key (u64 length, UTF-8 bytes), a u32 value type and the value (an array is
a u32 element type, a u64 count and the elements, arrays of arrays allowed); then per tensor its
name, a u32 dimension count, u64 dimensions, a u32 ggml type and a u64 offset into the data
section, which begins at the header's end padded to `general.alignment` (32 by default).

The header has no declared length, so it is read as it is parsed: `read(offset, n)` is asked for
more bytes only when the parser needs them (the first read 1 MiB, each next one at most as long as
everything read so far, up to 16 MiB), never past `max_bytes` nor past the file's size. With the
file's size known (the tree's), a read that gives fewer bytes than asked was cut in transit: an
IntegrityError (transient: read again, never recorded as the file's content). Every
declared count and length is checked before anything is allocated for it: against the bytes a
file of the tree's size (or the cap) could still hold at the least size per element, and against
the fixed caps below. A header that breaks a rule is an UnreadableArtifactError (or an
OversizedArtifactError past the cap) naming the rule: recorded as "could not read" for that file.

Arrays of more than ARRAY_KEEP scalars (the tokenizer's token, score, token-type and merge lists)
and every array of arrays are kept as a GGUFArray: element type, count, the sha256 of their bytes
as stored, and the elements at the special ids (`tokenizer.ggml.*_token_id`) for the tokenizer's
arrays. Tensors are checked as llama.cpp checks them when it loads a file (gguf.cpp): a known
ggml type, at most 4 dimensions, rows of whole blocks, each tensor's offset the running total of
the ones before it padded to the alignment; and with the tree's size, the data must end inside
the file's last padding (a cut or extended file does not match the header that claims it).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable
from typing import Any

from tracker.shared.domain import GGUFArray, GGUFHeader, GGUFTensor, JSONValue
from tracker.shared.errors import IntegrityError, OversizedArtifactError, UnreadableArtifactError

MAGIC = b"GGUF"
VERSIONS = (2, 3)
ARRAY_KEEP = 1024
"""Arrays of at most this many scalars are kept whole; longer ones as a digest (GGUFArray)."""
MAX_KV = 10_000
"""Key/value pairs per header (real files hold 20-60)."""
MAX_TENSORS = 100_000
"""Tensors per file (real ones: a few hundred to ~2,000; llama.cpp stores experts merged)."""
MAX_KEPT_VALUES = 100_000
"""Elements of the arrays kept whole, over the header (real files: a few hundred)."""
MAX_KEY_BYTES = 65_535
"""A key or tensor name's length (the GGUF spec's bound on keys)."""
MAX_ARRAY_DEPTH = 4
"""Arrays of arrays nested deeper than this are refused (convert_hf_to_gguf writes depth 1)."""
MAX_DIMS = 4
"""GGML_MAX_DIMS."""
FIRST_READ = 1 << 20
MAX_READ = 16 << 20

_SCALARS: dict[int, tuple[str, str]] = {
    0: ("uint8", "B"),
    1: ("int8", "b"),
    2: ("uint16", "H"),
    3: ("int16", "h"),
    4: ("uint32", "I"),
    5: ("int32", "i"),
    6: ("float32", "f"),
    7: ("bool", "?"),
    10: ("uint64", "Q"),
    11: ("int64", "q"),
    12: ("float64", "d"),
}
STRING, ARRAY = 8, 9
_U64 = struct.Struct("<Q")
PER_TOKEN = ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type")
"""The tokenizer's arrays with one element per token id: kept with their special entries."""
TYPE_NAMES: dict[int, str] = {k: v[0] for k, v in _SCALARS.items()} | {
    STRING: "string",
    ARRAY: "array",
}

GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34),
    9: ("Q8_1", 32, 40),
    10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210),
    15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66),
    17: ("IQ2_XS", 256, 74),
    18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50),
    20: ("IQ4_NL", 32, 18),
    21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82),
    23: ("IQ4_XS", 256, 136),
    24: ("I8", 1, 1),
    25: ("I16", 1, 2),
    26: ("I32", 1, 4),
    27: ("I64", 1, 8),
    28: ("F64", 1, 8),
    29: ("IQ1_M", 256, 56),
    30: ("BF16", 1, 2),
    34: ("TQ1_0", 256, 54),
    35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17),
    40: ("NVFP4", 64, 36),
    41: ("Q1_0", 128, 18),
}
"""ggml types: id → (name, elements per block, bytes per block), as ggml.c and gguf-py's
GGML_QUANT_SIZES give them (tests check the two agree)."""

Read = Callable[[int, int], bytes]
"""`read(offset, n)`: up to `n` bytes of the file from `offset` (fewer only at its end)."""


class _Cursor:
    """The header's bytes read so far, and the parse position; more is read on demand."""

    def __init__(self, read: Read, file_size: int | None, max_bytes: int) -> None:
        self.read = read
        self.file_size = file_size
        self.max_bytes = max_bytes
        self.buf = bytearray()
        self.pos = 0
        self.reads = 0

    def room(self) -> int:
        """How many bytes past `pos` a header may still have: to the cap or the file's end."""
        end = self.max_bytes if self.file_size is None else min(self.max_bytes, self.file_size)
        return max(0, end - self.pos)

    def need(self, n: int) -> None:
        end = self.pos + n
        if end <= len(self.buf):
            return
        if self.file_size is not None and end > self.file_size:
            raise UnreadableArtifactError(
                f"the header runs past the end of the {self.file_size:,}-byte file (truncated)"
            )
        if end > self.max_bytes:
            raise OversizedArtifactError(
                f"the header runs past {self.max_bytes:,} bytes, the cap on a header"
            )
        have = len(self.buf)
        want = max(end - have, min(max(have, FIRST_READ), MAX_READ))
        limit = self.max_bytes if self.file_size is None else min(self.max_bytes, self.file_size)
        want = min(want, limit - have)
        got = self.read(have, want)
        self.reads += 1
        if self.file_size is not None and len(got) < want:  # never asked past the file's end
            raise IntegrityError(
                f"a read of {want:,} bytes at offset {have:,} gave {len(got):,}, in a file the "
                f"tree says is {self.file_size:,} bytes (cut in transit)"
            )
        self.buf += got[:want]
        if len(self.buf) < end:
            raise UnreadableArtifactError(
                f"the file ends at byte {len(self.buf):,}, inside its header (truncated)"
            )

    def take(self, n: int) -> bytes:
        self.need(n)
        self.pos += n
        return bytes(self.buf[self.pos - n : self.pos])

    def skip(self, n: int) -> None:
        self.need(n)
        self.pos += n

    def unpack(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        self.need(size)
        (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return value

    def count(self, what: str, n: int, least: int, cap: int | None = None) -> int:
        """`n` declared elements of at least `least` bytes each, checked before any is read."""
        if cap is not None and n > cap:
            raise UnreadableArtifactError(f"{what}: declares {n:,}, over the bound of {cap:,}")
        if n * least > self.room():
            capped = self.file_size is None or self.max_bytes < self.file_size
            where = "the cap on a header" if capped else "the file"
            raise UnreadableArtifactError(
                f"{what}: declares {n:,} of at least {least} bytes each, more than {where} "
                f"holds ({self.room():,} bytes left)"
            )
        return n

    def string(self, what: str, cap: int | None = None) -> str:
        n = self.count(f"{what}: string length", self.unpack("<Q"), 1, cap)
        raw = self.take(n)
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError as exc:
            raise UnreadableArtifactError(
                f"{what}: not UTF-8 ({exc.reason} at byte {exc.start})"
            ) from None


def _least(vtype: int) -> int:
    """The fewest bytes a value of GGUF type `vtype` takes."""
    if vtype in _SCALARS:
        return struct.calcsize("<" + _SCALARS[vtype][1])
    return 8 if vtype == STRING else 12  # a string's length; an array's type and count


class _Parser:
    def __init__(self, cur: _Cursor) -> None:
        self.cur = cur
        self.kept = 0
        self.arrays: dict[str, tuple[int, int, int]] = {}  # key -> (start, count, item type)

    def vtype(self, what: str) -> int:
        t = self.cur.unpack("<I")
        if t not in TYPE_NAMES:
            raise UnreadableArtifactError(f"{what}: unknown value type {t}")
        return int(t)

    def scalar(self, what: str, t: int) -> JSONValue:
        if t == STRING:
            return self.cur.string(what)
        value = self.cur.unpack("<" + _SCALARS[t][1])
        return bool(value) if t == 7 else value

    def skip_array(self, what: str, depth: int) -> int:
        """Walk an array's elements (after its type and count are read back here); return its
        element type."""
        if depth > MAX_ARRAY_DEPTH:
            raise UnreadableArtifactError(f"{what}: arrays nested deeper than {MAX_ARRAY_DEPTH}")
        t = self.vtype(what)
        n = self.cur.count(f"{what}: array length", self.cur.unpack("<Q"), _least(t))
        if t in _SCALARS:
            self.cur.skip(n * _least(t))
        elif t == STRING:
            self.skip_strings(what, n)
        else:
            for _ in range(n):
                self.skip_array(what, depth + 1)
        return t

    def skip_strings(self, what: str, n: int) -> None:
        """Walk `n` strings (a token or merge list: the hot loop, so it reads the buffer
        directly and asks the cursor only for more bytes or a length past what is left)."""
        cur, unpack = self.cur, _U64.unpack_from
        buf, pos = cur.buf, cur.pos  # `buf` grows in place: the same object throughout
        for _ in range(n):
            if pos + 8 > len(buf):
                cur.pos = pos
                cur.need(8)
            length = unpack(buf, pos)[0]
            pos += 8
            if pos + length > len(buf):
                cur.pos = pos
                cur.need(cur.count(f"{what}: string length", length, 1))
            pos += length
        cur.pos = pos

    def value(self, key: str, t: int) -> tuple[JSONValue, str]:
        if t != ARRAY:
            return self.scalar(key, t), TYPE_NAMES[t]
        start = self.cur.pos
        item = self.vtype(key)
        n = self.cur.count(f"{key}: array length", self.cur.unpack("<Q"), _least(item))
        name = f"array[{TYPE_NAMES[item]}]"
        if item != ARRAY and n <= ARRAY_KEEP:
            self.kept += n
            if self.kept > MAX_KEPT_VALUES:
                raise UnreadableArtifactError(
                    f"{key}: the header's arrays hold more than {MAX_KEPT_VALUES:,} values"
                )
            if item == STRING:
                return [self.cur.string(key) for _ in range(n)], name
            fmt = "<" + _SCALARS[item][1] * n
            self.cur.need(struct.calcsize(fmt))
            values = list(struct.unpack_from(fmt, self.cur.buf, self.cur.pos))
            self.cur.pos += struct.calcsize(fmt)
            return [bool(v) for v in values] if item == 7 else values, name
        self.cur.pos = start
        self.skip_array(key, 1)
        body = start + 12
        with memoryview(self.cur.buf) as view:
            digest = hashlib.sha256(view[body : self.cur.pos]).hexdigest()
        self.arrays[key] = (body, n, item)
        return GGUFArray(item_type=TYPE_NAMES[item], count=n, sha256=digest), name

    def elements(self, body: int, item: int, indexes: list[int]) -> dict[int, JSONValue]:
        """The elements at `indexes` (sorted, in range) of an array already walked whose
        elements begin at `body`."""
        buf = self.cur.buf
        out: dict[int, JSONValue] = {}
        if item in _SCALARS:
            fmt = "<" + _SCALARS[item][1]
            size = struct.calcsize(fmt)
            for i in indexes:
                value = struct.unpack_from(fmt, buf, body + i * size)[0]
                out[i] = bool(value) if item == 7 else value
            return out
        pos, at = body, 0
        for i in indexes:
            while at < i:
                pos += 8 + struct.unpack_from("<Q", buf, pos)[0]
                at += 1
            n = struct.unpack_from("<Q", buf, pos)[0]
            try:
                out[i] = str(buf[pos + 8 : pos + 8 + n], "utf-8")
            except UnicodeDecodeError:
                raise UnreadableArtifactError(f"token {i}: not UTF-8") from None
        return out


def parse_gguf(read: Read, *, max_bytes: int, file_size: int | None = None) -> GGUFHeader:
    """The header of the GGUF file `read` reads (see the module docstring); `file_size` is the
    tree's (the LFS pointer's) size, which the header must fit and its tensors must fill."""
    cur = _Cursor(read, file_size, max_bytes)
    magic = bytes(cur.take(4))
    if magic != MAGIC:
        raise UnreadableArtifactError(f"not a GGUF file: it begins {magic!r}, not b'GGUF'")
    version = cur.unpack("<I")
    if version not in VERSIONS:
        if version & 0xFFFF == 0 and (version >> 24) in VERSIONS:
            raise UnreadableArtifactError("big-endian GGUF files are not read")
        raise UnreadableArtifactError(f"GGUF version {version} (only versions 2 and 3 are read)")
    n_tensors = cur.unpack("<Q")
    n_kv = cur.unpack("<Q")
    cur.count("key/value count", n_kv, 8 + 1 + 4 + 1, MAX_KV)  # key length, 1 byte, type, value
    p = _Parser(cur)
    metadata: dict[str, JSONValue] = {}
    types: dict[str, str] = {}
    for i in range(n_kv):
        key = cur.string(f"key {i}", MAX_KEY_BYTES)
        if key in metadata:
            raise UnreadableArtifactError(f"key {key!r} appears twice")
        t = p.vtype(key)
        metadata[key], types[key] = p.value(key, t)
    cur.count("tensor count", n_tensors, 8 + 1 + 4 + 4 + 8, MAX_TENSORS)
    alignment = metadata.get("general.alignment", 32)
    if "general.alignment" in metadata and (
        types["general.alignment"] != "uint32" or alignment == 0 or alignment & (alignment - 1) != 0
    ):
        raise UnreadableArtifactError(
            f"general.alignment is {alignment!r} ({types['general.alignment']}), not a power "
            "of two as a uint32"
        )
    raw: list[tuple[str, int, tuple[int, ...], int]] = []
    names: set[str] = set()
    for i in range(n_tensors):
        name = cur.string(f"tensor {i} name", MAX_KEY_BYTES)
        if name in names:
            raise UnreadableArtifactError(f"tensor {name!r} appears twice")
        names.add(name)
        n_dims = cur.unpack("<I")
        if n_dims > MAX_DIMS:
            raise UnreadableArtifactError(f"tensor {name!r}: {n_dims} dimensions, over {MAX_DIMS}")
        shape = tuple(cur.unpack("<Q") for _ in range(n_dims))
        raw.append((name, cur.unpack("<I"), shape, cur.unpack("<Q")))
    data_offset = -(-cur.pos // alignment) * alignment
    tensors = _tensors(raw, alignment, data_offset, file_size)
    _specials(p, metadata)
    return GGUFHeader(
        version=int(version),
        metadata=metadata,
        types=types,
        tensors=tensors,
        alignment=int(alignment),
        data_offset=data_offset,
    )


def _tensors(
    raw: list[tuple[str, int, tuple[int, ...], int]],
    alignment: int,
    data_offset: int,
    file_size: int | None,
) -> dict[str, GGUFTensor]:
    tensors: dict[str, GGUFTensor] = {}
    expected = 0
    last = 0
    for name, type_id, shape, offset in raw:
        if type_id not in GGML_TYPES:
            raise UnreadableArtifactError(f"tensor {name!r}: unknown ggml type {type_id}")
        type_name, block, size = GGML_TYPES[type_id]
        if shape and shape[0] % block != 0:
            raise UnreadableArtifactError(
                f"tensor {name!r}: {type_name} rows of {shape[0]} elements are not whole "
                f"blocks of {block}"
            )
        elements = 1
        for d in shape:
            elements *= d
        nbytes = elements // block * size
        if offset != expected:
            raise UnreadableArtifactError(
                f"tensor {name!r}: its data begins at offset {offset:,}, not at {expected:,} "
                "(the tensors before it, each padded to the alignment)"
            )
        last = offset + nbytes
        expected = -(-last // alignment) * alignment
        tensors[name] = GGUFTensor(type_name, shape, offset, nbytes)
    if file_size is not None:
        data = file_size - data_offset
        if (raw and not last <= data <= expected) or (not raw and data > alignment):
            raise UnreadableArtifactError(
                f"the tensors' data ends at byte {last:,} of the data section, but the file's "
                f"size (the LFS pointer's) leaves {data:,} bytes for it"
            )
    return tensors


def _specials(p: _Parser, metadata: dict[str, JSONValue]) -> None:
    """Fill in the special entries of the tokenizer's digested per-token arrays."""
    ids = sorted(
        {
            v
            for k, v in metadata.items()
            if k.startswith("tokenizer.ggml.")
            and k.endswith("_token_id")
            and isinstance(v, int)
            and not isinstance(v, bool)
        }
    )
    for key, (body, count, item) in p.arrays.items():
        if key not in PER_TOKEN or item == ARRAY:
            continue
        arr = metadata[key]
        assert isinstance(arr, GGUFArray)
        special = p.elements(body, item, [i for i in ids if 0 <= i < count])
        metadata[key] = GGUFArray(arr.item_type, arr.count, arr.sha256, special)


def parse_gguf_bytes(data: bytes, *, max_bytes: int, file_size: int | None = None) -> GGUFHeader:
    """`parse_gguf` over bytes in memory (the whole file, or at least its header)."""
    view = memoryview(data)
    return parse_gguf(lambda o, n: bytes(view[o : o + n]), max_bytes=max_bytes, file_size=file_size)


__all__ = ["ARRAY_KEEP", "GGML_TYPES", "PER_TOKEN", "parse_gguf", "parse_gguf_bytes"]
