"""Golden files for the text and JSON renderings of a Diff (regenerate with UPDATE_GOLDEN=1, then review)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from diffkit import make_snapshot, version

from tracker.diff import diff_snapshots
from tracker.diff.render import render_json, render_text
from tracker.shared.domain import Diff, RepoId, Sha

GOLDEN = Path(__file__).parent / "golden"
GRANITE = "ibm-granite__granite-3.1-1b-a400m-instruct"


def _diff() -> Diff:
    before = make_snapshot(
        {
            "config.json": version(GRANITE, "01_0a854d48_config"),
            "tokenizer_config.json": version(GRANITE, "01_0a854d48_tok"),
            "README.md": b"---\nlicense: apache-2.0\n---\n# Granite\n",
            "modeling_granite.py": b"import torch\n",
        },
        sha="0a854d48947ba295cc76a294b46d5f55f26c4bf4",
        extra_tree={"pytorch_model.bin": "1" * 64},
    )
    after = make_snapshot(
        {
            "config.json": version(GRANITE, "02_8290d32f_config"),
            "tokenizer_config.json": version(GRANITE, "02_c4f8e0dd"),
            "README.md": b"---\nlicense: apache-2.0\nbase_model: ibm-granite/granite-3.1-1b-a400m-base\n---\n# Granite 3.1\n",
            "modeling_granite.py": b"import torch\nfrom transformers import PreTrainedModel\n",
        },
        sha="8290d32ffc403c6d628249af989beb7800c70d77",
        extra_tree={"pytorch_model.bin": "2" * 64},
    )
    return Diff(
        RepoId("ibm-granite/granite-3.1-1b-a400m-instruct"),
        before.sha,
        after.sha,
        diff_snapshots(before, after),
    )


@pytest.mark.parametrize(
    ("name", "render"), [("granite.txt", render_text), ("granite.json", render_json)]
)
def test_golden(name: str, render: object) -> None:
    out = render(_diff())  # type: ignore[operator]
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(out.encode())
    assert out.encode() == path.read_bytes(), (
        f"{name} differs from the golden file (UPDATE_GOLDEN=1 to regenerate)"
    )


def test_json_is_stable_and_parses_back() -> None:
    a, b = render_json(_diff()), render_json(_diff())
    assert a == b
    doc = json.loads(a)
    assert doc["count"] == len(doc["changes"]) == len(_diff().changes)
    assert list(doc["changes"][0]) == sorted(doc["changes"][0])


def test_text_of_an_empty_first_revision_diff() -> None:
    d = Diff(RepoId("o/n"), None, Sha("a" * 40), ())
    assert render_text(d) == "o/n (first revision) → aaaaaaaaaaaa: 0 changes\n"
