"""The tokenizer's highest token id (tokenizer_config.json / tokenizer.json) and vocab-too-small."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tracker.estimate import estimate, highest_token_id, highest_token_id_from_files

DATA = Path(__file__).parents[1] / "data"
TOKENIZERS = DATA / "estimate" / "tokenizers"


def config(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / "configs" / f"{name}.json").read_text())
    return data


def tokenizer_config(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((TOKENIZERS / f"{name}.tokenizer_config.json").read_text())
    return data


def vocab_findings(cfg: dict[str, Any], max_id: int | None) -> list[dict[str, str]]:
    report = estimate(cfg, max_token_id=max_id).to_json()
    return [f for f in report["findings"] if f["id"] == "vocab-too-small"]


def test_gemma_3_1b_tokenizer_reaches_past_its_embeddings() -> None:
    """Gemma 3 1B (text-only, vocab 262144) ships the multimodal tokenizer: <image_soft_token>
    is id 262144, one past the embedding table."""
    max_id = highest_token_id(tokenizer_config("google__gemma-3-1b-it"), None)
    assert max_id == 262144
    (f,) = vocab_findings(config("google__gemma-3-1b-it"), max_id)
    assert f["level"] == "error"
    assert f["evidence"] == "vocab_size 262144 but the tokenizer's highest token id is 262144"
    assert "262145" in f["fix"]


def test_granite_docling_tokenizer_fits() -> None:
    max_id = highest_token_id(tokenizer_config("ibm-granite__granite-docling-258M"), None)
    assert max_id == 100351
    assert vocab_findings(config("ibm-granite__granite-docling-258M"), max_id) == []


def test_tokenizer_json_vocab_forms_and_added_tokens() -> None:
    bpe = {"model": {"type": "BPE", "vocab": {"a": 0, "b": 7, "c": 3}}, "added_tokens": []}
    assert highest_token_id(None, bpe) == 7
    unigram = {"model": {"type": "Unigram", "vocab": [["a", 0.0], ["b", -1.0], ["c", -2.0]]}}
    assert highest_token_id(None, unigram) == 2
    added = {"model": {"vocab": {"a": 0}}, "added_tokens": [{"id": 0}, {"id": 41}, {"id": "x"}]}
    assert highest_token_id({"added_tokens_decoder": {"40": {}}}, added) == 41
    assert highest_token_id({"added_tokens_decoder": {"0": {}}}, None) == 0


def test_malformed_or_absent_tokenizers_give_none() -> None:
    assert highest_token_id(None, None) is None
    assert highest_token_id({"added_tokens_decoder": {"x": {}, "-3": {}}}, {"model": []}) is None
    assert highest_token_id({"added_tokens_decoder": {"1" * 40: {}}}, None) is None
    assert highest_token_id_from_files({}) is None
    files = {"tokenizer.json": b"not json", "tokenizer_config.json": b"[1, 2]"}
    assert highest_token_id_from_files(files) is None
    files["tokenizer_config.json"] = b'{"added_tokens_decoder": {"12": {}}}'
    assert highest_token_id_from_files(files) == 12


def test_no_max_token_id_no_vocab_finding() -> None:
    assert vocab_findings(config("google__gemma-3-1b-it"), None) == []
