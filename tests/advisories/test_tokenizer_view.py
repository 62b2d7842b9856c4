"""The pure tokenizer reader against the oracle: transformers 5.24.0's `AutoTokenizer` built from the
same files in a local directory. The files are meta-llama/Llama-2-7b-hf's real tokenizer.json,
tokenizer_config.json and special_tokens_map.json (../shared/corpus), each variant one edit of them
that a repo has made or could make (a special token renamed in one file, ids swapped, tokens
added out of order, an `added_tokens_decoder` that disagrees)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.diff.diffkit import make_snapshot
from tracker.advisories.tokenizer_view import ROLES, read_tokenizer

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
MODEL = CORPUS / "models" / "meta-llama__Llama-2-7b-hf"
TOKENIZER = CORPUS / "pairs" / "meta-llama__Llama-2-7b-hf" / "rev-e469318" / "tokenizer.json"
FILES = ("tokenizer_config.json", "special_tokens_map.json")

Edit = Callable[[dict[str, Any]], None]


def _files(**edits: Edit | None) -> dict[str, bytes]:
    """Llama-2's tokenizer files, each edited by `edits[<file stem>]` (None: the file removed)."""
    out: dict[str, bytes] = {}
    for name, path in [*((f, MODEL / f) for f in FILES), ("tokenizer.json", TOKENIZER)]:
        stem = name.removesuffix(".json")
        if stem in edits and edits[stem] is None:
            continue
        doc = json.loads(path.read_bytes())
        edit = edits.get(stem)
        if edit is not None:
            edit(doc)
        out[name] = json.dumps(doc).encode()
    return out


def _added(*tokens: tuple[int, str]) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        template = doc["added_tokens"][2]
        doc["added_tokens"] += [dict(template, id=i, content=t) for i, t in tokens]

    return edit


def _swap_added(a: int, b: int) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        doc["added_tokens"][a]["id"], doc["added_tokens"][b]["id"] = (
            doc["added_tokens"][b]["id"],
            doc["added_tokens"][a]["id"],
        )

    return edit


def _both(*edits: Edit) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        for e in edits:
            e(doc)

    return edit


def _swap_vocab(x: str, y: str) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        v = doc["model"]["vocab"]
        v[x], v[y] = v[y], v[x]

    return edit


def _set(key: str, value: object) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        if value is None:
            doc.pop(key, None)
        else:
            doc[key] = value

    return edit


def _decoder(entries: dict[int, str]) -> Edit:
    return _set(
        "added_tokens_decoder",
        {str(i): {"content": t, "special": True} for i, t in entries.items()},
    )


IM = ((32000, "<|im_start|>"), (32001, "<|im_end|>"))
VARIANTS: dict[str, dict[str, Edit | None]] = {
    "as published": {},
    "eos renamed in special_tokens_map.json": {"special_tokens_map": _set("eos_token", "<unk>")},
    "eos renamed in tokenizer_config.json only": {"tokenizer_config": _set("eos_token", "<unk>")},
    "eos only in tokenizer_config.json": {
        "tokenizer_config": _set("eos_token", "<unk>"),
        "special_tokens_map": _set("eos_token", None),
    },
    "eos a token the vocabulary lacks": {"special_tokens_map": _set("eos_token", "<|im_end|>")},
    "ids of <s> and </s> swapped in added_tokens": {"tokenizer": _swap_added(1, 2)},
    "ids of <s> and </s> swapped everywhere": {
        "tokenizer": _both(_swap_added(1, 2), _swap_vocab("<s>", "</s>"))
    },
    "tokens added": {"tokenizer": _added(*IM)},
    "added tokens' ids swapped": {"tokenizer": _both(_added(*IM), _swap_added(3, 4))},
    "added tokens with a gap": {"tokenizer": _added((32005, "<|a|>"), (32003, "<|b|>"))},
    "decoder overrides added_tokens": {
        "tokenizer": _both(_added(*IM), _swap_added(3, 4)),
        "tokenizer_config": _both(
            _decoder({0: "<unk>", 1: "<s>", 2: "</s>", **dict(IM)}), _set("eos_token", "<|im_end|>")
        ),
        "special_tokens_map": _set("eos_token", "<s>"),  # not read beside a decoder
    },
    "decoder swaps vocabulary tokens": {
        "tokenizer_config": _decoder({0: "<unk>", 1: "</s>", 2: "<s>"})
    },
    "pad named": {"special_tokens_map": _set("pad_token", "<unk>")},
    "no special_tokens_map.json": {"special_tokens_map": None},
}


def _oracle(tmp_path: Path, files: dict[str, bytes]) -> tuple[dict[str, tuple[str, int]], int]:
    from transformers import AutoTokenizer

    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    tok = AutoTokenizer.from_pretrained(str(tmp_path))
    special = {
        role: (str(getattr(tok, f"{role}_token")), int(getattr(tok, f"{role}_token_id")))
        for role in ROLES
        if getattr(tok, f"{role}_token") is not None
    }
    return special, len(tok)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_reader_agrees_with_autotokenizer(variant: str, tmp_path: Path) -> None:
    files = _files(**VARIANTS[variant])
    view = read_tokenizer(make_snapshot(files))
    assert view is not None and view.complete
    special, size = _oracle(tmp_path, files)
    assert {r: view.special_id(r) for r in view.special} == special
    assert view.size == size
    # every id the oracle gives a special or added token is the one read here
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tmp_path))
    for token in ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>", "<|a|>", "<|b|>"]:
        want = tok.convert_tokens_to_ids(token)
        got = view.id_of(token)
        assert got == (want if want != tok.unk_token_id or token == "<unk>" else None), token
