"""config.json / generation_config.json / processor differs on real corpus histories and malformed input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from diffkit import history, make_snapshot, version

from tracker.diff import diff_snapshots
from tracker.shared.domain import Artifact, ChangeKind


def _replay(name: str) -> list[tuple[str, list[tuple[str, str, str, str, object, object]]]]:
    out = []
    prev = None
    for sha, _subject, files in history(name):
        snap = make_snapshot(files, sha=sha)
        changes = diff_snapshots(prev, snap)
        out.append(
            (
                sha[:8],
                [
                    (c.artifact.value, c.kind.value, c.file, c.key, c.before, c.after)
                    for c in changes
                ],
            )
        )
        prev = snap
    return out


def test_mixtral_release_week_config_history() -> None:
    assert _replay("mistralai__Mixtral-8x7B-v0.1") == [
        ("5802963a", []),
        (
            "4dd4b0f2",
            [
                ("config", "added", "config.json", "attention_dropout", None, 0),
                ("config", "changed", "config.json", "model_type", "mistral", "mixtral"),
                ("config", "added", "config.json", "output_router_logits", None, True),
                ("config", "added", "config.json", "router_aux_loss_coef", None, 0.02),
                ("config", "added", "config.json", "sliding_window", None, 4096),
                (
                    "config",
                    "changed",
                    "config.json",
                    "transformers_version",
                    "4.34.0.dev0",
                    "4.36.0.dev0",
                ),
            ],
        ),
        ("c56a1625", [("config", "changed", "config.json", "output_router_logits", True, False)]),
        ("2e54f233", [("config", "removed", "config.json", "sliding_window", 4096, None)]),
        ("41c1fe32", [("config", "added", "config.json", "sliding_window", None, None)]),
        ("ccf7a650", [("config", "changed", "config.json", "sliding_window", None, 4096)]),
        ("c2b2ae2f", [("config", "changed", "config.json", "sliding_window", 4096, 32768)]),
        ("58301445", [("config", "changed", "config.json", "sliding_window", 32768, None)]),
    ]


def test_llama2_config_generation_config_and_special_tokens_history() -> None:
    steps = dict(_replay("meta-llama__Llama-2-7b-hf"))
    assert steps["5373729f"] == [
        ("config", "added", "config.json", "_name_or_path", None, "meta-llama/Llama-2-7b-hf"),
        ("config", "added", "config.json", "max_length", None, 4096),
    ]
    assert steps["b3ab0f18"] == [
        ("special_tokens", "changed", "generation_config.json", "pad_token_id", 32000, 0)
    ]
    assert steps["335a0288"] == [
        ("config", "changed", "config.json", "max_position_embeddings", 2048, 4096)
    ]
    # config.json drops pad_token_id while generation_config.json still sets 0: shadowed, reported once
    assert steps["87a34353"] == [
        ("special_tokens", "removed", "config.json", "pad_token_id", 0, None)
    ]
    assert steps["6fdf2e60"] == [
        ("generation_config", "added", "generation_config.json", "do_sample", None, True),
        ("generation_config", "changed", "generation_config.json", "temperature", 0.9, 0.6),
        ("generation_config", "changed", "generation_config.json", "top_p", 0.6, 0.9),
    ]
    assert steps["25bd8085"] == [
        ("tokenizer", "removed", "tokenizer_config.json", "use_fast", False, None)
    ]


def test_bloom_architecture_fixes_and_token_ids() -> None:
    steps = dict(_replay("bigscience__bloom-560m"))
    assert steps["957a865e"] == [
        (
            "config",
            "changed",
            "config.json",
            "architectures",
            ["BloomModel"],
            ["BloomModelForCausalLM"],
        )
    ]
    assert steps["e985a63c"] == [
        (
            "config",
            "changed",
            "config.json",
            "architectures",
            ["BloomModelForCausalLM"],
            ["BloomForCausalLM"],
        )
    ]
    assert steps["8ad61ef2"] == [
        ("special_tokens", "changed", "config.json", "bos_token_id", 50256, 1),
        ("special_tokens", "changed", "config.json", "eos_token_id", 50256, 2),
        ("special_tokens", "added", "config.json", "pad_token_id", None, 3),
        ("special_tokens", "added", "config.json", "unk_token_id", None, 0),
    ]
    assert steps["0628d1bb"] == [
        (
            "tokenizer",
            "changed",
            "tokenizer_config.json",
            "tokenizer_class",
            "PreTrainedTokenizerFast",
            "BloomTokenizerFast",
        )
    ]


def test_first_revision_is_the_baseline() -> None:
    files = history("mistralai__Mixtral-8x7B-v0.1")[-1][2]
    assert diff_snapshots(None, make_snapshot(files)) == ()


def _reformatted(raw: bytes) -> bytes:
    doc = json.loads(raw)
    reordered = dict(reversed(list(doc.items())))
    return json.dumps(reordered, indent=7).replace(": 1e-05", ": 0.00001").encode() + b"\n\n"


def test_reordering_reindenting_and_int_vs_float_give_no_change() -> None:
    raw = version("mistralai__Mixtral-8x7B-v0.1", "08_")
    doc = json.loads(raw)
    assert doc["rope_theta"] == 1e6
    doc["rope_theta"] = int(doc["rope_theta"])  # 1000000.0 → 1000000
    before = make_snapshot({"config.json": raw})
    after = make_snapshot({"config.json": _reformatted(json.dumps(doc).encode())})
    assert diff_snapshots(before, after) == ()


def test_nested_configs_give_dotted_keys_and_type_changes() -> None:
    before = {
        "text_config": {"hidden_size": 4096, "rope_scaling": {"factor": 8.0, "type": "llama3"}},
        "x": 1,
    }
    after = {"text_config": {"hidden_size": 5120, "rope_scaling": {"factor": "8"}}, "x": True}
    changes = diff_snapshots(
        make_snapshot({"config.json": json.dumps(before).encode()}),
        make_snapshot({"config.json": json.dumps(after).encode()}),
    )
    assert [(c.kind, c.key, c.before, c.after) for c in changes] == [
        (ChangeKind.CHANGED, "text_config.hidden_size", 4096, 5120),
        (ChangeKind.TYPE_CHANGED, "text_config.rope_scaling.factor", 8, "8"),
        (ChangeKind.REMOVED, "text_config.rope_scaling.type", "llama3", None),
        (ChangeKind.TYPE_CHANGED, "x", 1, True),
    ]
    assert changes[0].summary == "text_config.hidden_size changed: 4096 → 5120"
    assert (
        changes[1].summary
        == 'text_config.rope_scaling.factor changed type number → string: 8 → "8"'
    )


def test_long_arrays_are_one_change_with_a_short_value_and_the_evidence_in_detail() -> None:
    before = {"rope_scaling": {"long_factor": [1.0] * 48}}
    after = {"rope_scaling": {"long_factor": [1.0] * 47 + [1.5]}}
    (change,) = diff_snapshots(
        make_snapshot({"config.json": json.dumps(before).encode()}),
        make_snapshot({"config.json": json.dumps(after).encode()}),
    )
    assert change.key == "rope_scaling.long_factor"
    assert change.kind is ChangeKind.CHANGED
    assert change.before == [1] * 48  # short enough to keep whole (integral floats normalised)
    assert change.after[-1] == 1.5


MALFORMED = [
    (
        b'{\n  "a": 1\n  "b": 2\n}',
        "could not read config.json: Expecting ',' delimiter: line 3 column 3 (char 13)",
    ),
    (b"[1, 2]", "could not read config.json: expected a JSON object at the top level, got array"),
    (
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
        "could not read config.json: binary content (NUL bytes), not text",
    ),
    (b'{"a": "\xff"}', "could not read config.json: not UTF-8 text (invalid start byte at byte 7)"),
]


@pytest.mark.parametrize(("raw", "reason"), MALFORMED)
def test_malformed_config_is_unreadable_never_silent(raw: bytes, reason: str) -> None:
    good = make_snapshot({"config.json": b'{"a": 1}'})
    bad = make_snapshot({"config.json": raw})
    for before in (None, good):
        (change,) = diff_snapshots(before, bad)
        assert (change.artifact, change.kind, change.file, change.after, change.summary) == (
            Artifact.CONFIG,
            ChangeKind.UNREADABLE,
            "config.json",
            reason,
            reason,
        )
    # still unreadable for the same reason: not reported again
    assert diff_snapshots(bad, make_snapshot({"config.json": raw})) == ()
    (back,) = diff_snapshots(bad, good)
    assert (back.kind, back.key, back.before) == (ChangeKind.CHANGED, "", reason)
    assert back.summary == f"config.json is readable again (was: {reason})"


def test_fetch_failures_recorded_in_the_snapshot_are_unreadable() -> None:
    good = make_snapshot({"generation_config.json": b'{"top_p": 0.9}'})
    failed = make_snapshot({}, unreadable={"generation_config.json": "HTTP 500 after 3 tries"})
    (change,) = diff_snapshots(good, failed)
    assert (change.artifact, change.kind) == (Artifact.GENERATION_CONFIG, ChangeKind.UNREADABLE)
    assert change.summary == "could not read generation_config.json: HTTP 500 after 3 tries"


def test_files_added_removed_and_untracked() -> None:
    base = make_snapshot({"config.json": b"{}"})
    with_proc = make_snapshot({"config.json": b"{}", "preprocessor_config.json": b'{"size": 224}'})
    (added,) = diff_snapshots(base, with_proc)
    assert (added.artifact, added.kind, added.file) == (
        Artifact.PROCESSOR,
        ChangeKind.ADDED,
        "preprocessor_config.json",
    )
    (removed,) = diff_snapshots(with_proc, base)
    assert (removed.kind, removed.summary) == (
        ChangeKind.REMOVED,
        "preprocessor_config.json removed",
    )
    # in the tree but not fetched: nothing is known, nothing is claimed
    untracked = make_snapshot(
        {"config.json": b"{}"}, extra_tree={"preprocessor_config.json": "abc"}
    )
    assert diff_snapshots(with_proc, untracked) == ()


def test_processor_config_keys() -> None:
    before = make_snapshot(
        {"preprocessor_config.json": b'{"size": {"height": 224, "width": 224}, "do_resize": true}'}
    )
    after = make_snapshot(
        {"preprocessor_config.json": b'{"do_resize": true, "size": {"height": 384, "width": 384}}'}
    )
    changes = diff_snapshots(before, after)
    assert [(c.artifact, c.key, c.before, c.after) for c in changes] == [
        (Artifact.PROCESSOR, "size.height", 224, 384),
        (Artifact.PROCESSOR, "size.width", 224, 384),
    ]


def test_kinds_filter_runs_only_the_named_differs() -> None:
    before = make_snapshot({"config.json": b'{"a": 1}', "README.md": b"hello"})
    after = make_snapshot({"config.json": b'{"a": 2}', "README.md": b"hello world"})
    assert {c.artifact for c in diff_snapshots(before, after)} == {
        Artifact.CONFIG,
        Artifact.MODEL_CARD,
    }
    assert {
        c.artifact for c in diff_snapshots(before, after, kinds=frozenset({Artifact.MODEL_CARD}))
    } == {Artifact.MODEL_CARD}


def test_booleans_in_arrays_are_not_numbers() -> None:
    # deepdiff compares array items by hash, where false == 0: hypothesis found `[false]` → `[0]`
    # reported as no change. JSON types stay apart; integral floats still equal ints.
    before = make_snapshot({"config.json": json.dumps({"suppress": [False, 1.0]}).encode()})
    same = make_snapshot(
        {"config.json": json.dumps({"suppress": [False, 1]}).encode()}, sha="b" * 40
    )
    changed = make_snapshot(
        {"config.json": json.dumps({"suppress": [0, 1]}).encode()}, sha="c" * 40
    )
    assert diff_snapshots(before, same) == ()
    (change,) = diff_snapshots(before, changed)
    assert (change.key, change.before, change.after) == ("suppress", [False, 1], [0, 1])


CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "models"


def test_nan_and_infinity_are_read_as_transformers_reads_them_and_kept_as_their_names() -> None:
    """Python's json and transformers read NaN/Infinity in config.json; so does the diff, keeping
    them as their names (strict JSON where stored and served; NaN equals itself)."""
    real = (CORPUS / "nvidia__NVIDIA-Nemotron-3-Super-120B-A12B-FP8" / "config.json").read_bytes()
    assert b"Infinity" in real  # time_step_limit: [0.0, Infinity]
    doc = json.loads(real)
    assert diff_snapshots(None, make_snapshot({"config.json": real})) == ()
    assert (
        diff_snapshots(
            make_snapshot({"config.json": real}), make_snapshot({"config.json": real + b"\n"})
        )
        == ()
    )
    capped = json.dumps({**doc, "time_step_limit": [0.0, 1e9]}).encode()
    (change,) = diff_snapshots(
        make_snapshot({"config.json": real}), make_snapshot({"config.json": capped})
    )
    assert (change.artifact, change.kind, change.key, change.before, change.after) == (
        Artifact.CONFIG,
        ChangeKind.CHANGED,
        "time_step_limit",
        [0, "Infinity"],
        [0, 1000000000],
    )
    assert change.summary == 'time_step_limit changed: [0, "Infinity"] → [0, 1000000000]'
    nan = make_snapshot({"config.json": b'{"a": NaN, "b": -Infinity}'})
    assert diff_snapshots(nan, make_snapshot({"config.json": b'{"b": -Infinity, "a": NaN}'})) == ()
    (change,) = diff_snapshots(nan, make_snapshot({"config.json": b'{"a": 1, "b": -Infinity}'}))
    assert (change.kind, change.key, change.before, change.after, change.summary) == (
        ChangeKind.CHANGED,
        "a",
        "NaN",
        1,
        'a changed: "NaN" → 1',
    )
