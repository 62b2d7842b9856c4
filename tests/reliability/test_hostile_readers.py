"""Every reader of upstream data, fed hostile bytes: only typed errors escape, memory stays
proportional to the input, and whatever the differs report can be stored and printed.

Readers (the functions the diff and estimate stages parse upstream files with) and the bound each
must keep, peak bytes traced by tracemalloc while it runs on an input of n bytes:

| reader | bound |
|---|---|
| JSON files (config, generation config, tokenizer_config, special tokens map, chat_template.json, indexes) | 40·n + 4 MiB |
| tokenizer.json summary | 40·n + 4 MiB |
| safetensors header (prefix + JSON) | 40·n + 4 MiB |
| model card front matter (YAML) | 200·n + 4 MiB, and never more than 64 MiB |
| the estimate's config reading | 40·n + 4 MiB |
| chat template render (compile + the canonical conversations, in the sandbox) | 100·n + 64 MiB |
| preflight: auto_map scan, index metadata.total_size, index weight_map names | 40·n + 4 MiB |
| preflight: remote code AST parse (the module auto_map names) | 400·n + 4 MiB |

The Hub API answers (refs, commits, tree) are in test_hostile_watchlist_and_hub.py.

The long form (inputs at the size caps) is `make bench` (bench/reliability.py, bench/RESULTS.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from diffkit import make_snapshot
from hostile import MODELS, REAL, REAL_HEADER, hostile, peak_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracker.diff import diff_snapshots
from tracker.diff._common import load_json_object
from tracker.diff.card import parse_card
from tracker.diff.conversations import CONVERSATIONS, template_variables
from tracker.diff.sandbox import render_in_process
from tracker.diff.tokenizer import summarise_tokenizer
from tracker.diff.weights import diff_weights
from tracker.estimate import EstimateSettings, estimate, parse_config
from tracker.estimate.checkpoint import index_total_size as _total_size
from tracker.preflight import imports as preflight_imports
from tracker.preflight.census_lora import tensor_names
from tracker.shared.domain import ChangeKind
from tracker.shared.errors import TrackerError
from tracker.sources.safetensors import parse_file_prefix

MiB = 1024 * 1024
HEADER_CAP = 100_000_000


def _estimate(data: bytes) -> object:
    return estimate(parse_config(data), None, EstimateSettings())


def _render(data: bytes) -> object:
    special = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}
    variables = [template_variables(conv, special) for conv in CONVERSATIONS]
    results = render_in_process(data.decode("utf-8", "replace"), variables)
    assert len(results) == len(CONVERSATIONS)
    return results


DEEPSEEK_CONFIG = (MODELS / "deepseek-ai__DeepSeek-V3" / "config.json").read_bytes()
"""Its auto_map names modeling_deepseek.py."""
INDEX = "model.safetensors.index.json"


def _remote_code(data: bytes) -> object:
    preflight_imports.read_module.cache_clear()  # a cached tree would hide the parse's memory
    files = {"config.json": DEEPSEEK_CONFIG, "modeling_deepseek.py": data}
    seen, absent, broken = preflight_imports.remote_code_modules(files)
    assert "modeling_deepseek.py" in seen + broken, (seen, absent, broken)
    return seen


READERS: dict[str, tuple[str, Callable[[bytes], object], Callable[[int], int]]] = {
    "config": ("config.json", lambda d: load_json_object("config.json", d), lambda n: 40 * n + 4 * MiB),
    "generation config": ("generation_config.json", lambda d: load_json_object("generation_config.json", d), lambda n: 40 * n + 4 * MiB),
    "tokenizer config": ("tokenizer_config.json", lambda d: load_json_object("tokenizer_config.json", d), lambda n: 40 * n + 4 * MiB),
    "special tokens map": ("special_tokens_map.json", lambda d: load_json_object("special_tokens_map.json", d), lambda n: 40 * n + 4 * MiB),
    "chat_template.json": ("chat_template.json", lambda d: load_json_object("chat_template.json", d), lambda n: 40 * n + 4 * MiB),
    "index": ("model.safetensors.index.json", lambda d: load_json_object("model.safetensors.index.json", d), lambda n: 40 * n + 4 * MiB),
    "tokenizer.json": ("tokenizer.json", lambda d: summarise_tokenizer("tokenizer.json", d), lambda n: 40 * n + 4 * MiB),
    "safetensors header": ("model.safetensors", lambda d: parse_file_prefix(d, HEADER_CAP), lambda n: 40 * n + 4 * MiB),
    "card front matter": ("README.md", lambda d: parse_card("README.md", d), lambda n: min(200 * n + 4 * MiB, 64 * MiB)),
    "estimate config": ("config.json", _estimate, lambda n: 40 * n + 4 * MiB),
    "chat template render": ("chat_template.jinja", _render, lambda n: 100 * n + 64 * MiB),
    "preflight auto_map scan": ("config.json", lambda d: preflight_imports.auto_map_modules({"config.json": d}), lambda n: 40 * n + 4 * MiB),
    "preflight index metadata": (INDEX, lambda d: _total_size({INDEX: d}), lambda n: 40 * n + 4 * MiB),
    "preflight index names": (INDEX, lambda d: tensor_names({INDEX: d}, {}), lambda n: 40 * n + 4 * MiB),
    "preflight remote code": ("modeling_deepseek.py", _remote_code, lambda n: 400 * n + 4 * MiB),
}  # fmt: skip


@pytest.mark.parametrize("reader", sorted(READERS))
def test_each_reader_reads_its_real_file(reader: str) -> None:
    name, read, _ = READERS[reader]
    data = REAL_HEADER if name.endswith(".safetensors") else REAL[name]
    result = read(data)
    assert not isinstance(result, BaseException)


def _check(reader: str, data: bytes) -> None:
    _, read, bound = READERS[reader]
    result, peak = peak_of(lambda: read(data))
    if isinstance(result, BaseException) and not isinstance(result, TrackerError):
        raise AssertionError(f"{reader} let {result.__class__.__name__} escape: {result}")
    if isinstance(result, TrackerError):
        assert str(result) and "\n" not in str(result), repr(result)
    assert peak <= bound(len(data)), (reader, len(data), peak)


@pytest.mark.parametrize("reader", sorted(READERS))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_hostile_input_raises_only_typed_errors_within_the_memory_bound(
    reader: str, data: st.DataObject
) -> None:
    name = READERS[reader][0]
    _check(reader, data.draw(hostile(name)))


def _storable(change: Any) -> None:
    """What the diff store, the CLI and the feeds do with a change: UTF-8 JSON, one-line summary."""
    json.dumps(change.to_json(), ensure_ascii=False).encode("utf-8")
    assert change.summary and "\n" not in change.summary


_DIFFED = [
    "config.json",
    "generation_config.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "model.safetensors.index.json",
    "README.md",
    "tokenizer.json",
]


@pytest.mark.parametrize("name", _DIFFED)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_differs_turn_hostile_files_into_storable_changes(name: str, data: st.DataObject) -> None:
    bad = data.draw(hostile(name))
    before = make_snapshot({name: REAL[name]})
    after = make_snapshot({name: bad})
    changes = diff_snapshots(before, after)
    for change in changes:
        _storable(change)
    try:
        load_json_object(name, bad) if name.endswith(".json") else parse_card(name, bad)
    except TrackerError as exc:
        unreadable = [c.summary for c in changes if c.kind is ChangeKind.UNREADABLE]
        assert str(exc) in unreadable, (name, str(exc), unreadable)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_hostile_chat_templates_give_storable_changes(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(["chat_template.jinja", "chat_template.json"]))
    bad = data.draw(hostile(name))
    changes = diff_snapshots(make_snapshot({name: REAL[name]}), make_snapshot({name: bad}))
    for change in changes:
        _storable(change)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_hostile_headers_in_a_snapshot_give_storable_changes(data: st.DataObject) -> None:
    raw = data.draw(hostile("model.safetensors"))
    try:
        header = parse_file_prefix(raw, HEADER_CAP)
    except TrackerError as exc:
        after = make_snapshot({}, extra_tree={"model.safetensors": "b" * 40},
                              unreadable={"model.safetensors": str(exc)})  # fmt: skip
    else:
        after = make_snapshot({}, extra_tree={"model.safetensors": "b" * 40},
                              headers={"model.safetensors": header})  # fmt: skip
    real = parse_file_prefix(REAL_HEADER, HEADER_CAP)
    before = make_snapshot({}, extra_tree={"model.safetensors": "a" * 40},
                           headers={"model.safetensors": real})  # fmt: skip
    for change in diff_weights(before, after):
        _storable(change)


def test_an_unreadable_special_tokens_map_is_reported_not_silent() -> None:
    # Found by the property above: no differ reported this file when it could not be read.
    name = "special_tokens_map.json"
    before = make_snapshot({name: REAL[name]})
    after = make_snapshot({name: b'{"eos_token": "</s>"'})
    (change,) = diff_snapshots(before, after)
    assert (change.kind, change.file, change.summary) == (
        ChangeKind.UNREADABLE,
        name,
        "could not read special_tokens_map.json: Expecting ',' delimiter: line 1 column 21 (char 20)",
    )
    (again,) = diff_snapshots(after, before)
    assert (again.kind, again.file, again.key) == (ChangeKind.CHANGED, name, "")
    assert again.summary.startswith("special_tokens_map.json is readable again")
