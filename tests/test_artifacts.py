"""tracker.shared.artifacts: the one table of tracked files, their fetch modes and size caps."""

from __future__ import annotations

import pytest

from tracker.settings import load_settings
from tracker.shared.artifacts import (
    AUTO_MAP_FILES,
    DEFAULT_TRACKED,
    FILE_RULES,
    Fetch,
    Limits,
    fetch_mode,
    is_pickle,
    rule_for,
)
from tracker.shared.domain import Artifact


def test_default_tracked_list_is_the_readmes() -> None:
    assert DEFAULT_TRACKED == (
        "config.json",
        "generation_config.json",
        "tokenizer_config.json",
        "tokenizer.json",
        "special_tokens_map.json",
        "chat_template.jinja",
        "chat_template.json",
        "additional_chat_templates/*",
        "model.safetensors.index.json",
        "pytorch_model.bin.index.json",
        "*.safetensors",
        "*.gguf",
        "README.md",
        "preprocessor_config.json",
        "processor_config.json",
        "feature_extractor_config.json",
        "video_preprocessor_config.json",
        "*.bin",
        "*.pt",
        "*.pth",
        "*.pkl",
        "*.pickle",
        "*.ckpt",
    )
    assert AUTO_MAP_FILES == (
        "config.json",
        "tokenizer_config.json",
        "preprocessor_config.json",
        "processor_config.json",
    )
    assert all(rule_for(name) is not None for name in AUTO_MAP_FILES)


@pytest.mark.parametrize(
    ("path", "artifact", "fetch"),
    [
        ("config.json", Artifact.CONFIG, Fetch.CONTENT),
        ("special_tokens_map.json", Artifact.TOKENIZER, Fetch.CONTENT),
        ("additional_chat_templates/tool_use.jinja", Artifact.CHAT_TEMPLATE, Fetch.CONTENT),
        ("pytorch_model.bin.index.json", Artifact.WEIGHTS, Fetch.CONTENT),
        ("model-00001-of-00002.safetensors", Artifact.WEIGHTS, Fetch.HEADER),
        ("sub/model.safetensors", Artifact.WEIGHTS, Fetch.HEADER),
        ("Llama-2-7B-Q4_K_M.gguf", Artifact.WEIGHTS, Fetch.GGUF),
        ("q/model-00002-of-00003.gguf", Artifact.WEIGHTS, Fetch.GGUF),
        ("modeling_x.py", Artifact.CUSTOM_CODE, Fetch.CONTENT),
        ("pytorch_model.bin", Artifact.EXECUTABLE, Fetch.IDENTITY),
        ("extra/state.pickle", Artifact.EXECUTABLE, Fetch.IDENTITY),
        ("OPTIM.PT", Artifact.EXECUTABLE, Fetch.IDENTITY),
        ("README.md", Artifact.MODEL_CARD, Fetch.CONTENT),
    ],
)
def test_each_file_has_one_rule(path: str, artifact: Artifact, fetch: Fetch) -> None:
    rule = rule_for(path)
    assert rule is not None and (rule.artifact, rule.fetch) == (artifact, fetch)
    assert fetch_mode(path) is fetch
    assert is_pickle(path) is (fetch is Fetch.IDENTITY)


def test_unknown_files_are_read_as_content_and_no_pattern_is_listed_twice() -> None:
    assert rule_for("notes.txt") is None and fetch_mode("notes.txt") is Fetch.CONTENT
    patterns = [p for r in FILE_RULES for p in r.patterns]
    assert len(patterns) == len(set(patterns))


def test_size_caps_come_from_the_settings() -> None:
    assert Limits().cap(Fetch.CONTENT) == 64_000_000
    assert Limits().cap(Fetch.HEADER) == 100_000_000
    assert Limits().cap(Fetch.IDENTITY) == 0
    settings = load_settings(max_file_bytes=1000, max_safetensors_header_bytes=2000)
    assert settings.limits == Limits(1000, 2000)
    assert load_settings().limits == Limits()
