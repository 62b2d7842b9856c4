"""What a revision's remote code imports, by AST only (never imported or run).

The modules are those `auto_map` names (in config.json, tokenizer_config.json and the processor
configs) and, transitively, the repo modules they import relatively (ingest fetches exactly
these). Each absolute import is recorded with where it happens, because that decides whether a
missing name stops `from_pretrained(..., trust_remote_code=True)`:
- `required`: at module level, outside any `try` that catches ImportError: a missing name raises
  while transformers loads the module;
- `guarded`: inside a `try` whose handlers catch ImportError (or Exception): the code has a
  fallback;
- `conditional`: inside a module-level `if` (e.g. `if is_flash_attn_2_available():`);
- `deferred`: inside a function or method: fails only when that code runs.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from tracker.artifacts import AUTO_MAP_FILES
from tracker.bounded import bounds_for, load_json
from tracker.errors import UnreadableArtifactError

WHERE_ORDER = ("required", "conditional", "guarded", "deferred")
_CATCHES_IMPORT = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


@dataclass(frozen=True)
class Import:
    """One imported name: `from <module> import <name>` (name None: `import <module>`)."""

    file: str
    line: int
    module: str
    name: str | None
    where: str

    @property
    def top(self) -> str:
        return self.module.split(".")[0]

    def to_json(self) -> dict[str, object]:
        return {
            "file": self.file,
            "line": self.line,
            "module": self.module,
            "name": self.name,
            "where": self.where,
        }


def auto_map_modules(files: Mapping[str, bytes]) -> list[str]:
    """Repo paths of the modules `auto_map` names (`modeling_x.XModel` → `modeling_x.py`); entries
    that point into another repo (`org/repo--modeling_x.X`) are left out."""
    out: list[str] = []
    for path in AUTO_MAP_FILES:
        data = files.get(path)
        if data is None:
            continue
        try:  # bounded: a hostile config costs no more here than in the diff (issue 10)
            doc = load_json(data, path, bounds_for(path), nonfinite="text")
        except (ValueError, UnicodeDecodeError, RecursionError, UnreadableArtifactError):
            continue
        raw = doc.get("auto_map") if isinstance(doc, dict) else None
        values: list[object] = []
        if isinstance(raw, dict):
            values = list(raw.values())
        elif isinstance(raw, list):
            values = list(raw)
        for v in values:
            for ref in v if isinstance(v, list) else [v]:
                if not isinstance(ref, str) or "--" in ref or "." not in ref:
                    continue
                module = ref.rsplit(".", 1)[0]
                p = module.replace(".", "/") + ".py"
                if p not in out:
                    out.append(p)
    return out


def _relative_targets(path: str, tree: ast.Module) -> Iterator[tuple[str, ...]]:
    """For each relative import of `tree` (anywhere in it: transformers' `get_relative_imports`
    reads them by regex over the whole file), the repo paths that would satisfy it, preferred
    first."""
    here = path.split("/")[:-1]
    for node in statements(tree.body):
        if not isinstance(node, ast.ImportFrom) or node.level == 0:
            continue
        if node.level - 1 > len(here):
            continue
        base = here[: len(here) - (node.level - 1)]
        if node.module:
            parts = [*base, *node.module.split(".")]
            yield ("/".join(parts) + ".py", "/".join([*parts, "__init__.py"]))
        else:
            for alias in node.names:
                yield ("/".join([*base, alias.name]) + ".py",)


@functools.lru_cache(maxsize=16)
def parse_module(path: str, data: bytes) -> ast.Module | None:
    """`data` parsed (None when it does not parse). Cached by content: a revision's remote code
    is read by several stages, and most revisions keep the previous one's files (16 modules kept:
    a tree is a few MB for a 50 KB modeling file). The trees are shared: callers never modify
    them."""
    try:
        return ast.parse(data.decode("utf-8"), filename=path)
    except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError):
        return None


_parse = parse_module


def statements(body: Iterable[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement in `body`, nested ones too (bodies of classes, functions, if/try/with/for),
    without descending into expressions: the cheap walk for imports, classes and assignments."""
    for stmt in body:
        yield stmt
        for name in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(stmt, name, None)
            if isinstance(inner, list):
                yield from statements(
                    h
                    for item in inner
                    for h in (item.body if isinstance(item, ast.ExceptHandler) else [item])
                )


def remote_code_modules(files: Mapping[str, bytes]) -> tuple[list[str], list[str], list[str]]:
    """(modules in load order: auto_map ones, then their relative imports; paths `auto_map`
    names or a module imports relatively that this revision does not hold; modules that do not
    parse)."""
    modules, missing, broken = _modules(files)
    return modules, list(missing), broken


def _modules(files: Mapping[str, bytes]) -> tuple[list[str], dict[str, str], list[str]]:
    """`remote_code_modules`, with each absent path mapped to who needs it (`auto_map`, or the
    module that imports it relatively)."""
    queue: list[tuple[str, str]] = [(p, "auto_map") for p in auto_map_modules(files)]
    seen: list[str] = []
    absent: dict[str, str] = {}
    broken: list[str] = []
    while queue:
        path, by = queue.pop(0)
        if path in seen or path in absent:
            continue
        data = files.get(path)
        if data is None:
            absent[path] = by
            continue
        seen.append(path)
        tree = _parse(path, data)
        if tree is None:
            broken.append(path)
            continue
        for options in _relative_targets(path, tree):
            held = [t for t in options if t in files]
            if held:
                if held[0] not in seen:
                    queue.append((held[0], path))
            elif options[0] not in absent:
                queue.append((options[0], path))
    return seen, {a: by for a, by in absent.items() if a not in seen}, broken


def _catches_import(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(
        (isinstance(n, ast.Name) and n.id in _CATCHES_IMPORT)
        or (isinstance(n, ast.Attribute) and n.attr in _CATCHES_IMPORT)
        for n in names
    )


def _walk(body: Iterable[ast.stmt], where: str) -> Iterator[tuple[ast.stmt, str]]:
    for stmt in body:
        yield stmt, where
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _walk(stmt.body, "deferred")
        elif isinstance(stmt, ast.ClassDef):
            # A class body runs at import time; its methods do not.
            yield from _walk(stmt.body, where)
        elif isinstance(stmt, ast.Try | ast.TryStar):
            guarded = any(_catches_import(h) for h in stmt.handlers)
            inner = "guarded" if guarded and where != "deferred" else where
            yield from _walk(stmt.body, inner)
            for h in stmt.handlers:
                yield from _walk(h.body, inner)
            yield from _walk(stmt.orelse, inner)
            yield from _walk(stmt.finalbody, where)
        elif isinstance(stmt, ast.If):
            inner = "conditional" if where == "required" else where
            if "TYPE_CHECKING" in ast.unparse(stmt.test):
                continue  # never runs
            yield from _walk(stmt.body, inner)
            yield from _walk(stmt.orelse, inner)
        elif isinstance(stmt, ast.With | ast.AsyncWith | ast.For | ast.AsyncFor | ast.While):
            yield from _walk(stmt.body, where)
            yield from _walk(getattr(stmt, "orelse", []), where)


def imports_of(path: str, tree: ast.Module) -> list[Import]:
    """Every absolute import of one parsed module, with where it happens."""
    out: list[Import] = []
    for stmt, where in _walk(tree.body, "required"):
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                out.append(Import(path, stmt.lineno, alias.name, None, where))
        elif isinstance(stmt, ast.ImportFrom) and stmt.level == 0 and stmt.module:
            for alias in stmt.names:
                name = None if alias.name == "*" else alias.name
                out.append(Import(path, stmt.lineno, stmt.module, name, where))
    return out


def absent_problem(path: str, by: str) -> str:
    if by == "auto_map":
        return f"{path} is named by auto_map but not in this revision"
    return f"{path} is imported by {by} but not in this revision"


def remote_code_imports(
    files: Mapping[str, bytes],
) -> tuple[list[str], list[Import], list[str], list[str]]:
    """(modules read, their absolute imports, problems: modules absent or not parsing, the
    absent modules: transformers fetches each one and fails without it)."""
    modules, absent, broken = _modules(files)
    found: list[Import] = []
    for path in modules:
        if path in broken:
            continue
        tree = _parse(path, files[path])
        if tree is not None:
            found.extend(imports_of(path, tree))
    problems = [absent_problem(p, by) for p, by in absent.items()]
    problems += [f"{p} does not parse" for p in broken]
    return modules, found, problems, list(absent)
