"""`tracker estimate ORG/NAME[@REV] --json` through the Hub adapter against the replica."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tracker.replica import Replica
from tracker.replica.repos import commit, init_repo

CONFIGS = Path(__file__).parents[1] / "data" / "configs"
TOKENIZERS = Path(__file__).parents[1] / "data" / "estimate" / "tokenizers"
GEMMA = (CONFIGS / "google__gemma-3-1b-it.json").read_bytes()
GEMMA_TOKENIZER = (TOKENIZERS / "google__gemma-3-1b-it.tokenizer_config.json").read_bytes()
TRACKER = Path(sys.executable).with_name("tracker")
T0 = datetime(2025, 1, 6, 12, 0, tzinfo=UTC)
OLD = (CONFIGS / "Qwen__Qwen3-0.6B.json").read_bytes()
NEW = (CONFIGS / "Qwen__Qwen3-1.7B.json").read_bytes()


def safetensors(tensors: dict[str, tuple[str, list[int]]]) -> bytes:
    """A real safetensors file: 8-byte header length, JSON header, zeroed BF16 data."""
    header: dict[str, Any] = {}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        n = 2
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + b"\0" * offset


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[tuple[Replica, str]]:
    repo = init_repo(tmp_path / "hub", "acme/qwen-like")
    first = commit(repo, {"config.json": OLD}, "first", date=T0)
    weights = safetensors({"a.weight": ("BF16", [4, 8]), "b.weight": ("BF16", [8])})
    commit(
        repo,
        {"config.json": NEW, "model.safetensors": weights},
        "second",
        date=T0 + timedelta(hours=1),
    )
    gemma = init_repo(tmp_path / "hub", "acme/gemma-like")
    commit(gemma, {"config.json": GEMMA, "tokenizer_config.json": GEMMA_TOKENIZER}, "one", date=T0)
    with Replica(tmp_path / "hub") as h:
        yield h, first


def tracker(
    tmp_path: Path, url: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environ = dict(os.environ)
    environ.update(
        TRACKER_STATE_DIR=str(tmp_path / "state"),
        TRACKER_HF_ENDPOINT=url,
        TRACKER_RETRY_ATTEMPTS="1",
        **(env or {}),
    )
    return subprocess.run(
        [str(TRACKER), "estimate", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=environ,
    )


def file_total(path: Path, tmp_path: Path, url: str) -> int:
    out = tracker(tmp_path, url, str(path), "--json")
    assert out.returncode == 0, out.stderr
    total: int = json.loads(out.stdout)["params"]["total"]
    return total


@pytest.mark.replica
def test_hub_path_matches_the_file_path_at_head_and_at_a_revision(
    hub: tuple[Replica, str], tmp_path: Path
) -> None:
    h, first = hub
    head = tracker(tmp_path, h.url, "acme/qwen-like", "--json")
    assert head.returncode == 0, head.stderr
    report = json.loads(head.stdout)
    assert report["params"]["total"] == file_total(
        CONFIGS / "Qwen__Qwen3-1.7B.json", tmp_path, h.url
    )
    assert report["checkpoint"]["params"] == 4 * 8 + 8
    assert report["checkpoint"]["dtypes"] == {"BF16": 40}
    pinned = tracker(tmp_path, h.url, f"acme/qwen-like@{first}", "--json")
    assert pinned.returncode == 0, pinned.stderr
    old = json.loads(pinned.stdout)
    assert old["params"]["total"] == file_total(CONFIGS / "Qwen__Qwen3-0.6B.json", tmp_path, h.url)
    assert old["params"]["total"] != report["params"]["total"]
    assert old["checkpoint"] is None  # no safetensors at the first revision
    assert any(r.path.endswith("/config.json") for r in h.requests)


@pytest.mark.replica
def test_hub_path_missing_repo_exits_3(hub: tuple[Replica, str], tmp_path: Path) -> None:
    h, _ = hub
    out = tracker(tmp_path, h.url, "acme/absent", "--json")
    assert out.returncode == 3, out.stderr
    assert out.stdout == "" and out.stderr.startswith("error:")


# Not JSON / not an object: see test_estimate_cli.py; here a missing file and a keyless object.
@pytest.mark.parametrize("content", [None, "{}"])
def test_bad_json_exits_2_with_one_line(tmp_path: Path, content: str | None) -> None:
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    out = tracker(tmp_path, "http://127.0.0.1:9", str(path))
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:")


def vocab_findings(report: dict[str, Any]) -> list[str]:
    return [f["evidence"] for f in report["findings"] if f["id"] == "vocab-too-small"]


@pytest.mark.replica
def test_tokenizer_files_feed_vocab_too_small_on_hub_and_file_paths(
    hub: tuple[Replica, str], tmp_path: Path
) -> None:
    h, _ = hub
    expected = ["vocab_size 262144 but the tokenizer's highest token id is 262144"]
    out = tracker(tmp_path, h.url, "acme/gemma-like", "--json")
    assert out.returncode == 0, out.stderr
    assert vocab_findings(json.loads(out.stdout)) == expected
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_bytes(GEMMA)
    alone = tracker(tmp_path, h.url, str(model / "config.json"), "--json")
    assert vocab_findings(json.loads(alone.stdout)) == []
    (model / "tokenizer_config.json").write_bytes(GEMMA_TOKENIZER)
    beside = tracker(tmp_path, h.url, str(model / "config.json"), "--json")
    assert vocab_findings(json.loads(beside.stdout)) == expected


@pytest.mark.replica
def test_hub_path_honours_the_watchlists_estimate_settings(
    hub: tuple[Replica, str], tmp_path: Path
) -> None:
    """ORG/NAME is estimated under the watchlist's `estimate:` block for that repo (defaults <
    rules < entry); a repo the watchlist does not name gets the defaults."""
    h, _ = hub
    watchlist = tmp_path / "watchlist.yaml"
    watchlist.write_text(
        "defaults:\n  estimate:\n    serve_seq_len: 8192\n"
        "repos:\n  - id: acme/qwen-like\n    estimate:\n      extra_cards:\n"
        "        - {name: B200 180 GB, vram_gb: 180}\n  - id: acme/other\n"
    )
    env_watchlist = {"TRACKER_WATCHLIST": str(watchlist)}
    out = tracker(tmp_path, h.url, "acme/qwen-like", "--json", env=env_watchlist)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["memory_gb"]["serve_tokens"] == 8192
    assert [c["name"] for c in report["cards"]][-1] == "B200 180 GB"
    plain = tracker(tmp_path, h.url, "acme/gemma-like", "--json", env=env_watchlist)
    assert plain.returncode == 0, plain.stderr
    unwatched = json.loads(plain.stdout)
    assert unwatched["memory_gb"]["serve_tokens"] == 4096
    assert "B200 180 GB" not in [c["name"] for c in unwatched["cards"]]
