"""The key sentences of the demo's golden advisories (issue 11): the kind of change and advice that
fits it, the fixing commit named, mass changes as one pattern, values whole, no zero estimate table.

The goldens are byte-compared with the demo's output by test_demo_golden.py; this module reads
them as an on-call engineer would and checks what they must say.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

GOLDEN = Path(__file__).parent / "golden"


def _record(n: int) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((GOLDEN / f"x_TRACKER-2026-{n}.json").read_text())
    return data


def _details(n: int) -> str:
    return str(_record(n)["details"])


def _table_cells(details: str) -> list[str]:
    if "## What changed" not in details:  # a findings advisory (broken as first seen)
        return []
    section = details.split("## What changed", 1)[1].split("\n\n- ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")][1:]
    return [c.strip() for row in rows for c in re.split(r"(?<!\\)\|", row)[1:-1]]


def test_granite_template_fix_is_a_fix_with_both_directions() -> None:
    d = _details(21)
    assert (
        "**Kind: a fix of an earlier defect**: the previous template rendered the system message "
        "twice in `generation_prompt`, `system_user` (2 canonical conversations); this "
        "revision's renders it once." in d
    )
    assert "“Updated chat template” by Matt Stallone on 2024-12-12 17:15 UTC" in d
    assert (
        "To take the fix, upgrade to `c6d3966f9f81` or later and re-render your prompts and "
        "re-run your prompt tests. To keep the old behaviour" in d
    )
    assert 'pin `af15e05b6317` (`revision="af15e05b6317000518e4756d3539e25bc82974b4"`' in d
    assert "pin the previous revision until" not in d
    # the rendered prompts whole, as a line diff; never a fragment cut mid-token
    assert "-<|start_of_role|>system<|end_of_role|>You are a helpful assistant.<|end_of_text|>" in d
    assert "…" not in d


def test_eos_equal_to_vocab_size_is_a_regression_and_names_its_revert() -> None:
    rec = _record(12)
    d = rec["details"]
    assert (
        "**Kind: a regression**: `eos_token_id` 32000 in generation_config.json is outside the "
        "vocabulary (`vocab_size` 32000: ids 0 to 31999)" in d
    )
    assert "- **high** (token-id-out-of-vocab): `eos_token_id` 32000" in d
    assert "- **moderate** (token-id-disagrees): `eos_token_id` is 2 in config.json but 32000" in d
    # fixed: "What to do" names the fixing revision, never "stay … until a later revision fixes"
    advice = d.split("## What to do\n\n", 1)[1]
    assert advice.startswith(
        "Upgrade to the fixing revision [`ef1050a86f9e`](https://huggingface.co/meta-llama/"
        "Llama-2-7b-hf/commit/ef1050a86f9eeb443230c501e052bcfb00fdd8d9) "
        '(`revision="ef1050a86f9eeb443230c501e052bcfb00fdd8d9"` in `from_pretrained`) or later'
    )
    assert "until a later revision fixes this" not in d
    assert rec["database_specific"]["open_advice"].startswith(
        "Stay on the previous revision: pin `c25125528051`"
    )
    # the fixing commit named in the text, with its title and date, before what changed
    status = d.split("## Status\n\n", 1)[1].split("\n\n## What changed", 1)[0]
    assert status.startswith("**Fixed** by commit [`ef1050a86f9e`](")
    assert "“\\[synthetic\\] generation_config.json: revert eos_token_id to 2" in status
    assert "on 2024-02-03 12:00 UTC" in status
    assert rec["database_specific"]["fixed"] == "ef1050a86f9eeb443230c501e052bcfb00fdd8d9"
    assert [f["check"] for f in rec["database_specific"]["findings"]] == [
        "token-id-out-of-vocab",
        "token-id-disagrees",
    ]


def test_a_restore_names_the_earlier_advisory() -> None:
    rec = _record(17)
    assert (
        "**Kind: a fix of an earlier defect**: `sliding_window` is back to the value it had "
        "before x_TRACKER-2026-14." in rec["details"]
    )
    assert rec["database_specific"]["restores"] == ["x_TRACKER-2026-14"]


@pytest.mark.parametrize("n", [27, 33, 36])
def test_the_commit_calling_it_a_fix_is_not_evidence_of_a_defect(n: int) -> None:
    """bloom's "Fix architecture" commits and others whose only evidence is their words: a change
    the commit calls a fix, never "a fix of an earlier defect" nor advice that says so."""
    d = _details(n)
    assert (
        "**Kind: a change the commit calls a fix (no evidence that the previous revision was "
        "broken)**: the commit title calls it a fix: “" in d
    )
    assert "a fix of an earlier defect" not in d and "To take the fix" not in d
    assert "The commit calls this a fix; nothing tracker checks shows the previous revision " in d


def test_bloom_fix_architecture_is_a_regression_then_its_fix() -> None:
    """bloom's "Fix architecture (#46)" names `BloomModelForCausalLM`, a class transformers does
    not define (a consistency finding, issue 24): a regression whatever the title says; "Fix
    architecture (#50)" resolves it, and its advice does not claim the fixing revision still has
    the finding."""
    d = _details(49)
    assert (
        "**Kind: a regression**: `architectures` names `BloomModelForCausalLM`, a class "
        "transformers 5.24.0 does not define: AutoModelForCausalLM.from_pretrained builds "
        "`BloomForCausalLM` and works" in d
    )
    # issue 24 part 4: fixed by #50, whose `BloomForCausalLM` resolves the finding (the value is
    # not the `BloomModel` of before, but the defect is gone), and versions end before it
    rec = _record(49)
    assert rec["affected"][0]["ranges"][0]["events"] == [
        {"introduced": "aa345fefe36b42d5f0b195e2c242a1b03831e991"},
        {"fixed": "83af66228031742a79477c92aca93c7807edbd13"},
    ]
    assert rec["affected"][0]["versions"] == ["aa345fefe36b42d5f0b195e2c242a1b03831e991"]
    assert rec["database_specific"]["fixed_how"] == "findings"
    assert (
        "it resolves every consistency finding this advisory is about (the defect is gone, "
        "although not every value it changed is back to the one before)" in rec["details"]
    )
    assert rec["details"].split("## What to do\n\n", 1)[1] == (
        "Upgrade to the fixing revision [`83af66228031`](https://huggingface.co/bigscience/"
        "bloom-560m/commit/83af66228031742a79477c92aca93c7807edbd13) "
        '(`revision="83af66228031742a79477c92aca93c7807edbd13"` in `from_pretrained`) or later: '
        "the consistency findings this advisory is about are resolved there. Revisions from the "
        "introducing commit up to it are affected (the versions listed); do not pin one of them.\n"
    )
    # its open advice, kept for a reopening, pinned the revision before the defect
    assert rec["database_specific"]["open_advice"].startswith(
        "Stay on the previous revision: pin `42afc9a66a46`"
    )
    d = _details(50)
    assert (
        "**Kind: a fix of an earlier defect**: it resolves a finding of the previous revision: "
        "`architectures` names `BloomModelForCausalLM`" in d
    )
    todo = d.split("## What to do\n\n", 1)[1]
    # never the old behaviour's pin: aa345fefe36b has the defect this revision fixes
    assert todo == (
        "To take the fix, upgrade to `83af66228031` or later and check that your code, adapters "
        "and serving configuration match the new config. There is no revision to pin to keep the "
        "old behaviour: the previous revision `aa345fefe36b` has the consistency findings of "
        "x_TRACKER-2026-49, which this revision resolves.\n"
    )
    assert "aa345fefe36b42d5f0b195e2c242a1b03831e991" not in todo


def test_broken_as_first_seen_is_its_own_advisory() -> None:
    """The demo's first Llama-2 revision already has `pad_token_id` 32000 (= `vocab_size`) in
    generation_config.json (the real history's; Arthur Zucker's 6b180d6 set it to 0)."""
    rec = _record(1)
    d = rec["details"]
    assert rec["summary"] == (
        "meta-llama/Llama-2-7b-hf: broken as first seen: a special-token id outside the "
        "vocabulary; config.json and generation_config.json disagree on a special-token id"
    )
    assert d.startswith(
        "**Severity: high**: `pad_token_id` 32000 in generation_config.json is outside the "
        "vocabulary (`vocab_size` 32000: ids 0 to 31999): the model cannot produce or embed it."
    )
    assert "**Kind: broken as first seen**: this is the first revision tracker ingested" in d
    assert [f["check"] for f in rec["database_specific"]["findings"]] == [
        "token-id-out-of-vocab",
        "token-id-disagrees",
    ]
    (rng,) = rec["affected"][0]["ranges"]
    assert rng["events"] == [
        {"introduced": "be11a9a87307fec88c5cc2f8d0c8d6e09f79a16c"},
        {"fixed": "6b180d66f2ccc35aa03cd027d82046f5d6ff2266"},
    ]
    assert len(rec["affected"][0]["versions"]) == 4
    status = d.split("## Status\n\n", 1)[1]
    assert "it resolves every consistency finding this advisory is about" in status


def test_advice_never_pins_a_revision_with_open_findings() -> None:
    todo = _details(13).split("## What to do\n\n", 1)[1]
    assert todo.startswith(
        "Do not pin the previous revision `74f34ee0814e` to avoid this change: it has the "
        "consistency findings of x_TRACKER-2026-12 (open), as does this revision."
    )
    assert "pin `74f34ee0814e`" not in todo
    # x-2 followed the broken first revision and is fixed since: its advice (rewritten on the
    # fix, issue 24 part 4) names the fixing revision and still never pins the broken one
    fixed = _details(2).split("## What to do\n\n", 1)[1]
    assert fixed.startswith("Upgrade to the fixing revision [`2359bbfaf86e`]")
    assert "be11a9a87307" not in fixed


def test_mass_dtype_conversion_is_one_pattern_attributed_to_its_file() -> None:
    """Granite's BF16 re-upload is one advisory (issue 24, part 6): the retyped tensors, the
    config's `torch_dtype` and the capacity answer they moved (three advisories before)."""
    rec = _record(22)
    d = rec["details"]
    assert rec["summary"] == (
        "ibm-granite/granite-3.1-1b-a400m-instruct: weights re-uploaded: 218 tensors retyped F32 "
        '→ BF16 in model.safetensors; shapes unchanged; torch_dtype "float32" → "bfloat16"; and 4 '
        "more"
    )
    assert rec["database_specific"]["group"] == "weights"
    assert "| high | `model.safetensors` | `218 tensors` | retyped | `F32` | `BF16` |" in d
    assert "| high | `config.json` | `torch_dtype` | changed | `float32` | `bfloat16` |" in d
    assert "| moderate | — | `preflight.capacity` | changed |" in d
    assert "and 215 more" in d
    assert "checkpoint bytes changed: 5,338,513,408 → 2,669,256,704 (−50%)" in d
    assert "index.json" not in d  # the repo has no index file
    assert "without any config change" not in d
    keys = [c["key"] for c in rec["database_specific"]["changes"]]
    assert len(keys) == 223  # every change kept in the record
    assert keys[-2:] == ["torch_dtype", "preflight.capacity"]
    # issue 25: serving follows the checkpoint as shipped, so the re-upload halves it
    assert [
        (c["key"], c["before"], c["after"]) for c in rec["database_specific"]["estimate_changes"]
    ] == [
        ("memory_gb.serve_weights", 5.339, 2.669),
        ("cards.T4 16 GB.serve", 25, 33),
        ("cards.L4 24 GB.serve", 46, 54),
        ("cards.A100 40 GB.serve", 87, 95),
        ("cards.A100/H100 80 GB.serve", 191, 199),
        ("cards.H200 141 GB.serve", 348, 356),
    ]
    assert "| serve weights (GB) | 5.34 | 2.67 | -2.67 (-50.0%) |" in d
    # the next advisory is another repo's: no second or third one for the re-upload
    assert _record(23)["database_specific"]["repo"] == "deepseek-ai/DeepSeek-R1"


def test_custom_code_asks_for_review() -> None:
    for n in (29, 30, 31, 32):
        d = _details(n)
        assert "**Kind: new code to review**" in d
        assert "Review the new code before loading this revision with `trust_remote_code=True`" in d
        # issue 24 part 4: the demo's chatglm2 trees hold no weight files, so no revision of it
        # loads and none is pinned (with `code_revision=`): the advice says so
        assert "`code_revision=`" not in d
        assert "a config.json but no weights transformers loads" in d
        assert d.split("## What to do")[1].count("trust_remote_code=True") == 1  # said once


@pytest.mark.parametrize("n", range(1, 51))
def test_values_whole_and_no_zero_estimate_table(n: int) -> None:
    rec = _record(n)
    d = rec["details"]
    for c in _table_cells(d):
        assert not c.endswith("…") and not c.startswith("…"), c
    assert "| 0 |" not in d  # no estimate row that did not move
    for ch in rec["database_specific"]["changes"]:
        for side in ("before", "after"):
            assert not (isinstance(ch[side], dict) and ch[side].get("truncated")), ch
    assert "**Kind: " in d and "## What to do" in d


def test_a_preflight_answer_found_is_a_low_advisory_that_states_it() -> None:
    """Issue 15: Mixtral's first safetensors upload and bloom-560m's first config.json; the
    capacity and LoRA answers the previous revision could not give were recorded but never
    published."""
    mixtral = _record(15)
    # issue 25: the same revision (model_type mistral -> mixtral) moves what `all-linear` adapts
    # (PEFT adapts the fused experts and routers): that change is high, the answer found low
    assert mixtral["database_specific"]["severity"] == "high"
    assert [
        (c["key"], c["kind"], c["rule"], c["severity"])
        for c in mixtral["database_specific"]["changes"]
    ] == [
        ("preflight.capacity", "added", "preflight-answer-found", "low"),
        ("preflight.lora.all-linear", "changed", "preflight-lora-targets", "high"),
    ]
    assert (
        "- **low** (preflight-answer-found): what it takes to fetch and hold is now known: 2.00 "
        "bytes/parameter: 4-bit weights would take 4.0× less; weights 93.41 GB; download 93.41 "
        "GB, 0.21 h at 126 MB/s; weights-only cards: T4 16 GB 6, L4 24 GB 4, A100 40 GB 3, "
        "A100/H100 80 GB 2, H200 141 GB 1; held by 8 × H200 141 GB, 8 × B200 180 GB (unknown at "
        "the previous revision: no safetensors headers (nothing to count bytes from))"
    ) in mixtral["details"]
    bloom = _record(40)
    changes = bloom["database_specific"]["changes"]
    assert [c["key"] for c in changes] == [
        "preflight.capacity",
        *(
            f"preflight.lora.{t}"
            for t in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
        ),
        "preflight.lora.all-linear",
    ]
    assert {(c["kind"], c["severity"]) for c in changes} == {("added", "low")}
    # BLOOM names its projections query_key_value / dense / dense_h_to_4h / dense_4h_to_h
    assert changes[1]["after"] == {} and changes[-1]["after"] == {
        "attention.full": 48,
        "mlp.dense": 48,
    }
    assert (
        "`all-linear` now resolves to 48 modules in the full-attention layers, 48 in the dense "
        "MLPs (unresolved at the previous revision: no config.json)" in bloom["details"]
    )
    assert (
        "`q_proj` now resolves to 0 modules (unresolved at the previous revision"
        in bloom["details"]
    )
    # nothing to pin: the previous revision lacked config.json (hostile review); Mixtral's
    # advisory now carries a LoRA change too, so its advice pins the previous revision
    for record in (bloom,):
        advice = record["details"].split("## What to do\n\n", 1)[1]
        assert advice.startswith("Nothing that worked breaks: the previous revision could not")
        assert "pin `" not in advice
