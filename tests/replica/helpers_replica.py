"""Helpers for the replica tests: safetensors bytes and Hub-style repos written with tracker.replica.repos.

`acme/llama` uses the real Llama-2-7b-hf config, tokenizer config and README front matter copied from
the shared corpus (tests/replica/data/llama2/, source: SOURCES.tsv, HamZil/Llama-2-7b-hf @ 8cca527).
"""

from __future__ import annotations

import json
import struct
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tracker.replica.repos import commit, init_repo, set_ref

DATA = Path(__file__).parent / "data"
T0 = datetime(2025, 1, 5, tzinfo=UTC)


def safetensors_bytes(tensors: dict[str, tuple[str, list[int]]], pad_header_to: int = 0) -> bytes:
    """A valid safetensors file with zero-filled data for `tensors` (name -> (dtype, shape))."""
    sizes = {"F32": 4, "BF16": 2, "F16": 2, "I64": 8, "U8": 1}
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        count = 1
        for dim in shape:
            count *= dim
        end = offset + count * sizes[dtype]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, end]}
        offset = end
    raw = json.dumps(header).encode()
    if len(raw) < pad_header_to:
        raw += b" " * (pad_header_to - len(raw))
    return struct.pack("<Q", len(raw)) + raw + bytes(offset)


TINY_TENSORS = {
    "embed.weight": ("F32", [2, 3]),
    "norm.weight": ("BF16", [3]),
    "step": ("I64", []),
}


def make_llama(root: Path) -> dict[str, object]:
    """acme/llama: two commits on main, tag v1.0 on the first, branch dev, refs/pr/1."""
    repo = init_repo(root, "acme/llama")
    llama = DATA / "llama2"
    readme = (llama / "README.frontmatter.md").read_bytes() + b"\n# Llama 2\n"
    first_files: dict[str, bytes | None] = {
        "README.md": readme,
        "config.json": (llama / "config.json").read_bytes(),
        "tokenizer_config.json": (llama / "tokenizer_config.json").read_bytes(),
        "model.safetensors": safetensors_bytes(TINY_TENSORS),
        "sub/dir/notes.txt": b"notes v1\n",
    }
    first = commit(repo, first_files, "Upload model", date=T0)
    second = commit(
        repo,
        {"sub/dir/notes.txt": b"notes v2\n", "extra.txt": b"extra\n"},
        "Update notes\n\nSecond line of the message.",
        author="alice <alice@example.invalid>",
        date=T0 + timedelta(days=1),
    )
    set_ref(repo, "refs/tags/v1.0", first)
    set_ref(repo, "dev", first)
    pr = commit(
        repo, {"pr.txt": b"pr\n"}, "PR change", ref="refs/pr/1", date=T0 + timedelta(days=2)
    )
    return {"repo": repo, "first": first, "second": second, "pr": pr, "files": first_files}
