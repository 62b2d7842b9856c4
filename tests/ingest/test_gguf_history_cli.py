"""A GGUF repo's history through the installed `tracker`, run as a process against the Hub replica
(issue 28, item 2, first part): a re-upload with a fixed chat template, one with another eos id,
and a quant added with one removed each show in `tracker diff` as the changes they are.

The repo: DeepSeek-R1-Distill-Qwen-32B's real config.json; its chat template as llama.cpp captured
it from the Hub (corpus history llamacpp__deepseek-ai-DeepSeek-R1-Distill-Qwen-32B, version 01) and
llama.cpp's fix of it (version 02, "fix tool-call of DeepSeek R1 Qwen"); STAND-IN: the 151,643
base tokens (ggufkit.stand_in_vocab) and the added tokens' order (DeepSeek's names, from
`<｜end▁of▁sentence｜>` at 151643), the corpus holding no tokenizer.json of it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import gguf
import pytest
from ggufkit import CORPUS, Q, write_qwen_like

from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo

pytestmark = pytest.mark.replica

RID = "acme/R1-Distill-Qwen-32B-GGUF"
CONFIG = CORPUS / "models/deepseek-ai__DeepSeek-R1-Distill-Qwen-32B/config.json"
HISTORY = CORPUS / "histories/llamacpp__deepseek-ai-DeepSeek-R1-Distill-Qwen-32B"
OLD_TEMPLATE = (HISTORY / "01_8b576b6c_deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja").read_text()
FIXED = (HISTORY / "02_c7f460ab_deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja").read_text()
ADDED = ["<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<｜begin▁of▁sentence｜>",
         "<|EOT|>", "<think>", "</think>"]  # fmt: skip
Q4 = "DeepSeek-R1-Distill-Qwen-32B-Q4_K_M.gguf"
Q8 = "DeepSeek-R1-Distill-Qwen-32B-Q8_0.gguf"
T0 = datetime(2025, 2, 1, tzinfo=UTC)
TRACKER = Path(sys.executable).with_name("tracker")  # the installed CLI


def _gguf(
    work: Path, name: str, template: str, eos: int, quant: Q = Q.Q4_K, weights: bytes = b""
) -> bytes:
    """The file's bytes; `weights` overwrite the start of its tensor data (gguf-py's reader finds
    where it starts)."""
    (path,) = write_qwen_like(
        work / name, config=CONFIG, name="DeepSeek R1 Distill Qwen 32B", template=template,
        added=ADDED, specials={"bos": 151646, "eos": eos, "pad": 151643}, quant=quant,
    )  # fmt: skip
    data = bytearray(path.read_bytes())
    if weights:
        start = gguf.GGUFReader(path).data_offset
        data[start : start + len(weights)] = weights
    path.unlink()
    return bytes(data)


def _changes(run: Any, a: str, b: str) -> list[dict[str, Any]]:
    out = run("diff", RID, a, b, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["changes"]  # type: ignore[no-any-return]


def test_gguf_history_shows_template_fix_eos_change_and_quant_set(tmp_path: Path) -> None:
    root, work, state = tmp_path / "hub", tmp_path / "work", tmp_path / "state"
    for d in (root, work, state):
        d.mkdir()
    repo = init_repo(root, RID)
    card = b"---\nbase_model: deepseek-ai/DeepSeek-R1-Distill-Qwen-32B\n---\n# GGUF\n"
    shas = [
        commit(repo, {"README.md": card, Q4: _gguf(work, Q4, OLD_TEMPLATE, 151643)}, "Upload Q4_K_M",
               date=T0),
        commit(repo, {Q4: _gguf(work, Q4, FIXED, 151643)}, "Re-upload: template fix",
               date=T0 + timedelta(days=1)),
        commit(repo, {Q4: _gguf(work, Q4, FIXED, 151647)}, "Re-upload: eos",
               date=T0 + timedelta(days=2)),
        commit(repo, {Q4: None, Q8: _gguf(work, Q8, FIXED, 151647, Q.Q8_0)}, "Q8_0 instead",
               date=T0 + timedelta(days=3)),
        # the same file with other weights: its first tensor's first block rewritten, the header
        # untouched (what a re-quantization with another importance matrix uploads)
        commit(repo, {Q8: _gguf(work, Q8, FIXED, 151647, Q.Q8_0, weights=b"\x11" * 64)},
               "Re-upload Q8_0", date=T0 + timedelta(days=4)),
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
        assert report["status"] == "ok" and report["revisions_ingested"] == 5

        fix = _changes(run, shas[0], shas[1])
        source = [c for c in fix if c["artifact"] == "chat_template" and c["key"] == "source"]
        assert [(c["kind"], c["file"]) for c in source] == [("changed", Q4)]
        assert source[0]["summary"].startswith("chat template source changed")
        assert f"--- a/{Q4}#chat_template" in source[0]["detail"]
        assert {c["artifact"] for c in fix} == {"chat_template"}  # nothing else moved

        eos = _changes(run, shas[1], shas[2])
        ids = [c for c in eos if c["artifact"] == "special_tokens"]
        assert [(c["kind"], c["key"], c["before"], c["after"]) for c in ids] == [
            ("changed", "eos_token_id", {"id": 151643, "token": "<｜end▁of▁sentence｜>"},
             {"id": 151647, "token": "<|EOT|>"}),
        ]  # fmt: skip
        assert ids[0]["file"] == Q4 and "eos_token_id 151643" in ids[0]["summary"]

        # the stored header, as `tracker show` prints it: canonical JSON, lists as digests
        shown = run("show", f"{RID}@{shas[3][:12]}", Q8)
        assert shown.returncode == 0, shown.stderr
        header = json.loads(shown.stdout)
        assert header["format"] == "gguf" and header["version"] == 3
        assert header["metadata"]["tokenizer.ggml.eos_token_id"] == {
            "type": "uint32",
            "value": 151647,
        }
        tokens = header["metadata"]["tokenizer.ggml.tokens"]
        assert tokens["type"] == "array[string]" and tokens["digest"]["count"] == 151_650
        assert tokens["digest"]["special"] == {"151643": "<｜end▁of▁sentence｜>",
                                               "151646": "<｜begin▁of▁sentence｜>",
                                               "151647": "<|EOT|>"}  # fmt: skip
        assert header["tensors"]["blk.0.attn_q.weight"]["type"] == "Q8_0"

        quants = _changes(run, shas[2], shas[3])
        files = sorted((c["kind"], c["file"]) for c in quants if c["artifact"] == "weights")
        assert ("added", Q8) in files and ("removed", Q4) in files
        # and each is an advisory of the artifact it changed, on the commit that changed it
        adv = run("advisories", "list", "--json")
        assert adv.returncode == 0, adv.stderr
        got = [(a["group"], a["severity"], a["introduced"], a["state"])
               for a in json.loads(adv.stdout)]  # fmt: skip
        assert got == [
            ("chat_template", "high", shas[1], "open"),
            ("special_tokens", "high", shas[2], "open"),
            ("weights", "high", shas[3], "open"),
            ("weights", "low", shas[4], "open"),
        ]
        reupload = _changes(run, shas[3], shas[4])
        oids = [c["after"] for c in reupload]
        assert [(c["artifact"], c["kind"], c["file"], c["key"], c["summary"]) for c in reupload] == [
            ("weights", "changed", Q8, "reuploaded",
             f"GGUF model {Q8} re-uploaded: {Q8} changed content with the same header"),
        ]  # fmt: skip
        assert reupload[0]["before"] != oids[0] and list(oids[0]) == [Q8]
        low = json.loads(
            run("advisories", "show", json.loads(adv.stdout)[3]["id"], "--json").stdout
        )
        assert (
            low["summary"]
            == f"{RID}: weights: GGUF model {Q8} re-uploaded: {Q8} changed content with the same header"
        )
        assert [(c["rule"], c["severity"]) for c in low["database_specific"]["changes"]] == [
            ("gguf-reuploaded", "low")
        ]
        assert "re-uploaded with other bytes under an unchanged header" in low["details"]
        summary = json.loads(adv.stdout)[1]["summary"]
        assert summary == (
            f"{RID}: special tokens: eos_token_id 151643 ('<｜end▁of▁sentence｜>') → 151647 "
            f"('<|EOT|>') in {Q4}"
        )

        # the estimate at HEAD, from the stored header alone (issue 28, item 3): weight bytes the
        # sum of the Q8_0 file's tensors (ggufkit's stand-in small shapes, 2 layers: Q6_K
        # token_embd and output 2 x 840, 14 Q8_0 matrices x 1,088, 5 F32 norms x 1,024), KV
        # cache from the real config's numbers: 64 layers x 8 KV heads x (128 + 128) x 2 bytes
        est = run("estimate", RID, "--json")
        assert est.returncode == 0, est.stderr
        data = json.loads(est.stdout)
        (q8,) = data["quants"]
        assert (q8["file"], q8["quant"]) == (Q8, "Q8_0") and data["unreadable"] == []
        assert q8["weight_bytes"] == 2 * 840 + 14 * 1088 + 5 * 1024 == 22_032
        assert q8["census"] == {"F32": {"tensors": 5, "bytes": 5120},
                                "Q6_K": {"tensors": 2, "bytes": 1680},
                                "Q8_0": {"tensors": 14, "bytes": 15232}}  # fmt: skip
        assert q8["kv_bytes_per_token"] == 64 * 8 * 256 * 2 == 262_144
        assert q8["context_length"] == 131_072
        # L4: 24e9 / 1.15 = 20.9e9 bytes hold 32k tokens' 8.6 GB, not 128k's 34.4 GB
        l4 = next(c for c in q8["cards"] if c["name"] == "L4 24 GB")
        assert [(f["context"], f["need_bytes"], f["fits"]) for f in l4["fits"]] == [
            (4096, 22_032 + 262_144 * 4096, True),
            (8192, 22_032 + 262_144 * 8192, True),
            (32768, 22_032 + 262_144 * 32768, True),
            (131072, 22_032 + 262_144 * 131072, False),
        ]
        assert q8["summary"] == [
            "Q8_0 fits T4 16 GB at 32k context, batch 1",
            "Q8_0 fits L4 24 GB at 32k context, batch 1",
            "Q8_0 fits A100 40 GB at 128k context, batch 1",
            "Q8_0 fits A100/H100 80 GB at 128k context, batch 1",
            "Q8_0 fits H200 141 GB at 128k context, batch 1",
        ]
