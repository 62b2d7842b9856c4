"""The GGUF estimate rerun per revision, with what moved, through the installed `tracker` run as a
process against the Hub replica (issue 28, item 3: "estimates rerun per revision with deltas like
today").

The repo: Llama-2-7b-hf as convert_hf_to_gguf writes it (tests/ingest/ggufkit.py
`llama2_full_size`: the real tokenizer, the tensors at their real shapes; the header is real and
the tensor data the zero-filled rest of a sparse LFS object, under a stand-in oid as in
test_pages_kimi_k3), converted from two real config.json revisions of its history:
5373729f ("Upload LlamaForCausalLM", max_position_embeddings 2048) and 335a0288 ("Update
config.json", 4096). Three revisions: Q4_K_M and Q8_0 converted from the first config; both
re-converted from the second (the context doubles); the Q8_0 file re-uploaded with F16 tensors
under its name (a wrong quant re-uploaded, which no longer fits a T4 at 4k context).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from ggufkit import CORPUS, Q, llama2_full_size

from tracker.replica import Replica
from tracker.replica.repos import LfsPointer, commit, init_repo, write_sparse_lfs_object

pytestmark = pytest.mark.replica

RID = "acme/Llama-2-7B-GGUF"
HISTORY = CORPUS / "histories/meta-llama__Llama-2-7b-hf"
CTX_2K = HISTORY / "02_5373729f_config.json"
CTX_4K = HISTORY / "03_335a0288_config.json"
Q4 = "llama-2-7b.Q4_K_M.gguf"
Q8 = "llama-2-7b.Q8_0.gguf"
T0 = datetime(2023, 9, 4, tzinfo=UTC)
TRACKER = Path(sys.executable).with_name("tracker")  # the installed CLI
CARDS = ["T4 16 GB", "L4 24 GB", "A100 40 GB", "A100/H100 80 GB", "H200 141 GB"]
# 32 layers x 32 KV heads x (128 + 128) values x 2 bytes (llama.cpp's f16 cache)
KV = 32 * 32 * 256 * 2
# Weight bytes, the real shapes' values: 32 layers x (4 attention matrices of 4096 x 4096 and 3
# FFN matrices of 11008 x 4096), token_embd and output of 32000 x 4096, 65 F32 norms of 4096;
# Q4_K is 144 bytes a 256-value block, Q6_K 210 (ffn_down, token_embd, output), Q8_0 34 a 32.
MATRICES, EDGES, NORMS = (
    32 * (4 * 4096**2 + 2 * 11008 * 4096),
    2 * 32000 * 4096 + 32 * 11008 * 4096,
    65 * 4096 * 4,
)
Q4_BYTES = MATRICES * 144 // 256 + EDGES * 210 // 256 + NORMS
Q8_BYTES = (MATRICES + EDGES) * 34 // 32 + NORMS
F16_BYTES = (MATRICES + EDGES) * 2 + NORMS
HEADER = 1_714_560  # the header with its padding to the data's alignment, the same in each file


def _pointer(repo: Path, work: Path, name: str, config: Path, quant: Q) -> LfsPointer:
    size = llama2_full_size(work / name, work, config=config, quant=quant)
    head = (work / name).read_bytes()
    stand_in = hashlib.sha256(head + str(size).encode()).hexdigest()
    return write_sparse_lfs_object(repo, head, size, oid=stand_in)


def test_gguf_estimates_rerun_per_revision_with_what_moved(tmp_path: Path) -> None:
    root, work, state = tmp_path / "hub", tmp_path / "work", tmp_path / "state"
    for d in (root, work, state):
        d.mkdir()
    repo = init_repo(root, RID)
    q4_2k = _pointer(repo, work, Q4, CTX_2K, Q.Q4_K)
    q8_2k = _pointer(repo, work, Q8, CTX_2K, Q.Q8_0)
    q4_4k = _pointer(repo, work, Q4, CTX_4K, Q.Q4_K)
    q8_4k = _pointer(repo, work, Q8, CTX_4K, Q.Q8_0)
    f16_4k = _pointer(repo, work, Q8, CTX_4K, Q.F16)
    assert (q4_2k.size, q8_2k.size, f16_4k.size) == (
        HEADER + Q4_BYTES,
        HEADER + Q8_BYTES,
        HEADER + F16_BYTES,
    )
    assert (Q4_BYTES, Q8_BYTES, F16_BYTES) == (4_230_840_320, 7_160_348_672, 13_477_363_712)
    shas = [
        commit(repo, {Q4: q4_2k, Q8: q8_2k}, "Upload Q4_K_M and Q8_0", date=T0),
        commit(repo, {Q4: q4_4k, Q8: q8_4k}, "Re-convert: config.json says 4096 positions",
               date=T0 + timedelta(days=1)),
        commit(repo, {Q8: f16_4k}, "Re-upload Q8_0", date=T0 + timedelta(days=2)),
    ]  # fmt: skip
    (tmp_path / "watchlist.yaml").write_text(f"repos:\n  - id: {RID}\n")
    with Replica(root) as hub:

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            env = dict(os.environ, TRACKER_STATE_DIR=str(state), TRACKER_HF_ENDPOINT=hub.url,
                       TRACKER_WATCHLIST=str(tmp_path / "watchlist.yaml"))  # fmt: skip
            return subprocess.run([str(TRACKER), *args], capture_output=True, text=True,
                                  env=env, timeout=600, check=False)  # fmt: skip

        polled = run("poll", "--once", "--json")
        assert polled.returncode == 0, polled.stderr
        (report,) = json.loads(polled.stdout)
        assert report["status"] == "ok" and report["revisions_ingested"] == 3

        # 2k → 4k context: both files hold twice the context on every card (2,048 tokens of KV
        # are 1.07 GB, 4,096 are 2.15 GB: Q8_0's 7.16 GB + 2.15 GB fit a T4's 13.9 GB)
        adv = run("advisories", "list", "--json")
        assert adv.returncode == 0, adv.stderr
        listed = json.loads(adv.stdout)
        assert [(a["group"], a["severity"], a["introduced"], a["summary"]) for a in listed] == [
            ("config", "moderate", shas[1],
             f"{RID}: config changed (2 changes: llama.context_length)"),
            ("config", "moderate", shas[2], f"{RID}: config: general.file_type 7 → 1 in {Q8}"),
            ("weights", "high", shas[2], f"{RID}: weights: GGUF model {Q8} re-quantized: 65 F32, "
             "226 Q8_0 → 226 F16, 65 F32"),
            # the lost fit is an advisory of its own, high as a safetensors repo's (card-fit-lost)
            ("estimate", "high", shas[2], f"{RID}: estimate: 1 card setup no longer fits"),
        ]  # fmt: skip

        def moved(advisory_id: str) -> list[tuple[Any, ...]]:
            shown = run("advisories", "show", advisory_id, "--json")
            assert shown.returncode == 0, shown.stderr
            record = json.loads(shown.stdout)
            specific = record["database_specific"]
            return [
                (
                    c["kind"],
                    c["file"],
                    c["key"],
                    c["before"],
                    c["after"],
                    c["severity"],
                    c["summary"],
                )
                for c in specific["changes"] + specific["estimate_changes"]
                if c["artifact"] == "estimate"
            ]

        # 2k → 4k context: both files hold twice the context on every card (2,048 tokens of KV
        # are 1.07 GB, 4,096 are 2.15 GB: Q8_0's 7.16 GB + 2.15 GB fit a T4's 13.9 GB)
        want = []
        for path, quant in ((Q4, "Q4_K_M"), (Q8, "Q8_0")):
            want.append(("changed", path, "gguf.context_length", 2048, 4096, "low",
                         f"{quant} context length: 2,048 → 4,096 tokens"))  # fmt: skip
            want += [
                ("changed", path, f"gguf.cards.{card}", 2048, 4096, "low",
                 f"{quant} on {card}: fits at 2k context → fits at 4k context, batch 1")
                for card in CARDS
            ]  # fmt: skip
        assert moved(listed[0]["id"]) == want

        # F16 tensors under the Q8_0 name: 13.48 GB + 2.15 GB of KV is over a T4's 16 GB / 1.15;
        # every other card still holds 4k, so nothing else moves
        assert KV * 4096 + F16_BYTES > 16e9 / 1.15 > KV * 4096 + Q8_BYTES
        lost = ("fit_lost", Q8, "gguf.cards.T4 16 GB", 4096, 0, "high",
                "Q8_0 no longer fits T4 16 GB at 4k context, batch 1 (now: does not fit at any "
                "context)")  # fmt: skip
        weights = ("changed", Q8, "gguf.weight_bytes", Q8_BYTES, F16_BYTES, "low",
                   f"Q8_0 weight bytes: {Q8_BYTES:,} → {F16_BYTES:,} bytes")  # fmt: skip
        assert moved(listed[3]["id"]) == [lost, weights]
        assert moved(listed[2]["id"]) == [weights, lost]  # listed with the re-quantization

        # what the estimate says at each revision agrees with the deltas
        for sha, fits in ((shas[0], [(2048, True)]), (shas[1], [(4096, True)]),
                          (shas[2], [(4096, False)])):  # fmt: skip
            est = run("estimate", f"{RID}@{sha}", "--json")
            assert est.returncode == 0, est.stderr
            q8 = next(q for q in json.loads(est.stdout)["quants"] if q["file"] == Q8)
            t4 = next(c for c in q8["cards"] if c["name"] == "T4 16 GB")
            assert [(f["context"], f["fits"]) for f in t4["fits"]] == fits
