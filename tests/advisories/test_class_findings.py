"""A class named in `architectures` that the pinned transformers does not define (issue 24, item 2):
bloom-560m's real history names `BloomModelForCausalLM` at 957a865e ("Fix architecture (#46)")
and `BloomForCausalLM` at e985a63c. The finding says what loads and what breaks, and the test
checks each claim against transformers 5.24.0 itself."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from labelkit import CORPUS

from tracker.advisories.consistency import findings_of, introduced, resolved
from tracker.advisories.effects import Context, Side
from tracker.shared.domain import RepoId, Severity, Sha, Snapshot, TreeEntry

BLOOM = CORPUS / "bigscience__bloom-560m"
UNKNOWN = json.loads((BLOOM / "08_957a865e_config.json").read_text())
FIXED = json.loads((BLOOM / "09_e985a63c_config.json").read_text())
TEXT = (
    "`architectures` names `BloomModelForCausalLM`, a class transformers 5.24.0 does not define: "
    "AutoModelForCausalLM.from_pretrained builds `BloomForCausalLM` and works (it picks the "
    'class from `model_type` "bloom", BloomConfig), and `pipeline()` skips the name, but code '
    "that takes the class by this name fails: `transformers serve` "
    "(`getattr(transformers, architectures[0])`) and serving engines that pick their "
    "implementation by it (vLLM)"
)


def _snap(config: dict[str, Any], **extra: bytes) -> Snapshot:
    files = {"config.json": json.dumps(config).encode(), **extra}
    tree = tuple(
        TreeEntry(p, hashlib.sha1(b).hexdigest(), len(b)) for p, b in sorted(files.items())
    )
    sha = hashlib.sha1(repr(sorted(files.items())).encode()).hexdigest()
    return Snapshot(RepoId("t/bloom"), Sha(sha), tree, files)


def _checks(snap: Snapshot) -> list[tuple[str, Severity, str]]:
    return [
        (f.check, f.severity, f.text)
        for f in findings_of(Side(snap))
        if f.check == "architecture-class-unknown"
    ]


def test_an_unknown_class_name_is_a_finding_that_says_what_loads_and_what_breaks() -> None:
    assert _checks(_snap(UNKNOWN)) == [("architecture-class-unknown", Severity.MODERATE, TEXT)]
    assert _checks(_snap(FIXED)) == []


def test_introduced_by_the_renaming_and_resolved_by_the_fix() -> None:
    before, broken, fixed = _snap(json.loads((BLOOM / "07_148e7a5b_config.json").read_text())), \
        _snap(UNKNOWN), _snap(FIXED)  # fmt: skip
    new = [f.text for f in introduced(Context(before, broken)) if f.key == "architectures"]
    assert new == [TEXT]
    gone = [f.text for f in resolved(Context(broken, fixed)) if f.key == "architectures"]
    assert gone == [TEXT]


def test_a_name_the_repo_own_code_defines_is_no_finding() -> None:
    """With an `auto_map` the classes are the repo's own code (loaded under trust_remote_code)."""
    config = {
        **UNKNOWN,
        "auto_map": {"AutoModelForCausalLM": "modeling_bloom.BloomModelForCausalLM"},
    }
    assert _checks(_snap(config, **{"modeling_bloom.py": b"class BloomModelForCausalLM: ...\n"}))\
        == []  # fmt: skip


def test_an_unknown_model_type_too_is_high() -> None:
    config = {**UNKNOWN, "model_type": "bloomz-custom"}
    [(_check, severity, text)] = _checks(_snap(config))
    assert severity is Severity.HIGH
    assert text.startswith(
        "`architectures` names `BloomModelForCausalLM`, a class transformers 5.24.0 does not "
        'define, and `model_type` "bloomz-custom" is not one it has either'
    )


@pytest.mark.slow
def test_each_claim_holds_in_transformers(tmp_path: Any) -> None:
    """Run transformers' own resolution on the real config: AutoModelForCausalLM builds
    BloomForCausalLM (on the meta device, no weights), the pipeline's class lookup skips the name,
    and `transformers serve`'s `getattr(transformers, architectures[0])` fails."""
    transformers = pytest.importorskip("transformers")
    import torch

    (tmp_path / "config.json").write_text(json.dumps(UNKNOWN))
    config = transformers.AutoConfig.from_pretrained(tmp_path)
    assert type(config).__name__ == "BloomConfig"
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    assert type(model).__name__ == "BloomForCausalLM"
    # pipelines/base.py `load_model`: classes named by `architectures` that transformers has
    assert [getattr(transformers, a, None) for a in config.architectures] == [None]
    with pytest.raises(AttributeError):
        getattr(transformers, config.architectures[0])
