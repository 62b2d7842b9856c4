"""The quant census of a GGUF model (issue 28, item 2): per ggml type, its tensor count and bytes,
from headers llama.cpp's gguf-py wrote (ggufkit: Llama-2-7b-hf's real config and tokenizer, one
layer of stand-in small tensor shapes), read by tracker's parser. A re-quantization under the same
file name is a weights change of its census (rule gguf-requantized, high); a quant file removed
while the repo keeps others breaks only its own users (gguf-quant-removed, high), the last one
removed leaves nothing (gguf-last-removed, critical); one added is a new download (low)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from ggufkit import Q, write_llama2

from tracker.advisories.classify import classify
from tracker.advisories.effects import Context
from tracker.diff.gguf import diff_gguf
from tracker.shared.domain import (
    Artifact,
    ChangeKind,
    GGUFHeader,
    RepoId,
    Severity,
    Sha,
    Snapshot,
    TreeEntry,
)
from tracker.sources.gguf import parse_gguf_bytes

Q4, Q8 = "llama-2-7b.Q4_K_M.gguf", "llama-2-7b.Q8_0.gguf"


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    work = tmp_path_factory.mktemp("census")
    (q4,) = write_llama2(work / Q4, work, layers=1, quant=Q.Q4_K)
    (q8,) = write_llama2(work / Q8, work, layers=1, quant=Q.Q8_0)
    return {"q4": q4, "q8": q8}


@pytest.fixture(scope="module")
def headers(written: dict[str, Path]) -> dict[str, GGUFHeader]:
    out = {}
    for name, path in written.items():
        data = path.read_bytes()
        out[name] = parse_gguf_bytes(data, max_bytes=100_000_000, file_size=len(data))
    return out


def _snap(sha: str, gguf: dict[str, GGUFHeader], reuploaded: str = "") -> Snapshot:
    """A revision holding `gguf`; a file's blob id follows its header (the same header, the same
    bytes) unless it is `reuploaded` (other bytes under the same header)."""
    tree = tuple(TreeEntry(p, hashlib.sha1(repr(gguf[p]).encode() + (sha * (p == reuploaded)).encode()).hexdigest(), 10**9)
                 for p in sorted(gguf))  # fmt: skip
    return Snapshot(RepoId("acme/llama-gguf"), Sha(sha * 40), tree, {}, gguf=gguf)


def test_census_counts_and_bytes_per_ggml_type(headers: dict[str, GGUFHeader]) -> None:
    # one layer as ggufkit writes it: token_embd and output Q6_K; attn_q/k/v/output, ffn_gate/up
    # Q4_K (Q4_K_M's ffn_down Q6_K); 3 norms F32. A 4 x 256 matrix is 4 blocks: Q4_K 144 bytes,
    # Q6_K 210, Q8_0 (32-element blocks of 34 bytes) 8 x 34 per row; a 256 F32 norm 1,024 bytes
    (model,) = _snap("a", {Q4: headers["q4"]}).gguf_models.values()
    assert model.quant_census == {"F32": (3, 3 * 1024), "Q4_K": (6, 6 * 4 * 144),
                                  "Q6_K": (3, 3 * 4 * 210)}  # fmt: skip
    (q8,) = _snap("a", {Q4: headers["q8"]}).gguf_models.values()
    assert q8.quant_census == {"F32": (3, 3 * 1024), "Q6_K": (2, 2 * 4 * 210),
                               "Q8_0": (7, 7 * 4 * 8 * 34)}  # fmt: skip


def test_requantized_under_the_same_name_is_a_census_change(
    headers: dict[str, GGUFHeader],
) -> None:
    before, after = _snap("a", {Q4: headers["q4"]}), _snap("b", {Q4: headers["q8"]})
    changes = diff_gguf(before, after)
    # the header's own file-type key moves with it (a config change of its own)
    assert [(c.artifact, c.key) for c in changes] == [
        (Artifact.CONFIG, "general.file_type"), (Artifact.WEIGHTS, "quant_census"),
    ]  # fmt: skip
    change = changes[1]
    assert (change.artifact, change.kind, change.file, change.key) == (
        Artifact.WEIGHTS, ChangeKind.CHANGED, Q4, "quant_census",
    )  # fmt: skip
    assert change.before == {"F32": {"tensors": 3, "bytes": 3072},
                             "Q4_K": {"tensors": 6, "bytes": 3456},
                             "Q6_K": {"tensors": 3, "bytes": 2520}}  # fmt: skip
    assert change.after == {"F32": {"tensors": 3, "bytes": 3072},
                            "Q6_K": {"tensors": 2, "bytes": 1680},
                            "Q8_0": {"tensors": 7, "bytes": 7616}}  # fmt: skip
    assert change.summary == (
        f"GGUF model {Q4} re-quantized: 3 F32, 6 Q4_K, 3 Q6_K → 3 F32, 2 Q6_K, 7 Q8_0"
    )
    assert change.detail == "\n".join([
        "- Q4_K: 6 tensors, 3,456 bytes", "- Q6_K: 3 tensors, 2,520 bytes",
        "+ Q6_K: 2 tensors, 1,680 bytes", "+ Q8_0: 7 tensors, 7,616 bytes",
    ])  # fmt: skip
    got = classify(change, context=Context(before, after))
    assert (got.rule, got.severity) == ("gguf-requantized", Severity.HIGH)
    # the same file again is no change; other bytes under the same header are a re-upload
    assert diff_gguf(before, _snap("c", {Q4: headers["q4"]})) == []
    again = _snap("c", {Q4: headers["q4"]}, reuploaded=Q4)
    (reupload,) = diff_gguf(before, again)
    assert (reupload.artifact, reupload.kind, reupload.file, reupload.key) == (
        Artifact.WEIGHTS, ChangeKind.CHANGED, Q4, "reuploaded")  # fmt: skip
    assert (
        reupload.summary
        == f"GGUF model {Q4} re-uploaded: {Q4} changed content with the same header"
    )
    assert reupload.detail == f"{Q4}: {before.tree[0].identity} → {again.tree[0].identity}"
    got = classify(reupload, context=Context(before, again))
    assert (got.rule, got.severity) == ("gguf-reuploaded", Severity.LOW)


def test_a_quant_removed_from_several_is_high_the_last_critical_one_added_low(
    headers: dict[str, GGUFHeader],
) -> None:
    both = _snap("a", {Q4: headers["q4"], Q8: headers["q8"]})
    only_q8 = _snap("b", {Q8: headers["q8"]})
    (removed,) = diff_gguf(both, only_q8)
    assert (removed.kind, removed.file) == (ChangeKind.REMOVED, Q4)
    got = classify(removed, context=Context(both, only_q8))
    assert (got.rule, got.severity) == ("gguf-quant-removed", Severity.HIGH)
    assert f"1 other GGUF model remains: {Q8}" in got.rationale
    none = _snap("c", {})
    (last,) = diff_gguf(only_q8, none)
    got = classify(last, context=Context(only_q8, none))
    assert (got.rule, got.severity) == ("gguf-last-removed", Severity.CRITICAL)
    (added,) = diff_gguf(only_q8, both)
    assert (added.kind, added.file) == (ChangeKind.ADDED, Q4)
    got = classify(added, context=Context(only_q8, both))
    assert (got.rule, got.severity) == ("gguf-quant-added", Severity.LOW)


def test_estimate_of_a_local_gguf_file_through_the_installed_cli(written: dict[str, Path]) -> None:
    """`tracker estimate FILE.gguf --json` reads the header from disk: weight bytes exact (the
    census above: 9,048), KV cache from Llama-2-7b's real numbers in the header (32 layers x 32
    KV heads x (128 + 128) x 2 bytes = 524,288 a token), its 4,096-token context on every card."""
    tracker = Path(sys.executable).with_name("tracker")
    out = subprocess.run([str(tracker), "estimate", str(written["q4"]), "--json"],
                         capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert out.returncode == 0, out.stderr
    (q4,) = json.loads(out.stdout)["quants"]
    assert (q4["file"], q4["quant"], q4["weight_bytes"]) == (Q4, "Q4_K_M", 3072 + 3456 + 2520)
    assert q4["kv_bytes_per_token"] == 32 * 32 * 256 * 2 == 524_288
    assert [(c["name"], c["fits"]) for c in q4["cards"]][:2] == [
        ("T4 16 GB", [{"context": 4096, "need_bytes": 9048 + 524_288 * 4096, "fits": True}]),
        ("L4 24 GB", [{"context": 4096, "need_bytes": 9048 + 524_288 * 4096, "fits": True}]),
    ]
    assert q4["summary"][1] == "Q4_K_M fits L4 24 GB at 4k context, batch 1"
    text = subprocess.run([str(tracker), "estimate", str(written["q4"])],
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert text.returncode == 0, text.stderr
    assert f"{Q4}: 9,048 weight bytes, 524,288 KV bytes a token" in text.stdout.splitlines()


def test_gguf_delta_says_a_card_gained_and_nothing_when_nothing_moved() -> None:
    """`gguf_delta` on estimates as values: a card that held no context now holds one
    (FIT_GAINED); an unchanged model and a model at one side only give nothing."""
    from tracker.estimate.gguf import ContextFit, GGUFEstimate, gguf_delta

    def est(weights: int, t4: tuple[bool, bool]) -> GGUFEstimate:
        fits = {
            "T4 16 GB": (ContextFit(4096, weights + 1, t4[0]), ContextFit(8192, weights + 2, t4[1]))
        }
        return GGUFEstimate("m-Q4_K_M.gguf", "Q4_K_M", weights, {}, 10, 8192, fits)

    before = {"m-Q4_K_M.gguf": est(100, (False, False)), "gone.gguf": est(1, (True, True))}
    after = {"m-Q4_K_M.gguf": est(90, (True, False)), "new.gguf": est(1, (True, True))}
    assert [(c.kind.value, c.file, c.key, c.before, c.after, c.summary) for c in gguf_delta(before, after)] == [
        ("changed", "m-Q4_K_M.gguf", "gguf.weight_bytes", 100, 90, "Q4_K_M weight bytes: 100 → 90 bytes"),
        ("fit_gained", "m-Q4_K_M.gguf", "gguf.cards.T4 16 GB", 0, 4096,
         "Q4_K_M now fits T4 16 GB at 4k context, batch 1"),
    ]  # fmt: skip
    assert gguf_delta(after, after) == ()
