"""Every "shadowed"/"unchanged" claim of the demo's advisories agrees with what transformers 5.24.0
does (issue 24, "true explanations only"). The demo's records are its golden export
(tests/demo/golden, regenerated from the demo cycle); Llama-2-7b-hf's real configs are its history
in ../shared/corpus/histories."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
from labelkit import CORPUS

GOLDEN = Path(__file__).resolve().parents[1] / "demo" / "golden"
LLAMA = CORPUS / "meta-llama__Llama-2-7b-hf"


def _records() -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted(GOLDEN.glob("x_TRACKER-*.json"))]


def test_no_demo_advisory_calls_a_change_shadowed() -> None:
    records = _records()
    assert len(records) == 50
    for record in records:
        db = record["database_specific"]
        assert isinstance(db, dict)
        texts = [str(record["summary"])] + [str(c["summary"]) for c in db["changes"]]
        assert not [t for t in texts if "shadowed" in t], record["id"]


def test_the_unchanged_claims_are_what_transformers_does() -> None:
    """The one "unchanged for" claim left (x_TRACKER-2026-9, Llama-2's `pad_token_id` removed from
    config.json at 87a34353) is scoped to generate(), and names what model code reads."""
    claims = [
        (r["id"], str(r["summary"]))
        for r in _records()
        if "unchanged for" in str(r["summary"])
    ]  # fmt: skip
    assert claims == [
        (
            "x_TRACKER-2026-9",
            "meta-llama/Llama-2-7b-hf: special tokens: pad_token_id removed in config.json: "
            "0 → null (unchanged for generate(): 0 from generation_config.json; model code reads "
            "config.json's: the embedding's padding_idx and the sequence-classification head)",
        )
    ]
    transformers = pytest.importorskip("transformers")
    import torch

    before = json.loads((LLAMA / "04_15c45516_config.json").read_text())
    after = json.loads((LLAMA / "05_87a34353_config.json").read_text())
    assert before["pad_token_id"] == 0 and "pad_token_id" not in after
    # generate(): generation_config.json governs, and its pad_token_id is 0 at both revisions
    generation = json.loads((LLAMA / "05_6fdf2e60_generation_config.json").read_text())
    assert transformers.GenerationConfig.from_dict(generation).pad_token_id == 0
    # model code reads config.json's: the embedding's padding_idx ...
    paddings = []
    for doc in (before, after):
        config = transformers.LlamaConfig.from_dict({**doc, "num_hidden_layers": 1})
        with torch.device("meta"):
            model = transformers.LlamaForCausalLM(config)
        paddings.append(model.model.embed_tokens.padding_idx)
    assert paddings == [0, None]
    # ... and the sequence-classification head finds each row's last token by config's
    # pad_token_id, and refuses batches without one
    source = inspect.getsource(transformers.LlamaForSequenceClassification.forward)
    assert "if self.config.get_text_config().pad_token_id is None and batch_size != 1:" in source
    assert "(input_ids != self.config.get_text_config().pad_token_id)" in source
