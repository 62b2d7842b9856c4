"""The repo page of a GGUF repo (issue 28, item 3 on the page): a per-quant fit table from the
stored headers, read in Chromium, at each revision: the Q4_K_M file alone, then with a Q8_0 beside
it, then the Q4_K_M file re-quantized under its name, whose estimate delta shows in the timeline
where a safetensors repo's do. Each page passes axe, the Nu Html Checker and a phone's width. The
repo: DeepSeek-R1-Distill-Qwen-32B's real config.json and template in GGUF files written by gguf-py
(tests/ingest/ggufkit.py, the same stand-in small shapes as test_gguf_history_cli)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import _serve
from pagekit import (
    ARTIFACTS,
    axe_serious,
    phone_layout,
    phone_overflow,
    visit,
    vnu_errors,
    vnu_start,
)

sys.path.insert(0, str(Path(__file__).parents[1] / "ingest"))
from ggufkit import CORPUS, Q, write_qwen_like

pytestmark = pytest.mark.slow

RID = "acme/R1-Distill-Qwen-32B-GGUF"
MODEL = CORPUS / "models/deepseek-ai__DeepSeek-R1-Distill-Qwen-32B"
TEMPLATE = (
    CORPUS / "histories/llamacpp__deepseek-ai-DeepSeek-R1-Distill-Qwen-32B"
    / "02_c7f460ab_deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"
).read_text()  # fmt: skip
Q4 = "DeepSeek-R1-Distill-Qwen-32B-Q4_K_M.gguf"
Q8 = "DeepSeek-R1-Distill-Qwen-32B-Q8_0.gguf"
T0 = datetime(2025, 2, 1, tzinfo=UTC)

_ROWS = """
const t = document.getElementById('gguf-fit');
if (!t) return null;
return [[...t.querySelectorAll('thead th')].map(th => th.textContent.trim())].concat(
  [...t.querySelectorAll('tbody tr')].map(tr =>
    [...tr.querySelectorAll('th, td')].map(c => c.textContent.trim())));
"""


_DELTA = """
const li = document.getElementById('rev-' + arguments[0]);
return li ? li.textContent.replace(/\\s+/g, ' ') : null;
"""


def _gguf(work: Path, name: str, quant: Q) -> bytes:
    (path,) = write_qwen_like(
        work / name, config=MODEL / "config.json", name="DeepSeek R1 Distill Qwen 32B",
        template=TEMPLATE, added=["<｜end▁of▁sentence｜>", "<｜User｜>"],
        specials={"eos": 151643}, quant=quant,
    )  # fmt: skip
    data = path.read_bytes()
    path.unlink()
    return data


def test_a_gguf_repo_page_shows_the_fit_per_quant_at_each_revision(
    browser: Any, tmp_path: Path
) -> None:
    from tracker.app import build
    from tracker.replica import Replica
    from tracker.replica.repos import commit, init_repo
    from tracker.settings import load_settings

    work = tmp_path / "work"
    work.mkdir()
    repo = init_repo(tmp_path / "hub", RID)
    r1 = commit(repo, {Q4: _gguf(work, Q4, Q.Q4_K)}, "Q4_K_M", date=T0)
    r2 = commit(repo, {Q8: _gguf(work, Q8, Q.Q8_0)}, "Q8_0 too", date=T0 + timedelta(days=1))
    r3 = commit(repo, {Q4: _gguf(work, Q4, Q.Q8_0)}, "Re-upload Q4_K_M",
                date=T0 + timedelta(days=2))  # fmt: skip
    watchlist = tmp_path / "watchlist.yaml"
    watchlist.write_text(f"repos:\n  - id: {RID}\n")
    with Replica(tmp_path / "hub") as hub:
        settings = load_settings(state_dir=tmp_path / "state", watchlist=watchlist,
                                 hf_endpoint=hub.url, hub_public_url="https://huggingface.co")  # fmt: skip
        app = build(settings)
        try:
            assert app.pipeline.run_cycle().unclean == ()
        except BaseException:
            app.close()
            raise
    pages = {"gguf-r1": f"/repos/{RID}?rev={r1}", "gguf-r2": f"/repos/{RID}?rev={r2}",
             "gguf-head": f"/repos/{RID}"}  # fmt: skip
    rows: dict[str, Any] = {}
    try:
        with _serve(app) as url:
            with httpx.Client(base_url=url, timeout=60) as client:
                texts = {name: client.get(path).text for name, path in pages.items()}
            checker = vnu_start(texts, ARTIFACTS / "html")
            try:
                for name, path in pages.items():
                    assert visit(browser, url + path, name) == [], name
                    rows[name] = browser.execute_script(_ROWS)
                    assert axe_serious(browser) == [], name
                    assert phone_overflow(browser) == 0, name
                    assert phone_layout(browser) == [], name
                timeline = browser.execute_script(_DELTA, r3)
                assert vnu_errors(checker) == []
            finally:
                if checker.poll() is None:
                    checker.kill()
                    checker.communicate()
    finally:
        app.close()
    first, second, head = rows["gguf-r1"], rows["gguf-r2"], rows["gguf-head"]
    cards = ["T4 16 GB", "L4 24 GB", "A100 40 GB", "A100/H100 80 GB", "H200 141 GB"]
    assert first[0] == ["File", "Quant", "Weights (bytes)", "KV per token (bytes)",
                        "Context length", *cards]  # fmt: skip
    # Q4_K_M: 2 layers x (6 Q4_K matrices x 576 + a Q6_K ffn_down x 840), Q6_K token_embd and
    # output x 840, 5 F32 norms x 1,024; Q8_0 as in test_gguf_history_cli (14 x 1,088 + ...).
    # KV: 64 layers x 8 KV heads x (128 + 128) x 2 bytes, so the cards' fits are the KV's.
    fits = ["fits at 32k", "fits at 32k", "fits at 128k", "fits at 128k", "fits at 128k"]
    q4 = [Q4, "Q4_K_M", "15,392", "262,144", "131,072", *fits]
    q8 = [Q8, "Q8_0", "22,032", "262,144", "131,072", *fits]
    assert first[1:] == [q4]
    assert second[1:] == [q4, q8]
    # the Q4_K_M file re-quantized to Q8_0 under its name: its weights are the Q8_0 file's
    assert head[1:] == [[Q4, "Q4_K_M", *q8[2:]], q8]
    # and its re-run estimate's delta is in the timeline, at the revision that moved it
    assert "Q4_K_M weight bytes: 15,392 → 22,032 bytes" in timeline
