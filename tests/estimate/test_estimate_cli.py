"""CLI: `tracker estimate CONFIG.json [--json]` and its exit status on unreadable input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

CONFIGS = Path(__file__).parents[1] / "data" / "configs"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from tracker.cli import main; main()", "estimate", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_json_contract_fields() -> None:
    out = run(str(CONFIGS / "Qwen__Qwen3-30B-A3B.json"), "--json")
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["params"]["total"] == 30532122624
    for key in ("full_finetune", "lora", "serve_weights", "kv_cache"):
        assert isinstance(r["memory_gb"][key], float)
    card = r["cards"][0]
    assert set(card) >= {"name", "vram_gb", "full_finetune", "lora", "serve"}
    assert set(card["lora"]) >= {"batch", "borderline", "split"}
    assert r["checkpoint"] is None and r["layers"] == 48 and r["custom_code"] is False


def test_rich_report_has_fit_table() -> None:
    out = run(str(CONFIGS / "Qwen__Qwen3-0.6B.json"))
    assert out.returncode == 0, out.stderr
    assert "largest batch per card" in out.stdout
    assert "H200 141 GB" in out.stdout


@pytest.mark.parametrize("content", ["[1, 2]", '{"hidden_size": ', "not json"])
def test_unreadable_config_exits_2_with_one_line(tmp_path: Path, content: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(content)
    out = run(str(path))
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and out.stderr.startswith("error:")


def test_one_off_estimate_loads_no_framework_store_or_schema() -> None:
    """`tracker estimate CONFIG` runs without typer, rich, pydantic, PyYAML, SQLAlchemy or the Hub
    client, nor the change and file values (issue 9 item 7: the process start is measured in
    `make bench`)."""
    heavy = ("typer", "rich", "pydantic", "yaml", "sqlalchemy", "huggingface_hub", "tracker.store")
    heavy += ("tracker.domain", "tracker.artifacts")  # the change and file values it never builds
    heavy += ("tracker.estimate.mixers",)  # MLA, linear-attention and SSM classes: Qwen3 has none
    code = (
        "import atexit, sys\n"
        f"atexit.register(lambda: print([m for m in {heavy!r} if m in sys.modules], "
        "file=sys.stderr))\n"
        "from tracker.cli import main\n"
        "main(sys.argv[1:])\n"
    )
    path = str(CONFIGS / "Qwen__Qwen3-0.6B.json")
    out = subprocess.run(
        [sys.executable, "-c", code, "estimate", path, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["params"]["total"] == 596049920
    assert out.stderr.strip() == "[]"


def test_unknown_option_and_missing_target_exit_2_with_one_line() -> None:
    for args in (["--bogus", str(CONFIGS / "Qwen__Qwen3-0.6B.json")], []):
        out = run(*args)
        assert out.returncode == 2, out
        assert out.stdout == "" and out.stderr.count("\n") == 1
        assert out.stderr.startswith("error: ") and "usage: tracker estimate" in out.stderr
