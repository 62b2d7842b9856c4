"""The executed-effects cache (`tracker.advisories.execute.EffectCache`): an effect is answered
from disk exactly as transformers answered it, without importing transformers; a miss in
`cache_only` mode is `EffectMiss`, which no `except Exception` swallows; nothing an overrun or a
memory limit shaped is written; the key holds every input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracker.advisories import execute
from tracker.advisories.effects import Executed
from tracker.advisories.execute import EffectCache, EffectMiss, Executor

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"
LLAMA = json.loads((CONFIGS / "meta-llama__Llama-2-7b-hf.json").read_text())


def test_an_executed_effect_is_answered_from_the_cache_without_transformers(
    tmp_path: Path,
) -> None:
    cache = EffectCache(tmp_path / "effects")
    ran = Executor(cache)
    changed = {**LLAMA, "hidden_act": "gelu"}
    measured = ran.config_effect(LLAMA, changed, "hidden_act", ("F16", "F16"))
    gen = ran.generation_effect((LLAMA, None), ({**LLAMA, "eos_token_id": 7}, None), "eos_token_id")
    assert measured is not None and measured.kind == "model"
    assert gen is not None and gen.kind == "generation-ids"
    assert len(list((tmp_path / "effects").rglob("*.json"))) == 2

    reader = Executor(EffectCache(tmp_path / "effects"))
    reader.cache_only = True
    again = reader.config_effect(LLAMA, changed, "hidden_act", ("F16", "F16"))
    assert again == measured
    assert (
        reader.generation_effect(
            (LLAMA, None), ({**LLAMA, "eos_token_id": 7}, None), "eos_token_id"
        )
        == gen
    )
    assert not reader.warmed and reader.cache is not None and reader.cache.hits == 2
    # any input differing is another key: a miss, which imports nothing in cache_only mode
    for args in (
        (LLAMA, {**LLAMA, "hidden_act": "relu"}, "hidden_act", ("F16", "F16")),
        (LLAMA, changed, "hidden_act", ("BF16", "F16")),
        ({**LLAMA, "vocab_size": 32001}, changed, "hidden_act", ("F16", "F16")),
    ):
        with pytest.raises(EffectMiss):
            reader.config_effect(*args)  # type: ignore[arg-type]
    assert not reader.warmed
    assert not issubclass(EffectMiss, Exception)


def test_a_damaged_entry_is_a_miss_and_the_effect_is_executed_again(tmp_path: Path) -> None:
    cache = EffectCache(tmp_path / "effects")
    ran = Executor(cache)
    changed = {**LLAMA, "eos_token_id": 9}
    first = ran.generation_effect((LLAMA, None), (changed, None), "eos_token_id")
    [entry] = (tmp_path / "effects").rglob("*.json")
    entry.write_text('{"kind": "same"')  # cut short
    reader = Executor(EffectCache(tmp_path / "effects"))
    reader.cache_only = True
    with pytest.raises(EffectMiss):
        reader.generation_effect((LLAMA, None), (changed, None), "eos_token_id")
    assert (
        Executor(cache).generation_effect((LLAMA, None), (changed, None), "eos_token_id") == first
    )


def test_what_an_overrun_or_a_memory_limit_shaped_is_not_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran = Executor(EffectCache(tmp_path / "effects"))
    assert ran.warm()
    monkeypatch.setattr(execute, "BUILD_LIMIT_S", 1e-6)
    got = ran.config_effect(LLAMA, {**LLAMA, "hidden_act": "gelu"}, "hidden_act", (None, None))
    assert got is None  # given up: the inferred rules decide
    assert not list((tmp_path / "effects").rglob("*.json"))
    monkeypatch.undo()

    def limited() -> Executed:
        return Executed("model", "LlamaForCausalLM cannot be built from it (MemoryError: )", "5")

    assert ran._cached("config", ["memory"], limited) is not None
    assert not list((tmp_path / "effects").rglob("*.json"))
    # without transformers (not importable here) nothing is written either
    blind = Executor(EffectCache(tmp_path / "effects"))
    blind._failed = True
    assert (
        blind.config_effect(LLAMA, {**LLAMA, "hidden_act": "gelu"}, "hidden_act", (None, None))
        is None
    )
    assert not list((tmp_path / "effects").rglob("*.json"))


def test_the_key_holds_the_installed_libraries_and_trackers_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = EffectCache(tmp_path)
    key = cache.key("config", [LLAMA, LLAMA, "x", (None, None)])
    assert key == EffectCache(tmp_path / "other").key("config", [LLAMA, LLAMA, "x", (None, None)])
    assert key != cache.key("generation", [LLAMA, LLAMA, "x", (None, None)])
    assert cache.key("tokenizer", [{"a": b"1"}, {"a": b"2"}, "k"]) != cache.key(
        "tokenizer", [{"a": b"1"}, {"a": b"3"}, "k"]
    )
    execute._salt.cache_clear()
    real = execute.importlib.metadata.version

    def other(dist: str) -> str:
        return "0.0.0" if dist == "transformers" else real(dist)

    monkeypatch.setattr(execute.importlib.metadata, "version", other)
    try:
        assert cache.key("config", [LLAMA, LLAMA, "x", (None, None)]) != key
    finally:
        monkeypatch.undo()
        execute._salt.cache_clear()
    assert cache.key("config", [LLAMA, LLAMA, "x", (None, None)]) == key
