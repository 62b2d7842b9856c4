"""Import rules of the house style, checked on the source: pure stages stay pure, adapters stay single."""

from __future__ import annotations

import ast
import enum
import importlib
import pkgutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import tracker

PACKAGE_DIR = Path(tracker.__file__).parent

# Pure stages: no network, database, clock or logging; they import only these.
PURE_PACKAGES = ("tracker/diff", "tracker/estimate", "tracker/feeds")
PURE_MODULES = (
    "tracker/advisories/classify.py",
    "tracker/advisories/osv.py",
    "tracker/advisories/lifecycle.py",
    "tracker/advisories/rules.py",
    "tracker/advisories/details.py",
    "tracker/advisories/effects.py",
    "tracker/advisories/knowledge.py",
    "tracker/advisories/stale.py",
    "tracker/advisories/generation.py",
    "tracker/shared/domain.py",
    "tracker/shared/estimate_values.py",
    "tracker/shared/errors.py",
    "tracker/shared/bounded.py",
    "tracker/shared/artifacts.py",
    "tracker/shared/problems.py",
    "tracker/preflight/imports.py",
    "tracker/preflight/symbols.py",
    "tracker/preflight/compat.py",
    "tracker/preflight/capacity.py",
    "tracker/preflight/lora.py",
    "tracker/preflight/codetree.py",
    "tracker/preflight/safeeval.py",
    "tracker/preflight/census_lora.py",
    "tracker/preflight/codewalk.py",
    "tracker/preflight/settings.py",
    "tracker/preflight/report.py",
    "tracker/teams/profile.py",
    "tracker/teams/impact.py",
    "tracker/teams/upgrade.py",
)
PURE_ALLOWED_THIRD_PARTY = {
    "deepdiff",
    "feedgen",
    "jinja2",
    "yaml",
    "jsonschema",
    "markupsafe",
    "pydantic",
    "pydantic_core",
}
# tracker modules every pure stage may import (pure themselves, listed above)
PURE_SHARED = (
    "tracker.shared.domain",
    "tracker.shared.estimate_values",  # the estimate's values, re-exported by tracker.shared.domain
    "tracker.shared.errors",
    "tracker.shared.bounded",
    "tracker.shared.artifacts",
    "tracker.shared.problems",
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
                    # and reads a revision's files through the diff's own bounded readers
                    allowed = allowed or name == "tracker.diff"
                    # and a derivative's inherited values through the diff's lineage reader
                    allowed = allowed or name == "tracker.diff.lineage"
                if rel.startswith("tracker/preflight"):
                    # preflight reads the estimate's census and layer reading (pure), never wheels
                    allowed = allowed or name.startswith("tracker.estimate")
                    allowed = allowed or (
                        name.startswith("tracker.preflight.") and not name.endswith("wheels")
                    )
                if rel.startswith("tracker/teams"):
                    # a team's impact reads the advisory's lifecycle, the estimate's entry points
                    # and card catalogue, and the preflight's stored answer (all pure)
                    allowed = allowed or name in (
                        "tracker.advisories.lifecycle",
                        "tracker.estimate",
                        "tracker.estimate.settings",
                        "tracker.preflight.report",
                    )
                    allowed = allowed or name.startswith("tracker.teams.")
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


def _module_name(path: Path, root: Path = PACKAGE_DIR.parent) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _tracker_imports(path: Path, known: set[str], root: Path = PACKAGE_DIR.parent) -> set[str]:
    """tracker modules `path` imports anywhere: at module level, inside functions and methods, and in
    `if TYPE_CHECKING:` blocks (a cycle there is still a cycle of design, and one refactor away
    from an import-time error)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    this = _module_name(path, root)
    package = this if path.name == "__init__.py" else this.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.name
                while name and name not in known:  # `import tracker.x.y` of a non-module y
                    name = name.rpartition(".")[0]
                if name:
                    found.add(name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                if f"{base}.{alias.name}" in known:
                    found.add(f"{base}.{alias.name}")
                elif base in known:
                    found.add(base)
    found.discard(this)
    return found


def _import_graph() -> dict[str, set[str]]:
    paths = _all_modules()
    known = {_module_name(p) for p in paths}
    graph = {_module_name(p): _tracker_imports(p, known) for p in paths}
    # A package's __init__ importing its own submodules is how packages export; not a cycle.
    for name, deps in graph.items():
        graph[name] = {d for d in deps if not name.startswith(d + ".")}
    return graph


def _first_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                return [*stack[stack.index(dep) :], dep]
            if dep not in state:
                found = dfs(dep)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = dfs(node)
            if found:
                return found
    return None


def test_no_circular_imports() -> None:
    """No cycle among tracker's modules, counting every import: module level, function level and
    `TYPE_CHECKING` blocks alike."""
    cycle = _first_cycle(_import_graph())
    assert cycle is None, "circular import: " + " -> ".join(cycle or [])


def test_the_cycle_check_sees_function_level_and_type_checking_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "tracker"
    pkg.mkdir()
    (pkg / "a.py").write_text("def f():\n    from tracker import b\n")
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from tracker.a import f\n"
    )
    known = {"tracker.a", "tracker.b"}
    assert _tracker_imports(pkg / "a.py", known, tmp_path) == {"tracker.b"}
    assert _tracker_imports(pkg / "b.py", known, tmp_path) == {"tracker.a"}
    graph = {"tracker.a": {"tracker.b"}, "tracker.b": {"tracker.a"}}
    assert _first_cycle(graph) == ["tracker.a", "tracker.b", "tracker.a"]


def test_every_module_imports_cleanly() -> None:
    names = [m.name for m in pkgutil.walk_packages([str(PACKAGE_DIR)], prefix="tracker.")]
    names = [n for n in names if ".migrations" not in n]
    assert len(names) > 40
    for name in names:
        importlib.import_module(name)


PARTIAL_ENUM_MAPS: dict[str, str] = {}
"""Module-level maps keyed by an enum that may leave members out on purpose: `module.NAME` → why."""


def _enum_keyed_maps() -> list[tuple[str, type[enum.Enum], Mapping[Any, Any]]]:
    """Every module-level mapping in tracker whose keys are all members of one enum."""
    found = []
    seen: set[int] = set()  # a map re-exported by another module is checked once
    names = [m.name for m in pkgutil.walk_packages([str(PACKAGE_DIR)], prefix="tracker.")]
    for name in sorted(n for n in names if ".migrations" not in n):
        for attr, value in vars(importlib.import_module(name)).items():
            if not isinstance(value, Mapping) or not value or id(value) in seen:
                continue
            kinds = {type(k) for k in value}
            kind = next(iter(kinds))
            if len(kinds) == 1 and issubclass(kind, enum.Enum):
                seen.add(id(value))
                found.append((f"{name}.{attr}", kind, value))
    return found


def test_maps_keyed_by_an_enum_cover_every_member() -> None:
    maps = _enum_keyed_maps()
    assert {name for name, _, _ in maps} >= {
        "tracker.advisories.details.GROUP_LABELS",
        "tracker.advisories.advice.CHECKS",
        "tracker.advisories.advice.KIND_TITLES",
        "tracker.diff.render.CHANGE_MARKS",
    }
    for name, kind, value in maps:
        if name in PARTIAL_ENUM_MAPS:
            continue
        missing = [m.value for m in kind if m not in value]
        assert not missing, f"{name} (keyed by {kind.__name__}) has no entry for {missing}"


# At the top of tracker/: the composition root, where the stages meet (the poll pipeline and the
# repair of old stores), the settings, the watchlist and the logging set-up. Every stage, door and
# piece of plumbing has a role-named folder (README, "Layout").
TOP_LEVEL = {"__init__", "app", "pipeline", "repair", "settings", "watchlist", "logs"}
ROLE_FOLDERS = {
    "sources", "ingest", "diff", "estimate", "preflight", "advisories", "lineage",  # stages
    "cli", "api", "feeds", "webhooks", "web", "scan", "teams",  # doors
    "store", "daemon", "sandbox", "shared", "replica", "demo_data",  # plumbing, values, test Hub
}  # fmt: skip


def test_the_top_level_holds_only_the_composition_root_and_role_folders() -> None:
    assert {p.stem for p in PACKAGE_DIR.glob("*.py")} == TOP_LEVEL
    folders = {p.name for p in PACKAGE_DIR.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == ROLE_FOLDERS


def test_the_shared_values_are_pure() -> None:
    # everything in tracker/shared is importable by every pure stage: each is checked as one
    shared = {p.relative_to(PACKAGE_DIR.parent).as_posix() for p in _py_files("tracker/shared")}
    assert shared - {"tracker/shared/__init__.py"} <= set(PURE_MODULES)
