"""Import rules of the house style, checked on the source: pure stages stay pure, adapters stay single."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import sys
from pathlib import Path

import pytest

import tracker

PACKAGE_DIR = Path(tracker.__file__).parent

# Pure stages: no network, database, clock or logging; they import only these.
PURE_PACKAGES = ("tracker/diff", "tracker/estimate")
PURE_MODULES = (
    "tracker/advisories/classify.py",
    "tracker/advisories/osv.py",
    "tracker/advisories/lifecycle.py",
    "tracker/domain.py",
    "tracker/errors.py",
)
PURE_ALLOWED_THIRD_PARTY = {"deepdiff", "jinja2", "yaml", "jsonschema", "markupsafe"}
FORBIDDEN_IN_PURE = {
    "sqlmodel", "sqlalchemy", "huggingface_hub", "httpx", "requests", "structlog", "logging",
    "socket", "urllib", "http", "fastapi", "apscheduler", "subprocess",
}


def _py_files(rel: str) -> list[Path]:
    path = PACKAGE_DIR.parent / rel
    if path.is_file():
        return [path]
    return sorted(path.rglob("*.py")) if path.exists() else []


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _top(name: str) -> str:
    return name.split(".")[0]


def _all_modules() -> list[Path]:
    return sorted(p for p in PACKAGE_DIR.rglob("*.py") if "migrations" not in p.parts)


@pytest.mark.parametrize("rel", PURE_PACKAGES + PURE_MODULES)
def test_pure_stages_import_only_domain_errors_and_pure_libraries(rel: str) -> None:
    files = _py_files(rel)
    stage = rel.removesuffix(".py").replace("/", ".")
    for path in files:
        for name in _imports(path):
            top = _top(name)
            assert top not in FORBIDDEN_IN_PURE, f"{path}: imports {name}"
            if top == "tracker":
                allowed = name in ("tracker.domain", "tracker.errors") or name.startswith(stage)
                if rel.startswith("tracker/advisories"):
                    allowed = allowed or name.startswith("tracker.advisories.") and not name.endswith(
                        ("service", "export")
                    )
                assert allowed, f"{path}: pure stage imports {name}"
            elif top not in sys.stdlib_module_names:
                assert top in PURE_ALLOWED_THIRD_PARTY, f"{path}: imports third-party {name}"


def test_only_the_store_imports_the_orm() -> None:
    for path in _all_modules():
        rel = path.relative_to(PACKAGE_DIR.parent).as_posix()
        orm = {n for n in _imports(path) if _top(n) in ("sqlmodel", "sqlalchemy", "alembic")}
        if orm:
            assert rel.startswith("tracker/store/"), f"{rel} imports {sorted(orm)}"


def test_only_the_hub_adapter_imports_huggingface_hub() -> None:
    for path in _all_modules():
        rel = path.relative_to(PACKAGE_DIR.parent).as_posix()
        if any(_top(n) == "huggingface_hub" for n in _imports(path)):
            assert rel == "tracker/sources/hub.py", f"{rel} imports huggingface_hub"


def test_every_module_imports_cleanly_without_cycles() -> None:
    # A fresh interpreter per module would be slow; importing each module first in its own
    # subprocess is what exposes a cycle, so do that for the whole list in one child process.
    import subprocess

    names = [m.name for m in pkgutil.walk_packages([str(PACKAGE_DIR)], prefix="tracker.")]
    names = [n for n in names if ".migrations" not in n]
    code = (
        "import importlib, sys\n"
        "failed = []\n"
        f"for name in {names!r}:\n"
        "    for mod in [m for m in sys.modules if m == 'tracker' or m.startswith('tracker.')]:\n"
        "        del sys.modules[mod]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception as exc:\n"
        "        failed.append(f'{name}: {type(exc).__name__}: {exc}')\n"
        "print('\\n'.join(failed))\n"
        "sys.exit(1 if failed else 0)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert importlib.import_module("tracker.domain")
