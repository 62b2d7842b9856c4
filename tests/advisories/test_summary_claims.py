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
            "config.json's: model.embed_tokens.padding_idx: 0 → null; model.padding_idx: 0 → null "
            "(checked with transformers 5.24.0))",
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


READS = "model code reads config.json's: "


def _pad_removed(config: dict[str, object]) -> tuple[object, object]:
    """Snapshots of a revision with `config` and Llama-2's generation_config.json, and of the next
    one where config.json drops `pad_token_id`."""
    from advkit import snap

    gen = (LLAMA / "05_6fdf2e60_generation_config.json").read_bytes()
    after = {k: v for k, v in config.items() if k != "pad_token_id"}
    return (
        snap({"config.json": config, "generation_config.json": gen}),
        snap({"config.json": after, "generation_config.json": gen}, sha="1" * 40),
    )


def _classified(before: object, after: object, executor: object | None) -> object:
    from tracker.advisories.classify import classify
    from tracker.advisories.effects import Context
    from tracker.diff import diff_snapshots

    (change,) = [c for c in diff_snapshots(before, after) if c.key == "pad_token_id"]  # type: ignore[arg-type]
    return classify(change, context=Context(before, after, executor=executor))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def executor() -> object:
    from tracker.advisories.execute import Executor

    ex = Executor()
    if not ex.warm():
        pytest.skip("transformers is not importable")
    return ex


def test_what_reads_it_is_the_executed_model_and_agrees_with_transformers(executor: object) -> None:
    """Where transformers ran, the "model code reads" claim lists what of the model built
    differs; each item is checked here against Llama-2's real configs built on the meta device:
    a claim that named something the model does not hold, or values it does not have, fails."""
    import torch
    import transformers

    config = json.loads((LLAMA / "04_15c45516_config.json").read_text())
    classified = _classified(*_pad_removed(config), executor)
    summary = classified.change.summary  # type: ignore[attr-defined]
    assert classified.decided_by == "transformers 5.24.0"  # type: ignore[attr-defined]
    claim = summary[summary.index(READS) + len(READS) :]
    assert claim == (
        "model.embed_tokens.padding_idx: 0 → null; model.padding_idx: 0 → null "
        "(checked with transformers 5.24.0))"
    )
    items = claim.removesuffix(" (checked with transformers 5.24.0))").split("; ")
    models = []
    for doc in (config, {k: v for k, v in config.items() if k != "pad_token_id"}):
        cfg = transformers.LlamaConfig.from_dict({**doc, "num_hidden_layers": 1})
        with torch.device("meta"):
            models.append(transformers.LlamaForCausalLM(cfg))
    for item in items:
        path, values = item.split(": ", 1)
        shown = []
        for model in models:
            obj: object = model
            for part in path.split("."):
                obj = getattr(obj, part)
            shown.append("null" if obj is None else str(obj))
        assert " → ".join(shown) == values, item


def test_without_execution_the_hand_table_is_labelled_inferred() -> None:
    config = json.loads((LLAMA / "04_15c45516_config.json").read_text())
    classified = _classified(*_pad_removed(config), None)
    assert classified.change.summary.endswith(  # type: ignore[attr-defined]
        "model code reads config.json's: the embedding's padding_idx and the "
        "sequence-classification head (inferred))"
    )


def test_a_model_that_does_not_read_it_is_not_said_to(executor: object) -> None:
    """GPT-2's LM builds no padding index: the executed effect is the same model, and the
    summary says the model built from this config does not read the key (the hand table's
    Llama words would be false here)."""
    config = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_layer": 1,
              "n_embd": 64, "n_head": 2, "vocab_size": 32000, "pad_token_id": 0}  # fmt: skip
    classified = _classified(*_pad_removed(config), executor)
    assert classified.change.summary == (  # type: ignore[attr-defined]
        "pad_token_id removed in config.json: 0 → null (unchanged for generate(): 0 from "
        "generation_config.json; the model transformers builds from this config does not read "
        "it (checked with transformers 5.24.0))"
    )
