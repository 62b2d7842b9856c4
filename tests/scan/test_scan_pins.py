"""The pin finder (tracker.scan.pins) on the forms the CLI test's tree does not hold."""

from __future__ import annotations

from pathlib import Path

from tracker.scan.pins import scan


def _pins(
    tmp_path: Path, files: dict[str, str]
) -> list[tuple[str, int, int, str, str | None, str]]:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    found = scan(tmp_path, max_file_bytes=100_000, max_files=100)
    return [
        (p.location.path, p.location.line, p.location.column, p.repo_id, p.revision, p.role)
        for p in found.pins
    ]


def test_python_forms(tmp_path: Path) -> None:
    src = """import argparse
from dataclasses import dataclass, field
from transformers import pipeline
from vllm import LLM

NAME = "org/a"
NAME = "org/b"  # rebound: not resolved

@dataclass
class ModelArguments:
    model_name_or_path: str = field(default="org/c")
    model_revision: str = "r1"

def go():
    p = argparse.ArgumentParser()
    p.add_argument("--base_model", default="org/d")
    p.add_argument("--revision", default="r2")
    pipeline("text-generation", model="org/e", revision="r3", tokenizer="org/f")
    LLM(model="org/g", revision="r4", tokenizer="org/h", tokenizer_revision="r5")
    AnyClass.from_pretrained(NAME)
    snapshot_download(repo_id="org/i", repo_type="dataset")
    snapshot_download("org/j")
    AutoModel.from_pretrained("./local/dir")
"""
    assert _pins(tmp_path, {"t.py": src}) == [
        ("t.py", 11, 5, "org/c", "r1", "model"),
        ("t.py", 16, 5, "org/d", "r2", "model"),
        ("t.py", 18, 5, "org/e", "r3", "model"),
        ("t.py", 18, 5, "org/f", "r3", "tokenizer"),
        ("t.py", 19, 5, "org/g", "r4", "model"),
        ("t.py", 19, 5, "org/h", "r5", "tokenizer"),
        ("t.py", 22, 5, "org/j", None, "model"),
    ]


def test_configs_and_command_lines(tmp_path: Path) -> None:
    files = {
        "k8s.yaml": """spec:
  containers:
    - name: vllm
      command: ["vllm", "serve", "org/a", "--revision", "v1.0", "--tokenizer", "org/b"]
""",
        "cfg.json": '{\n  "base_model": "org/c",\n  "revision": "abc1234"\n}\n',
        "axolotl.toml": 'base_model = "org/d"\n',
        "run.sh": "export M=org/e\npython -m vllm.entrypoints.openai.api_server --model=${M} \\\n"
        "  --tokenizer-revision t1 --tokenizer ${TOK:-org/f}\nhuggingface-cli download org/g\n",
        "Dockerfile": "FROM x\nARG REV=deadbeef\nCMD vllm serve org/h --revision $REV\n",
    }
    assert _pins(tmp_path, files) == [
        ("Dockerfile", 3, 16, "org/h", "deadbeef", "model"),
        ("axolotl.toml", 1, 14, "org/d", None, "model"),
        ("cfg.json", 2, 17, "org/c", "abc1234", "model"),
        ("k8s.yaml", 4, 34, "org/a", "v1.0", "model"),
        ("k8s.yaml", 4, 80, "org/b", None, "tokenizer"),
        ("run.sh", 2, 46, "org/e", None, "model"),
        ("run.sh", 3, 39, "org/f", "t1", "tokenizer"),
        ("run.sh", 4, 26, "org/g", None, "model"),
    ]


def test_versions_from_pyproject_and_poetry(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\ndependencies = [\n  "transformers>=4.40,<5",\n  "numpy",\n]\n'
        '[project.optional-dependencies]\nserve = ["vllm==0.6.3"]\n'
        '[tool.poetry.dependencies]\ntransformers = "4.44.2"\n'
    )
    (tmp_path / "poetry.lock").write_text('[[package]]\nname = "vllm"\nversion = "0.6.3.post1"\n')
    found = scan(tmp_path, max_file_bytes=100_000, max_files=100)
    assert [
        (v.location.path, v.location.line, v.package, v.spec, v.version) for v in found.versions
    ] == [
        ("poetry.lock", 2, "vllm", "==0.6.3.post1", "0.6.3.post1"),
        ("pyproject.toml", 4, "transformers", "<5,>=4.40", None),
        ("pyproject.toml", 8, "vllm", "==0.6.3", "0.6.3"),
        ("pyproject.toml", 10, "transformers", "4.44.2", "4.44.2"),
    ]


def test_limits_are_said(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n" * 10)
    (tmp_path / "b.py").write_text("def (\n")
    (tmp_path / "c.py").write_text("y = 2\n")
    found = scan(tmp_path, max_file_bytes=30, max_files=2)
    assert [(s.path, s.reason) for s in found.skipped] == [
        ("a.py", "over 30 bytes"),
        ("b.py", "not valid python: invalid syntax (b.py, line 1)"),
        (".", "over 2 candidate files: the rest not read"),
    ]
