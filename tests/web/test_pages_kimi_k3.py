"""Kimi-K3 as shipped, through the whole pipeline (issue 25, item 4): its MXFP4 checkpoint
(tests/estimate/kimi_k3_checkpoint.py: headers of its layout built from its real config, 64
shards, index total_size 1,560,726,660,224 bytes) is committed to a replica Hub repo, then a
second revision deletes one shard's file. Polled by the real pipeline, the repo page (HTTP +
HTML), `tracker estimate ORG/NAME@REV --json` and `tracker preflight ORG/NAME@REV --json` (the
installed CLI over the store) say 1,560.727 GB as shipped at both revisions; only the census
verdict differs.

The shards are sparse LFS objects (the header, then a hole). Their oids stand in for the sha256
of 1.56 TB of zeros, which nothing computes: tracker checks a header by the sizes and the oid the
server declares, never by hashing the weights (tracker/ingest/integrity.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).parents[1] / "estimate"))
from kimi_k3_checkpoint import CONFIG, tensors

# the long form of tests/estimate/test_estimate_shipped.py (which says the same of the CLI), with
# the page: `make soak`
pytestmark = [pytest.mark.slow, pytest.mark.soak]

REPO = "moonshotai/Kimi-K3"
TOTAL_SIZE = 1_560_726_660_224
TRACKER = Path(sys.executable).with_name("tracker")


def _cli(env: dict[str, str], *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [str(TRACKER), *args], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def _value(page: str, id_: str) -> float:
    m = re.search(rf'id="{id_}" data-value="([0-9.]+)"', page)
    assert m, f"no #{id_} on the page"
    return float(m.group(1))


def test_kimi_k3_page_estimate_and_preflight_say_its_shipped_bytes(
    tmp_path: Path,
) -> None:
    from tracker.api import create_app
    from tracker.app import build
    from tracker.replica import Replica
    from tracker.replica.repos import commit, init_repo, write_sparse_lfs_object
    from tracker.replica.stgen import build_shards, index_json, shard_evenly
    from tracker.settings import load_settings

    config = json.loads(CONFIG.read_text())
    layout = shard_evenly(tensors(config), 64)
    repo = init_repo(tmp_path / "hub", REPO)
    files: dict[str, Any] = {
        "config.json": json.dumps(config, indent=2).encode(),
        "model.safetensors.index.json": index_json(layout),
    }
    for shard in build_shards(layout):
        stand_in = hashlib.sha256(shard.head + str(shard.size).encode()).hexdigest()
        files[shard.path] = write_sparse_lfs_object(repo, shard.head, shard.size, oid=stand_in)
    day = datetime(2026, 7, 28, tzinfo=UTC)
    first = commit(repo, files, "Upload Kimi-K3", date=day)
    dropped = "model-00017-of-00064.safetensors"
    second = commit(repo, {dropped: None}, "Remove a shard", date=day.replace(day=29))
    watchlist = tmp_path / "watchlist.yaml"
    watchlist.write_text(f"repos:\n  - id: {REPO}\n")
    with Replica(tmp_path / "hub") as hub:
        settings = load_settings(
            state_dir=tmp_path / "state",
            watchlist=watchlist,
            hf_endpoint=hub.url,
            hub_public_url="https://huggingface.co",
        )
        app = build(settings)
        try:
            report = app.pipeline.run_cycle()
            assert not report.unclean, report.unclean_line()
            client = TestClient(create_app(app))
            pages = {
                sha: client.get(f"/repos/{REPO}", params={"rev": sha}).text
                for sha in (first, second)
            }
        finally:
            app.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env["TRACKER_STATE_DIR"] = str(tmp_path / "state")
    env["TRACKER_WATCHLIST"] = str(watchlist)
    answers = {}
    for sha in (first, second):
        est = _cli(env, "estimate", f"{REPO}@{sha}", "--json")
        pre = _cli(env, "preflight", f"{REPO}@{sha}", "--json")
        page = pages[sha]
        m = est["memory_gb"]
        assert m["serve_weights"] == 1560.727 == round(TOTAL_SIZE / 1e9, 3)
        assert pre["capacity"]["weights_bytes"] == TOTAL_SIZE
        assert _value(page, "serve-weights") == m["serve_weights"]
        assert _value(page, "serve-weights-upcast") == m["serve_weights_upcast"] == 5559.864
        assert "Serving weights, upcast to bf16" in page
        answers[sha] = est
    assert answers[first]["verification"]["status"] == "verified"
    assert answers[second]["verification"]["status"] == "unverified"
    assert 'id="unverified"' not in pages[first]
    assert 'id="unverified"' in pages[second]
    a, b = dict(answers[first]), dict(answers[second])
    for key in ("checkpoint", "verification", "source"):
        a.pop(key)
        b.pop(key)
    assert a == b
