"""What a revision says of its lineage (`tracker.diff.lineage`) and which derivative units a base
change leaves stale (`tracker.advisories.stale`), on snapshots built here; the GGUF header is
written by gguf-py (ggufkit) and parsed by tracker's reader."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tracker.advisories.stale import find_stale, initial_pending, resolved
from tracker.diff.lineage import LineageLink, Unit, effective_units, read_links
from tracker.shared.domain import RepoId, Sha, Snapshot, TreeEntry
from tracker.sources.gguf import parse_gguf_bytes

sys.path.insert(0, str(Path(__file__).parents[1] / "ingest"))
from ggufkit import QWEN25_CONFIG, write_qwen_like

SHA = Sha("a" * 40)


def _snap(files: dict[str, bytes], gguf: dict[str, bytes] | None = None) -> Snapshot:
    paths = [*files, *(gguf or {})]
    tree = tuple(TreeEntry(p, "b" * 40, 10) for p in paths)
    headers = {p: parse_gguf_bytes(d, max_bytes=1 << 26) for p, d in (gguf or {}).items()}
    return Snapshot(RepoId("acme/x"), SHA, tree, files, gguf=headers)


def test_card_names_bases_as_a_string_or_a_list_with_the_relation() -> None:
    one = _snap({"README.md": b"---\nbase_model: org/base\nbase_model_relation: adapter\n---\n"})
    assert read_links(one) == [LineageLink(RepoId("org/base"), "adapter", "card")]
    many = _snap({"README.md": b"---\nbase_model:\n- org/a\n- https://huggingface.co/org/b\n"
                  b"- not a repo id\n- ../x\nbase_model_relation: merge\n---\n"})  # fmt: skip
    assert read_links(many) == [
        LineageLink(RepoId("org/a"), "merge", "card"),
        LineageLink(RepoId("org/b"), "merge", "card"),
    ]
    unknown = _snap({"README.md": b"---\nbase_model: org/a\nbase_model_relation: cousin\n---\n"})
    assert read_links(unknown) == [LineageLink(RepoId("org/a"), None, "card")]
    assert read_links(_snap({"README.md": b"---\nbase_model: [\n---\n"})) == []  # unreadable


def test_gguf_header_names_its_base_and_carries_its_template_and_ids(tmp_path: Path) -> None:
    (path,) = write_qwen_like(
        tmp_path / "m.gguf", config=QWEN25_CONFIG, name="Q", template="{{ x }}", added=["<e>"],
        specials={"eos": 151643, "bos": 151643}, base_models=(("Qwen2.5 7B", "Qwen",
        "https://huggingface.co/Qwen/Qwen2.5-7B"),),
    )  # fmt: skip
    snap = _snap({"README.md": b"---\nbase_model: Qwen/Qwen2.5-7B\n---\n"},
                 {"m.gguf": path.read_bytes()})  # fmt: skip
    assert read_links(snap) == [LineageLink(RepoId("Qwen/Qwen2.5-7B"), "quantized", "card+gguf")]
    assert effective_units(snap) == [
        Unit("m.gguf", True, {"chat_template": "{{ x }}", "bos_token_id": 151643,
                              "eos_token_id": 151643}),
    ]  # fmt: skip


def test_a_unit_is_stale_only_with_the_value_the_base_left() -> None:
    before = {"chat_template": "old", "eos_token_id": 2, "generation.temperature": 0.6}
    after = {"chat_template": "new", "eos_token_id": 2, "generation.temperature": 0.7, "x": 1}
    old_gguf = Unit("a.gguf", True, {"chat_template": "old", "eos_token_id": 2})
    own = Unit("", False, {"chat_template": "custom", "generation.temperature": 0.6})
    stale = find_stale(before, after, after, [old_gguf, own])
    assert [(s.key, s.file, s.left, s.now) for s in stale] == [
        ("chat_template", "a.gguf", "old", "new"),
        ("generation.temperature", "", 0.6, 0.7),
    ]
    # the base went back to the old template by its newest revision: nothing is stale there
    assert [s.key for s in find_stale(before, after, before, [old_gguf])] == []
    pending = [p.to_json() for p in initial_pending(stale)]
    assert not resolved(pending, [old_gguf, own])
    redone = Unit("a.gguf", True, {"chat_template": "new"})
    assert not resolved(pending, [redone, own])  # the fine-tune's temperature is still 0.6
    assert resolved(pending, [redone, Unit("", False, {"generation.temperature": 0.7})])
    assert resolved(pending, [])  # every stale unit gone


def test_generation_config_over_config_for_ids(tmp_path: Path) -> None:
    files = {
        "config.json": json.dumps({"eos_token_id": 1, "bos_token_id": 5}).encode(),
        "generation_config.json": json.dumps({"eos_token_id": [1, 7], "top_p": 0.9}).encode(),
        "tokenizer_config.json": json.dumps({"chat_template": "{{ t }}"}).encode(),
    }
    (unit,) = effective_units(_snap(files))
    assert unit == Unit("", False, {"chat_template": "{{ t }}", "bos_token_id": 5,
                                    "eos_token_id": [1, 7], "generation.top_p": 0.9})  # fmt: skip
