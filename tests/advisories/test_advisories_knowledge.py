"""transformers' own knowledge: the checked-in table is what the pinned transformers says, and the
classification reads it without transformers."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import textwrap

import pytest

from tracker.advisories.knowledge import PINNED, load
from tracker.advisories.knowledge_gen import table_path


def test_the_pinned_version_is_the_installed_oracle_and_its_table_is_checked_in() -> None:
    assert importlib.metadata.version("transformers") == PINNED == "5.24.0"
    assert table_path(PINNED).is_file()
    assert load() is load(PINNED)  # read once per version


@pytest.mark.slow
def test_regenerating_the_table_from_the_installed_transformers_gives_the_same_table() -> None:
    # a fresh interpreter: the generator makes torch unimportable and fails if it got imported
    done = subprocess.run(
        [sys.executable, "-m", "tracker.advisories.knowledge_gen", "--check"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "transformers-5.24.0.json matches transformers 5.24.0"


def test_the_table_holds_what_transformers_declares() -> None:
    k = load()
    assert len(k.classes) == 822
    t5 = k.classes["t5"]
    assert t5.name == "T5Config"
    assert dict(t5.attribute_map) == {
        "head_dim": "d_kv",
        "hidden_size": "d_model",
        "num_attention_heads": "num_heads",
        "num_hidden_layers": "num_layers",
    }
    assert t5.default("feed_forward_proj") == "relu"
    assert t5.default("num_attention_heads") == 8  # through the alias: T5's num_heads
    assert "tie_word_embeddings" in t5.reads  # taken from kwargs, read as scale_decoder_outputs
    assert k.classes["mixtral"].default("sliding_window") is None
    assert k.generation_defaults["num_beams"] == 1
    assert {"num_beams", "max_length", "forced_bos_token_id"} <= k.generation_fields
    llava = k.class_at(
        {"model_type": "llava", "text_config": {"model_type": "llama"}}, ("text_config",)
    )
    assert llava is not None and llava.name == "LlamaConfig"
    assert k.class_at({"model_type": "llama", "auto_map": {"AutoConfig": "x.Y"}}, ()) is None


def test_an_unknown_version_has_no_table() -> None:
    with pytest.raises(FileNotFoundError):
        load("0.0.1")


def test_classification_works_without_transformers_installed() -> None:
    code = textwrap.dedent(
        """
        import sys
        sys.modules["transformers"] = None  # not installed
        from tracker.advisories.classify import classify
        from tracker.shared.domain import Artifact, Change, ChangeKind
        got = classify(Change(Artifact.CONFIG, ChangeKind.CHANGED, "config.json", "n_layer", 48, 24, ""))
        print(got.severity.value, got.rule)
        assert "transformers" not in [m.split(".")[0] for m in sys.modules if sys.modules[m]]
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["high", "architecture:num_hidden_layers"]


def test_key_value_heads_are_never_called_another_name_of_attention_heads() -> None:
    """The union of attribute maps joins `num_key_value_heads` (Whisper's alias of
    `encoder_attention_heads`) with `num_attention_heads` (BART's); Llama holds both, so no text
    may call one "another name of" the other (issue 24, part 2)."""
    from tracker.advisories.classify import classify
    from tracker.shared.domain import Artifact, Change, ChangeKind

    knowledge = load()
    assert "num_attention_heads" in knowledge.names_of("num_key_value_heads")  # rules still match
    assert not knowledge.same_fact("num_key_value_heads", "num_attention_heads")
    assert knowledge.held_apart("num_key_value_heads", "num_attention_heads") == "LlamaConfig"
    assert knowledge.same_fact("n_head", "num_attention_heads")  # GPT-2's: one fact
    change = Change(
        Artifact.CONFIG, ChangeKind.CHANGED, "config.json", "num_key_value_heads", 8, 4, "x"
    )
    rationale = classify(change).rationale
    assert "another name of" not in rationale
    assert rationale.endswith(
        "the rule for `num_attention_heads` applies because some transformers config classes map "
        "`num_key_value_heads` onto it; they are not one fact in every class; LlamaConfig holds "
        "both as different attributes"
    )
    gpt2 = Change(Artifact.CONFIG, ChangeKind.CHANGED, "config.json", "n_head", 12, 16, "x")
    assert classify(gpt2).rationale.endswith(
        "`n_head` is another name of `num_attention_heads` in transformers' config classes"
    )
