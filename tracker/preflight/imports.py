"""What a revision's remote code imports, by AST only (never imported or run).

The modules are those `auto_map` names (in config.json, tokenizer_config.json and the processor
configs) and, transitively, the repo modules they import relatively (ingest fetches exactly
these). Each absolute import is recorded with where it happens, because that decides whether a
missing name stops `from_pretrained(..., trust_remote_code=True)`:
- `required`: at module level, outside any `try` that catches ImportError: a missing name raises
  while transformers loads the module (the `else` of `if TYPE_CHECKING:` and the body of
  `if not TYPE_CHECKING:` run, so they count; the body of `if TYPE_CHECKING:` never runs);
- `fallback`: in the `except ImportError:` body of such a `try`: it runs when the `try` body's
  import fails, and then a failure of its own raises uncaught (`compat.check_version` counts it as
  required on a version where the `try` body's transformers import is missing too, or where the
  `try` body imports no transformers name);
- `guarded`: inside a `try` whose handlers catch ImportError (or Exception): the code has a
  fallback;
- `conditional`: inside a module-level `if` (e.g. `if is_flash_attn_2_available():`);
- `deferred`: inside a function or method: fails only when that code runs;
- `typing`: in the body of `if TYPE_CHECKING:` (or the else of `if not TYPE_CHECKING:`): never
  runs; kept only because `check_imports` reads it.

Apart from where it runs, transformers' `check_imports` (dynamic_module_utils, the same code in
4.57.1 and 5.24.0) requires before loading that every package the file imports *anywhere* is
installed (functions, methods and `if TYPE_CHECKING:` bodies included), except inside a `try`
(body and handlers alike) and inside an `if` whose test calls a function named `is_flash_attn…
available` or any name of `transformers.utils.import_utils`: `Import.checked` records that, with
the names such `if` tests call (`guards`), which `compat.other_packages` resolves per version.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from tracker.artifacts import AUTO_MAP_FILES
from tracker.bounded import bounds_for, load_json
from tracker.errors import UnreadableArtifactError

WHERE_ORDER = ("required", "fallback", "conditional", "guarded", "deferred", "typing")
_CATCHES_IMPORT = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


@dataclass(frozen=True)
class Import:
    """One imported name: `from <module> import <name>` (name None: `import <module>`)."""

    file: str
    line: int
    module: str
    name: str | None
    where: str
    try_line: int | None = None
    """The line of the innermost `try` it is in (guarded) or whose handler it is in (fallback)."""
    checked: bool = False
    """Whether transformers' `check_imports` reads it (not in a `try`), subject to `guards`."""
    guards: tuple[str, ...] = ()
    """The functions called by name in the tests of the `if`s around it: `check_imports` skips it
    when one is `is_flash_attn…available` or a name of the version's `import_utils`."""

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


_Ctx = tuple[str, int | None, bool, tuple[str, ...]]  # where, try line, checked, if-test calls


def _type_checking(test: ast.expr) -> int:
    """1: `TYPE_CHECKING` (the body never runs, the else always does), -1: `not TYPE_CHECKING`,
    0: anything else."""

    def plain(e: ast.expr) -> bool:
        return (isinstance(e, ast.Name) and e.id == "TYPE_CHECKING") or (
            isinstance(e, ast.Attribute) and e.attr == "TYPE_CHECKING"
        )

    if plain(test):
        return 1
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and plain(test.operand):
        return -1
    return 0


def _called_names(test: ast.expr) -> tuple[str, ...]:
    """What `check_imports` looks at in an `if` test: the `.id` of every call's function."""
    return tuple(
        n.func.id
        for n in ast.walk(test)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    )


def _walk(body: Iterable[ast.stmt], ctx: _Ctx) -> Iterator[tuple[ast.stmt, _Ctx]]:
    where, try_line, checked, guards = ctx
    for stmt in body:
        yield stmt, ctx
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            yield from _walk(stmt.body, ("deferred", try_line, checked, guards))
        elif isinstance(stmt, ast.ClassDef):
            # A class body runs at import time; its methods do not.
            yield from _walk(stmt.body, ctx)
        elif isinstance(stmt, ast.Try | ast.TryStar):
            guarded = any(_catches_import(h) for h in stmt.handlers)
            if guarded and where != "deferred":
                inner: _Ctx = ("guarded", stmt.lineno, False, guards)
                handler: _Ctx = ("fallback", stmt.lineno, False, guards)
            else:
                inner = handler = (where, try_line, False, guards)
            yield from _walk(stmt.body, inner)
            for h in stmt.handlers:
                yield from _walk(h.body, handler)
            # the handlers do not catch what the else or finally raise
            yield from _walk(stmt.orelse, (where, try_line, False, guards))
            yield from _walk(stmt.finalbody, (where, try_line, False, guards))
        elif isinstance(stmt, ast.If):
            g = (*guards, *_called_names(stmt.test))
            tc = _type_checking(stmt.test)
            # check_imports reads `if TYPE_CHECKING:` bodies too (no call in the test)
            never: _Ctx = ("typing", try_line, checked, g)
            runs: _Ctx = (where, try_line, checked, g)
            cond: _Ctx = ("conditional" if where == "required" else where, try_line, checked, g)
            yield from _walk(stmt.body, never if tc == 1 else runs if tc == -1 else cond)
            yield from _walk(stmt.orelse, runs if tc == 1 else never if tc == -1 else cond)
        elif isinstance(stmt, ast.With | ast.AsyncWith | ast.For | ast.AsyncFor | ast.While):
            yield from _walk(stmt.body, ctx)
            yield from _walk(getattr(stmt, "orelse", []), ctx)


def imports_of(path: str, tree: ast.Module) -> list[Import]:
    """Every absolute import of one parsed module, with where it happens."""
    out: list[Import] = []
    for stmt, (where, try_line, checked, guards) in _walk(tree.body, ("required", None, True, ())):
        extra = {"try_line": try_line, "checked": checked, "guards": guards}
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                out.append(Import(path, stmt.lineno, alias.name, None, where, **extra))  # type: ignore[arg-type]
        elif isinstance(stmt, ast.ImportFrom) and stmt.level == 0 and stmt.module:
            for alias in stmt.names:
                name = None if alias.name == "*" else alias.name
                out.append(Import(path, stmt.lineno, stmt.module, name, where, **extra))  # type: ignore[arg-type]
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
