"""Special tokens resolved as transformers 5.24.0 resolves them (issue 24, part 2): the token files'
precedence checked against `AutoTokenizer` built from local directories, and what the summary of
an id change that generation does not see may claim.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from diffkit import make_snapshot

from tracker.diff import diff_snapshots
from tracker.diff.special_tokens import effective_special_tokens
from tracker.shared.domain import ChangeKind

_VOCAB = {"<unk>": 0, "<s>": 1, "</s>": 2, "<pad>": 3, "hello": 4}
_DECODER = {
    "3": {
        "content": "<pad>",
        "special": True,
        "lstrip": False,
        "rstrip": False,
        "normalized": False,
        "single_word": False,
    }
}
_CONFIG: dict[str, Any] = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "</s>"}
CASES: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = [
    ("map sets, config null", {**_CONFIG, "pad_token": None}, {"pad_token": "<unk>"}),
    ("map silent, config null", {**_CONFIG, "pad_token": None}, {}),
    ("no map, config null", {**_CONFIG, "pad_token": None}, None),
    ("map overrides config", {**_CONFIG, "pad_token": "<pad>"}, {"pad_token": "<unk>"}),
    ("map null overrides config", {**_CONFIG, "pad_token": "<pad>"}, {"pad_token": None}),
    ("map silent, config sets", {**_CONFIG, "pad_token": "<pad>"}, {}),
    (
        "added_tokens_decoder: map not read",
        {**_CONFIG, "pad_token": None, "added_tokens_decoder": _DECODER},
        {"pad_token": "<unk>"},
    ),
]


def _files(config: dict[str, Any], tokens_map: dict[str, Any] | None) -> dict[str, bytes]:
    files = {"tokenizer_config.json": json.dumps(config).encode()}
    if tokens_map is not None:
        files["special_tokens_map.json"] = json.dumps(tokens_map).encode()
    return files


@pytest.mark.parametrize(("name", "config", "tokens_map"), CASES, ids=[c[0] for c in CASES])
def test_pad_token_is_what_auto_tokenizer_builds(
    name: str, config: dict[str, Any], tokens_map: dict[str, Any] | None, tmp_path: Path
) -> None:
    transformers = pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(_VOCAB, unk_token="<unk>"))
    tok.save(str(tmp_path / "tokenizer.json"))
    for path, data in _files(config, tokens_map).items():
        (tmp_path / path).write_bytes(data)
    built = transformers.AutoTokenizer.from_pretrained(tmp_path)
    ours = effective_special_tokens(make_snapshot(_files(config, tokens_map)))
    assert ours.get("pad_token") == built.pad_token, name
    assert ours.get("eos_token") == built.eos_token, name


def test_pad_token_removed_from_the_map_really_disappears() -> None:
    """The demo's Llama-2 step "Upload tokenizer": special_tokens_map.json drops `pad_token`
    ("<unk>") while tokenizer_config.json says null: the tokenizer's pad token is gone (it was
    reported as "shadowed … unchanged")."""
    before = make_snapshot(_files({**_CONFIG, "pad_token": None}, {"pad_token": "<unk>"}))
    after = make_snapshot(_files({**_CONFIG, "pad_token": None}, {}), sha="1" * 40)
    changes = [c for c in diff_snapshots(before, after) if c.key == "pad_token"]
    assert [(c.kind, c.file, c.before, c.after) for c in changes] == [
        (ChangeKind.CHANGED, "special_tokens_map.json", "<unk>", None)
    ]
    assert "shadowed" not in changes[0].summary
    assert "unchanged" not in changes[0].summary


def test_a_map_not_read_is_said_so() -> None:
    config = {**_CONFIG, "pad_token": "<pad>", "added_tokens_decoder": _DECODER}
    before = make_snapshot(_files(config, {"pad_token": "<unk>"}))
    after = make_snapshot(_files(config, {}), sha="1" * 40)
    (change,) = [c for c in diff_snapshots(before, after) if c.key == "pad_token"]
    assert change.summary == (
        'pad_token removed in special_tokens_map.json: "<unk>" → null (not read: '
        "tokenizer_config.json has `added_tokens_decoder`, so transformers does not read "
        'special_tokens_map.json; the tokenizer\'s value stays "<pad>" from tokenizer_config.json)'
    )


def test_config_pad_token_id_under_generation_config_is_not_called_unchanged_for_the_model() -> (
    None
):
    """config.json drops `pad_token_id` while generation_config.json sets 0: only generation is
    unaffected; the embedding's padding index and the classification head read config.json."""
    gen = json.dumps({"pad_token_id": 0}).encode()
    before = make_snapshot(
        {"config.json": json.dumps({"pad_token_id": 0}).encode(), "generation_config.json": gen}
    )
    after = make_snapshot({"config.json": b"{}", "generation_config.json": gen}, sha="1" * 40)
    (change,) = [c for c in diff_snapshots(before, after) if c.key == "pad_token_id"]
    assert change.summary == (
        "pad_token_id removed in config.json: 0 → null (unchanged for generate(): 0 from "
        "generation_config.json; model code reads config.json's: the embedding's padding_idx and "
        "the sequence-classification head (inferred))"
    )
    assert "shadowed" not in change.summary
