"""Custom code (auto_map + .py by AST), executable pickles by identity, and model card front matter/body."""

from __future__ import annotations

import json

from diffkit import DATA, history, make_snapshot

from tracker.diff import diff_snapshots
from tracker.shared.domain import Artifact, ChangeKind

MODELING_V1 = b'''"""ChatGLM-style modeling file."""
import math
import torch
from transformers.modeling_utils import PreTrainedModel
from .configuration_chatglm import ChatGLMConfig


class ChatGLMModel(PreTrainedModel):
    config_class = ChatGLMConfig
'''
MODELING_V2 = MODELING_V1.replace(b"import math\n", b"import os\nimport subprocess\n") + (
    b"from transformers.utils import logging, is_torch_available\n"
)


def _steps(name: str) -> dict[str, list[tuple[str, str, str, str, object, object]]]:
    out = {}
    prev = None
    for sha, _subject, files in history(name):
        snap = make_snapshot(files, sha=sha)
        out[sha[:8]] = [
            (c.artifact.value, c.kind.value, c.file, c.key, c.before, c.after)
            for c in diff_snapshots(prev, snap)
        ]
        prev = snap
    return out


def test_chatglm2_auto_map_entries_added_in_real_history() -> None:
    steps = _steps("THUDM__chatglm2-6b")
    assert steps["162b620e"] == [
        (
            "custom_code",
            "added",
            "config.json",
            "auto_map.AutoModelForCausalLM",
            None,
            "modeling_chatglm.ChatGLMForConditionalGeneration",
        ),
    ]
    assert steps["7c480481"] == [
        (
            "custom_code",
            "added",
            "config.json",
            "auto_map.AutoModelForSequenceClassification",
            None,
            "modeling_chatglm.ChatGLMForSequenceClassification",
        ),
    ]
    assert steps["74d61a69"] == [("special_tokens", "changed", "config.json", "pad_token_id", 2, 0)]


def test_py_file_imports_and_transformers_symbols_by_ast() -> None:
    before = make_snapshot({"modeling_chatglm.py": MODELING_V1})
    after = make_snapshot({"modeling_chatglm.py": MODELING_V2})
    (c,) = diff_snapshots(before, after)
    assert (c.artifact, c.kind, c.file, c.key) == (
        Artifact.CUSTOM_CODE,
        ChangeKind.CHANGED,
        "modeling_chatglm.py",
        "modeling_chatglm.py",
    )
    assert c.after["imports"] == [
        ".configuration_chatglm",
        "os",
        "subprocess",
        "torch",
        "transformers.modeling_utils",
        "transformers.utils",
    ]
    assert c.after["transformers"] == [
        "transformers.modeling_utils.PreTrainedModel",
        "transformers.utils.is_torch_available",
        "transformers.utils.logging",
    ]
    assert c.summary == (
        "remote code modeling_chatglm.py changed (imports added: os, subprocess, transformers.utils; imports removed: math);"
        " now imports from transformers: transformers.utils.is_torch_available, transformers.utils.logging"
    )
    assert "+import subprocess" in c.detail and "-import math" in c.detail


def test_py_file_added_and_syntax_error_reported() -> None:
    base = make_snapshot({"config.json": b"{}"})
    (added,) = diff_snapshots(
        base, make_snapshot({"config.json": b"{}", "modeling_x.py": MODELING_V1})
    )
    assert (added.kind, added.key) == (ChangeKind.ADDED, "modeling_x.py")
    assert (
        added.summary
        == "remote code file modeling_x.py added; now imports from transformers: transformers.modeling_utils.PreTrainedModel"
    )
    broken = make_snapshot({"config.json": b"{}", "modeling_x.py": b"def f(:\n    pass\n"})
    (c,) = diff_snapshots(None, broken)
    assert (c.kind, c.summary) == (
        ChangeKind.UNREADABLE,
        "could not parse modeling_x.py: invalid syntax (line 1)",
    )


def test_executables_by_identity_with_scan_status() -> None:
    scan_unsafe = {"status": "unsafe", "pickleImportScan": {"highestSafetyLevel": "dangerous"}}
    before = make_snapshot({}, extra_tree={"pytorch_model.bin": "sha-a", "optimizer.pt": "sha-o"})
    after = make_snapshot(
        {},
        extra_tree={"pytorch_model.bin": "sha-b", "training_args.pkl": "sha-p"},
        security={"training_args.pkl": scan_unsafe},
    )
    got = [
        (c.artifact.value, c.kind.value, c.key, c.summary) for c in diff_snapshots(before, after)
    ]
    assert got == [
        ("executable", "removed", "optimizer.pt", "pickle file optimizer.pt removed"),
        (
            "executable",
            "changed",
            "pytorch_model.bin",
            "pickle file pytorch_model.bin has new content (1000 → 1000 bytes; scan: unscanned)",
        ),
        (
            "executable",
            "added",
            "training_args.pkl",
            "pickle file training_args.pkl added (1000 bytes; scan: unsafe, pickle imports dangerous)",
        ),
    ]
    rescanned = make_snapshot(
        {},
        extra_tree={"pytorch_model.bin": "sha-b", "training_args.pkl": "sha-p"},
        security={"training_args.pkl": {"status": "safe"}},
    )
    (c,) = diff_snapshots(after, rescanned)
    assert (
        c.summary
        == "pickle file training_args.pkl scan status changed: unsafe, pickle imports dangerous → safe"
    )


LLAMA_CARD = (DATA / "models" / "meta-llama__Llama-2-7b-hf" / "README.frontmatter.md").read_bytes()


def test_card_front_matter_key_by_key_and_body_as_one_text_change() -> None:
    before = make_snapshot({"README.md": LLAMA_CARD + b"\n# Llama 2\nBody text.\n"})
    front2 = LLAMA_CARD.replace(
        b"pipeline_tag: text-generation", b"pipeline_tag: text-generation\nlicense: llama2"
    )
    front2 = front2.replace(b"- llama-2\n", b"- llama-2\n- gated\n")
    after = make_snapshot({"README.md": front2 + b"\n# Llama 2\nBody text, revised.\n"})
    got = [
        (c.artifact.value, c.kind.value, c.key, c.before, c.after)
        for c in diff_snapshots(before, after)
    ]
    assert got[:2] == [
        ("model_card", "added", "license", None, "llama2"),
        (
            "model_card",
            "changed",
            "tags",
            ["facebook", "meta", "pytorch", "llama", "llama-2"],
            ["facebook", "meta", "pytorch", "llama", "llama-2", "gated"],
        ),
    ]
    assert got[2][:3] == ("model_card", "changed", "text")
    assert len(got) == 3


def test_readme_body_only_and_line_ending_edits() -> None:
    before = make_snapshot({"README.md": LLAMA_CARD + b"\nBody.\n", "config.json": b'{"a": 1}'})
    crlf = make_snapshot(
        {
            "README.md": (LLAMA_CARD + b"\nBody.   \n").replace(b"\n", b"\r\n"),
            "config.json": b'{"a": 1}',
        }
    )
    assert diff_snapshots(before, crlf) == ()
    edited = make_snapshot(
        {"README.md": LLAMA_CARD + b"\nBody, edited.\n", "config.json": b'{"a": 1}'}
    )
    (c,) = diff_snapshots(before, edited)
    assert (c.artifact, c.kind, c.key, c.summary) == (
        Artifact.MODEL_CARD,
        ChangeKind.CHANGED,
        "text",
        "card text changed",
    )


def test_malformed_front_matter_is_unreadable() -> None:
    bad = make_snapshot({"README.md": b"---\nlicense: [apache\n---\nbody\n"})
    (c,) = diff_snapshots(None, bad)
    assert (c.kind, c.summary) == (
        ChangeKind.UNREADABLE,
        "could not read README.md: malformed YAML front matter (line 2): while parsing a flow "
        "sequence did not find expected ',' or ']'",
    )
    scalar = make_snapshot({"README.md": b"---\njust a string\n---\nbody\n"})
    (d,) = diff_snapshots(None, scalar)
    assert d.summary == "could not read README.md: front matter is a str, not a mapping"
    unterminated = make_snapshot({"README.md": b"---\nlicense: mit\n"})
    (e,) = diff_snapshots(None, unterminated)
    assert e.summary == "could not read README.md: front matter starts with '---' but never ends"


def test_yaml_dates_are_json_values() -> None:
    a = make_snapshot({"README.md": b"---\nrelease: 2024-01-02\n---\n"})
    b = make_snapshot({"README.md": b"---\nrelease: 2024-02-03\n---\n"})
    (c,) = diff_snapshots(a, b)
    assert (c.before, c.after) == ("2024-01-02", "2024-02-03")
    json.dumps(c.before)
