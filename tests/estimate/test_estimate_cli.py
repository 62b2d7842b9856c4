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
    heavy += (
        "tracker.shared.domain",
        "tracker.shared.artifacts",
    )  # the change and file values it never builds
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


CORPUS_MODELS = Path(__file__).parents[3] / "shared" / "corpus" / "models"
NEMOTRON_SUPER = CORPUS_MODELS / "nvidia__NVIDIA-Nemotron-3-Super-120B-A12B-FP8" / "config.json"


def test_config_with_infinity_is_estimated_as_transformers_reads_it() -> None:
    # The corpus's own config: "time_step_limit": [0.0, Infinity], which json and transformers accept.
    assert b"Infinity" in NEMOTRON_SUPER.read_bytes()
    out = run(str(NEMOTRON_SUPER), "--json")
    assert out.returncode == 0, out.stderr
    # transformers 5.24.0's meta-device count of NemotronHForCausalLM for this config
    assert json.loads(out.stdout)["params"]["total"] == 120_668_687_360


def test_every_corpus_config_parses_and_is_estimated() -> None:
    from tracker.estimate import estimate, parse_config

    paths = sorted(CORPUS_MODELS.glob("*/config.json"))
    assert len(paths) >= 66
    for path in paths:
        assert estimate(parse_config(path.read_bytes())).params.total > 0, path


def test_nonfinite_constants_keep_every_other_bound() -> None:
    from tracker.estimate import parse_config
    from tracker.shared.bounded import DOCUMENT, BoundsError, load_json
    from tracker.shared.errors import EstimateError

    config = parse_config(b'{"a": [NaN, Infinity, -Infinity], "b": 1}')
    assert [str(x) for x in config["a"]] == ["nan", "inf", "-inf"]
    with pytest.raises(BoundsError, match="non-standard JSON constant Infinity"):
        load_json(b'{"a": Infinity}', "x", DOCUMENT)  # other readers still refuse them
    deep = (
        b'{"a": '
        + b"[" * (DOCUMENT.max_depth + 1)
        + b"Infinity"
        + b"]" * (DOCUMENT.max_depth + 1)
        + b"}"
    )
    with pytest.raises(EstimateError, match=f"nested deeper than {DOCUMENT.max_depth} levels"):
        parse_config(deep)
    with pytest.raises(EstimateError, match="out of range"):
        parse_config(b'{"a": 1e999}')


def test_report_names_the_serving_prefill_working_set() -> None:
    out = run(str(CONFIGS / "meta-llama__Llama-2-7b-hf.json"), "--json")
    assert out.returncode == 0, out.stderr
    # the default 4,096-token prompt: (2·3·11008 + 2·2·4096) bytes per token = 337,641,472 bytes
    assert json.loads(out.stdout)["memory_gb"]["serve_prefill"] == 0.338
    text = run(str(CONFIGS / "meta-llama__Llama-2-7b-hf.json")).stdout
    assert "+ prefill working set 0.338 per 4096-token sequence" in " ".join(text.split())


def test_set_feeds_any_estimate_setting_validated_as_the_watchlist_block() -> None:
    llama = str(CONFIGS / "meta-llama__Llama-2-7b-hf.json")
    bad = run(llama, "--set", "sharding=zero9")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert "estimate.sharding: 'zero9' is not one of" in bad.stderr
    assert "(did you mean 'zero3'?)" in bad.stderr
    assert run(llama, "--set", "sharding").returncode == 2
    card = '[{"name": "B200 180 GB", "vram_gb": 180}]'
    sets = ("lora_base=nf4", "sharding=zero3", "shards=8", f"extra_cards={card}")
    out = run(llama, "--json", *[x for s in sets for x in ("--set", s)])
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["settings"]["lora_base"] == "nf4" and r["settings"]["shards"] == 8
    assert r["cards"][-1]["name"] == "B200 180 GB"
    # QLoRA NF4 base and ZeRO-3 over 8 cards: 29.818 GB LoRA and 142.256 GB full fine-tune alone
    assert r["memory_gb"]["lora"] == 13.818 and r["memory_gb"]["full_finetune"] == 30.993
    assert r["source"]["settings_from"] == (
        "defaults + flags --set lora_base=nf4, --set sharding=zero3, --set shards=8, "
        f"--set extra_cards={card}"
    )


def test_watchlist_settings_of_a_watched_repo_apply_to_a_local_config(tmp_path: Path) -> None:
    import os

    watchlist = tmp_path / "watchlist.yaml"
    watchlist.write_text(
        "defaults:\n  estimate:\n    serve_seq_len: 8192\n"
        "repos:\n  - id: acme/llama-like\n    estimate:\n      sharding: zero3\n"
        "      shards: 8\n      extra_cards:\n        - {name: B200 180 GB, vram_gb: 180}\n"
    )
    env = dict(os.environ, TRACKER_WATCHLIST=str(watchlist), TRACKER_STATE_DIR=str(tmp_path))
    llama = str(CONFIGS / "meta-llama__Llama-2-7b-hf.json")

    def tracker(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-c", "from tracker.cli import main; main()", "estimate"]
        return subprocess.run(
            [*command, llama, *args], capture_output=True, text=True, env=env, check=False
        )

    out = tracker("--json", "--watchlist-settings", "acme/llama-like", "--set", "lora_base=nf4")
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["memory_gb"]["serve_tokens"] == 8192  # the watchlist's defaults
    assert (r["settings"]["sharding"], r["settings"]["shards"]) == ("zero3", 8)  # its entry
    assert r["cards"][-1]["name"] == "B200 180 GB"
    assert r["memory_gb"]["full_finetune"] == 30.993 and r["memory_gb"]["lora"] == 13.818
    assert r["source"]["settings_from"] == (
        f"defaults + {watchlist} estimate: of acme/llama-like + flags --set lora_base=nf4"
    )
    other = tracker("--watchlist-settings", "acme/other")
    assert other.returncode == 2
    assert other.stderr == (
        f"error: --watchlist-settings acme/other: {watchlist} does not watch it\n"
    )


def test_active_parameters_with_and_without_the_embedding() -> None:
    """Kimi-K3 (issue 25 item 6): 105.36 B active per token with the embedding (the headline),
    104.19 B without, in `--json` and in the text, both through the installed `tracker`."""
    tracker = Path(sys.executable).with_name("tracker")
    config = str(CONFIGS / "moonshotai__Kimi-K3.json")
    out = subprocess.run(
        [str(tracker), "estimate", config, "--json"], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    p = json.loads(out.stdout)["params"]
    assert (p["active"], p["active_without_embedding"], p["embedding"]) == (
        105_363_935_328,
        104_189_530_208,
        1_174_405_120,
    )
    assert p["active_headline"] == "with_embedding"
    text = subprocess.run(
        [str(tracker), "estimate", config], capture_output=True, text=True, check=False
    ).stdout
    assert (
        " ".join(text.split()).count(
            "105,363,935,328 active per token (with the embedding; 104,189,530,208 without)"
        )
        == 1
    )
