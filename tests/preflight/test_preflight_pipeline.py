"""Preflight on every revision, where users meet it: the installed `tracker` polls a Hub replica.

The repo's history is ours, on a real config (Qwen3-0.6B from the corpus; its weights a small
stand-in whose header alone matters): an upload whose remote code imports fine everywhere; a
revision whose modeling file starts importing `transformers.utils.import_utils.
is_torch_fx_available` (as DeepSeek-V3's remote code does; gone since transformers 5.1.0), which
is a high advisory naming the name, the module that lacks it and the version it vanished in; a
re-upload of the weights in FP8 (bytes per parameter 2.00 → 1.00: a capacity advisory with before →
after); and a config that drops two layers (every LoRA target resolves to two modules fewer).
Each revision's preflight is stored; `tracker preflight ORG/NAME@REV` answers from the store with no
network (full sha, short sha, HEAD~n) and the same from the Hub with `--hub`.
"""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo

from .conftest import VERSIONS
from .test_preflight_symbols import CONFIGURATION

pytestmark = [pytest.mark.replica, pytest.mark.slow]

TRACKER = Path(sys.executable).with_name("tracker")
CONFIGS = Path(__file__).parents[1] / "data" / "configs"
REPO = "acme/qwen3-remote"
T0 = datetime(2025, 6, 1, tzinfo=UTC)
VANISHED = "transformers.utils.import_utils.is_torch_fx_available"
CLEAN = b"import torch\nfrom transformers.modeling_utils import PreTrainedModel\nfrom .configuration_x import XConfig\n\n\nclass XForCausalLM(PreTrainedModel):\n    config_class = XConfig\n"
BROKEN = CLEAN.replace(
    b"from .configuration_x",
    b"from transformers.utils.import_utils import is_torch_fx_available\nfrom .configuration_x",
)


def safetensors(dtype: str, size: int, n: int) -> bytes:
    """A real safetensors file: one tensor of `n` elements of `dtype` (`size` bytes each)."""
    header = {
        "model.embed_tokens.weight": {"dtype": dtype, "shape": [n], "data_offsets": [0, n * size]}
    }
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + b"\0" * (n * size)


def tracker_env(tmp_path: Path, watchlist: Path, cache: Path | None = None) -> dict[str, str]:
    """The environment of the installed `tracker` over `tmp_path`'s state: no inherited
    TRACKER_/HF_ settings, one attempt per request, preflight wheels from `cache` only (the
    package index is a folder that does not exist)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env |= {
        "TRACKER_STATE_DIR": str(tmp_path / "state"),
        "TRACKER_WATCHLIST": str(watchlist),
        "TRACKER_RETRY_ATTEMPTS": "1",
        "TRACKER_PREFLIGHT_INDEX_URL": (tmp_path / "no-index").as_uri(),
    }
    if cache is not None:
        env["TRACKER_PREFLIGHT_CACHE_DIR"] = str(cache)
    return env


def _tracker(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TRACKER), *args], env=env, capture_output=True, text=True, timeout=600, check=False
    )


def _remote_code_config() -> dict[str, Any]:
    """Qwen3-0.6B's real config with an auto_map naming the repo's own code."""
    config: dict[str, Any] = json.loads((CONFIGS / "Qwen__Qwen3-0.6B.json").read_text())
    config["auto_map"] = {
        "AutoConfig": "configuration_x.XConfig",
        "AutoModelForCausalLM": "modeling_x.XForCausalLM",
    }
    return config


def _upload(config: dict[str, Any]) -> tuple[dict[str, bytes], str]:
    """The first commit: the config, its clean remote code and a BF16 checkpoint."""
    files = {
        "config.json": json.dumps(config, indent=2).encode(),
        "configuration_x.py": CONFIGURATION,
        "modeling_x.py": CLEAN,
        "model.safetensors": safetensors("BF16", 2, 1000),
    }
    return files, "upload"


def test_every_revision_gets_a_preflight_and_a_changed_answer_is_an_advisory(
    symbol_cache: Path, tmp_path: Path
) -> None:
    config = _remote_code_config()
    fewer = {**config, "num_hidden_layers": config["num_hidden_layers"] - 2}
    repo = init_repo(tmp_path / "hub", REPO)
    steps: list[tuple[dict[str, bytes], str]] = [
        _upload(config),
        ({"modeling_x.py": BROKEN}, "use torch.fx when available"),
        ({"model.safetensors": safetensors("F8_E4M3", 1, 1000)}, "FP8 weights"),
        ({"config.json": json.dumps(fewer, indent=2).encode()}, "two layers fewer"),
    ]
    shas = [
        commit(repo, files, message, date=T0 + timedelta(days=i))
        for i, (files, message) in enumerate(steps)
    ]
    versions = ", ".join(f'"{v}"' for v in VERSIONS)
    (tmp_path / "watchlist.yaml").write_text(
        f"repos:\n  - id: {REPO}\n    preflight:\n      transformers: [{versions}]\n"
        "      lora_targets: [q_proj, gate_proj, all-linear]\n"
    )
    env = tracker_env(tmp_path, tmp_path / "watchlist.yaml", symbol_cache)
    with Replica(tmp_path / "hub") as hub:
        env["TRACKER_HF_ENDPOINT"] = hub.url
        poll = _tracker(env, "poll", "--once", "--json")
        assert poll.returncode == 0, poll.stderr
        live = _tracker(env, "preflight", "--hub", f"{REPO}@{shas[1]}")
    # the Hub is gone now: the store answers, by full sha, short sha or HEAD~n
    shown = _tracker(env, "preflight", f"{REPO}@{shas[1]}")
    back = _tracker(env, "preflight", f"{REPO}@HEAD~2")
    short = _tracker(env, "preflight", f"{REPO}@{shas[1][:8]}")
    for run in (live, shown, back, short):
        assert run.returncode == 0, run.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == f"{REPO}@{shas[1][:12]} (ingested revision {shas[1]}, read from the store)"
    assert live.stdout.splitlines()[0] == f"{REPO}@{shas[1][:12]} (from the Hub)"
    assert back.stdout == short.stdout == shown.stdout
    assert live.stdout.splitlines()[1:] == lines[1:]
    missing = _tracker(env, "preflight", f"{REPO}@HEAD~9")
    assert missing.returncode != 0
    assert missing.stderr.strip().splitlines() == [
        f"error: {REPO}@HEAD~9: no ingested revision matches; HEAD~n and short shas resolve "
        "against ingested revisions only (the Hub takes a full sha or a ref)"
    ]
    assert "  transformers 4.57.1: importable" in lines
    assert "  transformers 5.1.0: does not import" in lines
    assert (
        "capacity: 0.00 GB of weights (safetensors headers), 1,000 stored parameters; 2.00 bytes/parameter: 4-bit weights would take 4.0× less"
        in lines
    )

    exported = _tracker(env, "advisories", "export", str(tmp_path / "osv"))
    assert exported.returncode == 0, exported.stderr
    records = [json.loads(p.read_text()) for p in sorted((tmp_path / "osv").glob("*.json"))]
    estimate = {
        r["affected"][0]["ranges"][0]["events"][0]["introduced"]: r
        for r in records
        if r["database_specific"]["group"] == "estimate"
    }
    assert sorted(estimate, key=shas.index) == shas[1:]

    broken = _changes(estimate[shas[1]])
    assert _severity(estimate[shas[1]]) == "high"
    assert set(broken) == {
        "preflight.remote_code.transformers-5.1.0",
        "preflight.remote_code.transformers-5.24.0",
    }
    change = broken["preflight.remote_code.transformers-5.1.0"]
    assert change["rule"] == "preflight-import-broken"
    assert (change["before"], change["after"]) == (
        "importable",
        "does not import: is_torch_fx_available (not in transformers.utils.import_utils, "
        "gone since 5.1.0)",
    )

    capacity = _changes(estimate[shas[2]])["preflight.capacity"]
    assert _severity(estimate[shas[2]]) == "moderate"
    assert capacity["rule"] == "preflight-capacity"
    assert (capacity["before"]["bytes_per_param"], capacity["after"]["bytes_per_param"]) == (
        2.0,
        1.0,
    )
    assert (capacity["before"]["quantized"], capacity["after"]["quantized"]) == (False, True)
    assert (
        "already quantized: 1.00 bytes/parameter, no 4× left (was 2.00 bytes/parameter"
        in capacity["summary"]
    )

    lora = _changes(estimate[shas[3]])
    assert _severity(estimate[shas[3]]) == "high"
    layers = config["num_hidden_layers"]
    assert lora["preflight.lora.q_proj"]["before"] == {"attention.full": layers}
    assert lora["preflight.lora.q_proj"]["after"] == {"attention.full": layers - 2}
    assert lora["preflight.lora.gate_proj"]["summary"] == (
        f"`gate_proj` now resolves to {layers - 2} modules in the dense MLPs (was {layers})"
    )
    assert lora["preflight.lora.all-linear"]["after"] == {
        "attention.full": 4 * (layers - 2),
        "mlp.dense": 3 * (layers - 2),
    }

    # Stored per revision, the first one (nothing to compare it with) included.
    from tracker.settings import load_settings
    from tracker.shared.domain import RepoId
    from tracker.store import Store
    from tracker.store.preflight import PreflightStore

    url = load_settings(state_dir=tmp_path / "state").effective_database_url
    store = Store.open(url)
    try:
        stored = [PreflightStore(store.engine).get(RepoId(REPO), s) for s in shas]
    finally:
        store.close()
    assert all(s is not None and s.preflight is not None and s.error is None for s in stored)
    first = stored[0].preflight  # type: ignore[union-attr]
    assert first is not None and first.remote_code.importable("5.24.0") is True
    last = stored[3].preflight  # type: ignore[union-attr]
    assert last is not None and last.lora is not None
    assert last.lora.modules("q_proj") == layers - 2


def _severity(record: dict[str, Any]) -> str:
    return str(record["database_specific"]["severity"])


def _changes(record: dict[str, Any]) -> dict[str, Any]:
    changes = record["database_specific"]["changes"]
    return {c["key"]: c for c in changes if c["key"].startswith("preflight.")}


def test_a_revision_whose_code_stops_parsing_is_a_high_advisory_and_imports_nowhere(
    symbol_cache: Path, tmp_path: Path
) -> None:
    """The hostile review's case: a revision adds a syntax error (and an import gone since 5.1.0)
    to the modeling file. It was "importable" on every version with no advisory; it imports on no
    version (Python cannot compile the module), which is the high advisory on each pinned version,
    stored so, and the repo page says "no"; fixing it is "imports again"."""
    from fastapi.testclient import TestClient

    from tracker.api import create_app
    from tracker.app import build
    from tracker.settings import load_settings
    from tracker.shared.domain import RepoId

    config = _remote_code_config()
    broken = BROKEN + b"def oops(:\n"
    why = "modeling_x.py does not parse: SyntaxError line 9: invalid syntax"
    repo = init_repo(tmp_path / "hub", REPO)
    steps: list[tuple[dict[str, bytes], str]] = [
        _upload(config),
        ({"modeling_x.py": broken}, "a syntax error"),
        ({"modeling_x.py": CLEAN}, "fixed"),
    ]
    shas = [
        commit(repo, files, message, date=T0 + timedelta(days=i))
        for i, (files, message) in enumerate(steps)
    ]
    versions = ", ".join(f'"{v}"' for v in VERSIONS)
    watchlist = tmp_path / "watchlist.yaml"
    watchlist.write_text(
        f"repos:\n  - id: {REPO}\n    preflight:\n      transformers: [{versions}]\n"
    )
    env = tracker_env(tmp_path, watchlist, symbol_cache)
    with Replica(tmp_path / "hub") as hub:
        env["TRACKER_HF_ENDPOINT"] = hub.url
        poll = _tracker(env, "poll", "--once", "--json")
        assert poll.returncode == 0, poll.stderr
    shown = _tracker(env, "preflight", f"{REPO}@{shas[1]}")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert f"  problem: {why}" in lines
    for v in VERSIONS:
        i = lines.index(f"  transformers {v}: does not import")
        assert lines[i + 1] == f"    {why}"

    exported = _tracker(env, "advisories", "export", str(tmp_path / "osv"))
    assert exported.returncode == 0, exported.stderr
    records = [json.loads(p.read_text()) for p in sorted((tmp_path / "osv").glob("*.json"))]
    estimate = {
        r["affected"][0]["ranges"][0]["events"][0]["introduced"]: r
        for r in records
        if r["database_specific"]["group"] == "estimate"
    }
    assert sorted(estimate, key=shas.index) == shas[1:]
    assert _severity(estimate[shas[1]]) == "high"
    assert {
        k: (c["rule"], c["before"], c["after"]) for k, c in _changes(estimate[shas[1]]).items()
    } == {
        f"preflight.remote_code.transformers-{v}": (
            "preflight-import-broken",
            "importable",
            f"does not import: {why}",
        )
        for v in VERSIONS
    }
    assert {k: c["rule"] for k, c in _changes(estimate[shas[2]]).items()} == {
        f"preflight.remote_code.transformers-{v}": "preflight-import-restored" for v in VERSIONS
    }

    app = build(load_settings(state_dir=tmp_path / "state", watchlist=watchlist), read_only=True)
    try:
        stored = app.preflight.get(RepoId(REPO), shas[1])
        assert stored is not None and stored.preflight is not None
        rc = stored.preflight.remote_code
        assert rc.broken == (why,)
        assert [v["importable"] for v in rc.versions] == [False, False, False]
        page = TestClient(create_app(app)).get(f"/repos/{REPO}?rev={shas[1]}")
        assert page.status_code == 200
        rows = re.findall(
            r"<tr><td>([\d.]+)</td><td>(.*?)</td><td>(.*?)</td></tr>",
            re.search(r'<table id="preflight-versions">(.*?)</table>', page.text, re.S).group(1),  # type: ignore[union-attr]
        )
        assert rows == [(v, "<strong>no</strong>", why) for v in VERSIONS]
    finally:
        app.close()
