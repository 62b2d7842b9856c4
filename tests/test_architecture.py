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
    "tracker/advisories/rules.py",
    "tracker/advisories/details.py",
    "tracker/advisories/effects.py",
    "tracker/advisories/knowledge.py",
    "tracker/domain.py",
    "tracker/errors.py",
    "tracker/bounded.py",
    "tracker/artifacts.py",
    "tracker/problems.py",
)
PURE_ALLOWED_THIRD_PARTY = {
    "deepdiff",
    "jinja2",
    "yaml",
    "jsonschema",
    "markupsafe",
    "pydantic",
    "pydantic_core",
}
# tracker modules every pure stage may import (pure themselves, listed above)
PURE_SHARED = (
    "tracker.domain",
    "tracker.errors",
    "tracker.bounded",
    "tracker.artifacts",
    "tracker.problems",
)
FORBIDDEN_IN_PURE = {
    "sqlmodel",
    "sqlalchemy",
    "huggingface_hub",
    "httpx",
    "requests",
    "structlog",
    "logging",
    "socket",
    "urllib",
    "http",
    "fastapi",
    "apscheduler",
    "subprocess",
}


def _py_files(rel: str) -> list[Path]:
    path = PACKAGE_DIR.parent / rel
    if path.is_file():
        return [path]
    return sorted(path.rglob("*.py")) if path.exists() else []


def _imports(path: Path) -> set[str]:
    """Every module imported anywhere in the file, except type-only (`if TYPE_CHECKING:`) imports."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            node.body = []
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
                allowed = name in PURE_SHARED
                allowed = allowed or name.startswith(stage)
                if rel.startswith("tracker/advisories"):
                    allowed = allowed or (
                        name.startswith("tracker.advisories.")
                        and not name.endswith(("service", "export", "knowledge_gen"))
                    )
                    # classification re-reads configs through the estimate's public entry points
                    # (pure functions), never its internals
                    allowed = allowed or name == "tracker.estimate"
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


ENVIRONMENT_API = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}


def test_only_settings_reads_the_environment() -> None:
    """Every setting (TRACKER_*, the HF_* aliases, the log level) is read through Settings."""
    for path in _all_modules():
        rel = path.relative_to(PACKAGE_DIR.parent).as_posix()
        if rel == "tracker/settings.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                used = node.value.id == "os" and node.attr in ENVIRONMENT_API
            elif isinstance(node, ast.ImportFrom) and node.module == "os":
                used = any(a.name in ENVIRONMENT_API for a in node.names)
            else:
                continue
            assert not used, f"{rel}:{node.lineno} reads the environment; use tracker.settings"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE_DIR.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _module_level_imports(path: Path, known: set[str]) -> set[str]:
    """tracker modules imported at module level (not inside functions or TYPE_CHECKING blocks)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    this = _module_name(path)
    package = this if path.name == "__init__.py" else this.rpartition(".")[0]
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name in known)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                if base in known:
                    found.add(base)
                for alias in node.names:
                    if f"{base}.{alias.name}" in known:
                        found.add(f"{base}.{alias.name}")
            elif isinstance(node, (ast.If, ast.Try)):
                visit(node.body)
                visit(node.orelse)

    visit(tree.body)
    found.discard(this)
    return found


def test_no_circular_imports_at_module_level() -> None:
    paths = _all_modules()
    known = {_module_name(p) for p in paths}
    graph = {_module_name(p): _module_level_imports(p, known) for p in paths}
    # A package's __init__ importing its own submodules is how packages export; not a cycle.
    for name, deps in graph.items():
        graph[name] = {d for d in deps if not name.startswith(d + ".")}
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                cycle = [*stack[stack.index(dep) :], dep]
                pytest.fail("circular import: " + " -> ".join(cycle))
            if dep not in state:
                dfs(dep)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            dfs(node)


def test_every_module_imports_cleanly() -> None:
    names = [m.name for m in pkgutil.walk_packages([str(PACKAGE_DIR)], prefix="tracker.")]
    names = [n for n in names if ".migrations" not in n]
    assert len(names) > 40
    for name in names:
        importlib.import_module(name)
