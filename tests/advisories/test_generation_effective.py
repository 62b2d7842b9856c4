"""The effective generation defaults tracker computes (`tracker.advisories.generation`) are what
transformers 5.24.0 builds: `GenerationConfig.from_pretrained` on generation_config.json when it
can be read, else `from_model_config` on config.json (decoder sub-config included), global
defaults for unset fields."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from advkit import snap

from tracker.advisories.generation import effective_generation
from tracker.advisories.knowledge import load

transformers = pytest.importorskip("transformers")

CASES: list[tuple[str, dict[str, bytes]]] = [
    (
        "generation_config.json governs",
        {
            "config.json": json.dumps({"temperature": 0.2, "max_length": 99}).encode(),
            "generation_config.json": json.dumps({"do_sample": True, "top_p": 0.9}).encode(),
        },
    ),
    (
        "config.json when there is none",
        {"config.json": json.dumps({"temperature": 0.2, "max_length": 99, "top_k": None}).encode()},
    ),
    (
        "unreadable generation_config.json: config.json",
        {
            "config.json": json.dumps({"num_beams": 4}).encode(),
            "generation_config.json": b"{not json",
        },
    ),
    (
        "decoder sub-config fills what the top level leaves unset",
        {
            "config.json": json.dumps(
                {"max_length": 50, "text_config": {"max_length": 7, "do_sample": True}}
            ).encode()
        },
    ),
]


def _transformers(files: dict[str, bytes], tmp: Path) -> Any:
    gc = transformers.GenerationConfig
    data = files.get("generation_config.json")
    try:
        if data is not None:
            json.loads(data)
            (tmp / "generation_config.json").write_bytes(data)
            return gc.from_pretrained(tmp)
    except ValueError:
        pass
    return gc.from_model_config(json.loads(files["config.json"]))


@pytest.mark.parametrize(("name", "files"), CASES, ids=[c[0] for c in CASES])
def test_effective_generation_is_what_transformers_builds(
    name: str, files: dict[str, bytes], tmp_path: Path
) -> None:
    ours = effective_generation(snap(dict(files)), load())
    assert ours is not None
    built = _transformers(files, tmp_path)
    defaults = transformers.GenerationConfig._get_default_generation_params()
    for field in ("do_sample", "temperature", "top_p", "top_k", "max_length", "num_beams"):
        value = getattr(built, field)
        assert ours[field] == (defaults.get(field) if value is None else value), (name, field)
