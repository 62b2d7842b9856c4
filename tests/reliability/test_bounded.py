"""tracker.shared.bounded: JSON and YAML are refused, with one line, before a hostile shape is built."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracker.shared.bounded import (
    DOCUMENT,
    FRONT_MATTER,
    LARGE_DOCUMENT,
    Bounds,
    BoundsError,
    bounds_for,
    json_depth,
    load_json,
    load_yaml,
)
from tracker.shared.errors import UnreadableArtifactError

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"
TOKENIZER = CORPUS / "pairs/mistralai__Mistral-7B-Instruct-v0.3/rev-main-83e9aa1/tokenizer.json"


def billion_laughs(levels: int = 9) -> str:
    """The classic alias bomb: 9 levels of 9 references expand to 9**9 (387M) strings."""
    doc = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    prev = "a"
    for name in "bcdefghijk"[: levels - 1]:
        doc += f"{name}: &{name} [" + ",".join(["*" + prev] * 9) + "]\n"
        prev = name
    return doc


def test_real_files_load_as_json_loads_does() -> None:
    data = TOKENIZER.read_bytes()
    assert load_json(data, "tokenizer.json", LARGE_DOCUMENT) == json.loads(data)
    config = (CORPUS / "models" / "google__gemma-3-1b-it" / "tokenizer_config.json").read_bytes()
    assert load_json(config, "tokenizer_config.json") == json.loads(config)
    assert load_json(b"\xef\xbb\xbf{}", "x") == {}  # a UTF-8 BOM is accepted


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"[" * 900 + b"]" * 900, "JSON nested deeper than 64 levels"),
        (b'{"a": ' * 65 + b"1" + b"}" * 65, "JSON nested deeper than 64 levels"),
        (
            b"[" + b"[]," * 600_000 + b"[]]",
            "about 1,200,003 JSON values, over the bound of 500,000",
        ),
        (b"[1e400]", "number 1e400 is out of range"),
        (b"[-1e999]", "number -1e999 is out of range"),
        (b"[NaN]", "non-standard JSON constant NaN"),
        (b'{"a": Infinity}', "non-standard JSON constant Infinity"),
        (b'["\\ud800"]', "string holds a lone UTF-16 surrogate escape"),
        (b'{"\\udfff": 1}', "string holds a lone UTF-16 surrogate escape"),
        (b"[" + b"9" * 5000 + b"]", "Exceeds the limit (4300 digits) for integer string"),
        (b'{"a": "\xff"}', "not UTF-8 text (invalid start byte at byte 7)"),
        (b'{"a": 1', "Expecting ',' delimiter: line 1 column 8 (char 7)"),
    ],
)
def test_hostile_json_is_one_line_reason(data: bytes, why: str) -> None:
    with pytest.raises(BoundsError) as info:
        load_json(data, "config.json")
    assert str(info.value).startswith(f"could not read config.json: {why}")
    assert "\n" not in str(info.value)
    assert isinstance(info.value, UnreadableArtifactError)


def test_size_bound_comes_before_parsing() -> None:
    with pytest.raises(BoundsError, match=r"^could not read c: 101 bytes, over 100$"):
        load_json(b" " * 100 + b"1", "c", Bounds(max_bytes=100))


def test_depth_ignores_brackets_in_strings_and_reports_the_true_depth() -> None:
    assert json_depth(b'{"a": "[[[[[[", "b": [1, {"c": "}}}"}]}', 10) == 3
    assert json_depth(b'["\\"[[[", 2]', 10) == 1
    assert json_depth(b"[" * 100 + b"]" * 100, 10) == 11  # stops one past the limit
    assert json_depth(b'{"a": [1, 2', 10) == 0  # unbalanced: left to json.loads to report
    assert json_depth(b"[{}][[{}]]", 10) == 3
    assert load_json(b"[" * 64 + b"]" * 64, "x") == json.loads(b"[" * 64 + b"]" * 64)


def test_surrogate_pairs_are_text_and_lone_ones_are_not() -> None:
    assert load_json(b'["\\ud83d\\ude00"]', "x") == ["\U0001f600"]


def test_bounds_per_file_kind() -> None:
    assert bounds_for("tokenizer.json") is LARGE_DOCUMENT
    assert bounds_for("sub/model.safetensors.index.json") is LARGE_DOCUMENT
    assert bounds_for("pytorch_model.bin.index.json") is LARGE_DOCUMENT
    assert bounds_for("config.json") is DOCUMENT
    assert bounds_for("tokenizer_config.json") is DOCUMENT


def test_yaml_alias_bomb_is_refused_without_expanding_it() -> None:
    with pytest.raises(BoundsError) as info:
        load_yaml(billion_laughs(), "README.md", FRONT_MATTER)
    assert str(info.value) == (
        "could not read README.md: YAML aliases expand to more than 50,000 values"
    )


def test_yaml_aliases_within_bounds_expand_as_safe_load_does() -> None:
    doc = "base: &b {lr: 0.1, steps: 3}\nrun1: *b\nruns: [*b, *b]\n"
    assert load_yaml(doc, "x") == {
        "base": {"lr": 0.1, "steps": 3},
        "run1": {"lr": 0.1, "steps": 3},
        "runs": [{"lr": 0.1, "steps": 3}, {"lr": 0.1, "steps": 3}],
    }


@pytest.mark.parametrize(
    ("doc", "why"),
    [
        ("a: &x [*x]\n", "YAML is nested deeper than 32 levels"),
        ("- " * 40 + "1\n", "YAML is nested deeper than 32 levels"),
        ("[" * 2000, "malformed YAML (line 1): while increasing flow level exceeded maximum"),
        ("a: 1\n---\nb: 2\n", "malformed YAML (line 1): expected a single document"),
        ("a: !!python/object:os.system x\n", "malformed YAML (line 1): could not determine"),
        ("a: [1\n", "malformed YAML (line 1): while parsing a flow sequence"),
    ],
)
def test_hostile_yaml_is_one_line_reason(doc: str, why: str) -> None:
    with pytest.raises(BoundsError) as info:
        load_yaml(doc, "w.yaml", FRONT_MATTER)
    assert str(info.value).startswith(f"could not read w.yaml: {why}")
    assert "\n" not in str(info.value)


def test_yaml_size_bound() -> None:
    with pytest.raises(BoundsError, match=r"^could not read w: 11 characters, over 10$"):
        load_yaml("a: 12345678", "w", Bounds(max_bytes=10))
