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

from tracker.shared.artifacts import AUTO_MAP_FILES
from tracker.shared.bounded import bounds_for, load_json
from tracker.shared.errors import UnreadableArtifactError

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


def _auto_map_refs(files: Mapping[str, bytes]) -> Iterator[tuple[str | None, str]]:
    """Every (auto class, reference) of the `auto_map`s of `files` (class None: a list form)."""
    for path in AUTO_MAP_FILES:
        data = files.get(path)
        if data is None:
            continue
        try:  # bounded: a hostile config costs no more here than in the diff (issue 10)
            doc = load_json(data, path, bounds_for(path), nonfinite="text")
        except (ValueError, UnicodeDecodeError, RecursionError, UnreadableArtifactError):
            continue
        raw = doc.get("auto_map") if isinstance(doc, dict) else None
        items: list[tuple[str | None, object]] = []
        if isinstance(raw, dict):
            items = [(k if isinstance(k, str) else None, v) for k, v in raw.items()]
        elif isinstance(raw, list):
            items = [(None, v) for v in raw]
        for key, v in items:
            for ref in v if isinstance(v, list) else [v]:
                if isinstance(ref, str):
                    yield key, ref


def auto_map_modules(files: Mapping[str, bytes]) -> list[str]:
    """Repo paths of the modules `auto_map` names (`modeling_x.XModel` → `modeling_x.py`); entries
    that point into another repo (`org/repo--modeling_x.X`) are left out (`auto_map_elsewhere`)."""
    out: list[str] = []
    for _, ref in _auto_map_refs(files):
        if "--" in ref or "." not in ref:
            continue
        module = ref.rsplit(".", 1)[0]
        p = module.replace(".", "/") + ".py"
        if p not in out:
            out.append(p)
    return out


def auto_map_elsewhere(files: Mapping[str, bytes]) -> list[str]:
    """The `auto_map` entries whose code is in another repo (`org/repo--modeling_x.X`: transformers
    fetches it from there), as problems: the preflight reads this revision's files only."""
    out: list[str] = []
    for key, ref in _auto_map_refs(files):
        if "--" not in ref:
            continue
        repo, _, name = ref.partition("--")
        line = f"{key + ': ' if key else ''}code in {repo} ({name}), not checked"
        if line not in out:
            out.append(line)
    return out


def _relative_targets(path: str, tree: ast.Module) -> Iterator[tuple[str, ...] | str]:
    """For each relative import of `tree` (anywhere in it: transformers' `get_relative_imports`
    reads them by regex over the whole file), the repo paths that would satisfy it, preferred
    first; or, for one that reaches above the repo's root (`from ..outside import x` in a root
    module), the problem: transformers looks for it in the repo and fails."""
    here = path.split("/")[:-1]
    for node in statements(tree.body):
        if not isinstance(node, ast.ImportFrom) or node.level == 0:
            continue
        if node.level - 1 > len(here):
            names = [node.module] if node.module else [a.name for a in node.names]
            for name in names:
                yield (
                    f"{path} imports outside the repo: {'.' * node.level}{name} "
                    f"(line {node.lineno})"
                )
            continue
        base = here[: len(here) - (node.level - 1)]
        if node.module:
            parts = [*base, *node.module.split(".")]
            yield ("/".join(parts) + ".py", "/".join([*parts, "__init__.py"]))
        else:
            for alias in node.names:
                yield ("/".join([*base, alias.name]) + ".py",)


MAX_MODULE_BYTES = 2_000_000
"""The largest remote-code module the preflight parses (bytes). Python's AST costs about 190 bytes
of tree per source byte (an 18 MB module: 7.4 GB and 2.5 minutes), and the largest modeling file
transformers ships is about 200 KB: a larger module is recorded as not checked, never parsed."""


@dataclass(frozen=True)
class Unread:
    """A remote-code module the preflight has no tree of, with why (`why` names the file).
    `breaks`: it does not parse, so Python cannot import it on any transformers version; else it
    was not checked (too large to parse here): nothing is known of its imports."""

    why: str
    breaks: bool


@functools.lru_cache(maxsize=16)
def read_module(path: str, data: bytes) -> ast.Module | Unread:
    """`data` parsed, or why not (see `Unread`). Read as transformers reads remote code: UTF-8
    (its `check_imports` opens the file with encoding="utf-8"), a byte-order mark allowed (Python's
    import skips it). Cached by content: a revision's remote code is read by several stages, and
    most revisions keep the previous one's files (16 modules kept: a tree is a few MB for a 50 KB
    modeling file). The trees are shared: callers never modify them."""
    if len(data) > MAX_MODULE_BYTES:
        return Unread(
            f"{path} is too large to check ({len(data) / 1e6:.1f} MB > "
            f"{MAX_MODULE_BYTES / 1e6:g} MB): not checked",
            breaks=False,
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return Unread(
            f"{path} does not parse: not UTF-8 (byte 0x{data[exc.start]:02x} at offset "
            f"{exc.start}; transformers reads remote code as UTF-8)",
            breaks=True,
        )
    try:
        return ast.parse(text, filename=path)
    except SyntaxError as exc:
        return Unread(f"{path} does not parse: SyntaxError line {exc.lineno}: {exc.msg}", True)
    except ValueError as exc:  # null bytes (Python's import refuses them too)
        return Unread(f"{path} does not parse: {exc}", breaks=True)
    except RecursionError:  # Python's compile() recurses as deep, and fails the same way
        return Unread(f"{path} does not parse: nested too deeply (RecursionError)", breaks=True)
    except MemoryError:  # the parser's stack overflowed (compile() too): bounded input, see above
        return Unread(f"{path} does not parse: too complex for Python's parser (MemoryError)", True)


def parse_module(path: str, data: bytes) -> ast.Module | None:
    """`data` parsed (None when `read_module` has no tree of it)."""
    tree = read_module(path, data)
    return tree if isinstance(tree, ast.Module) else None


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
    names or a module imports relatively that this revision does not hold; modules the preflight
    has no tree of: they do not parse, or are too large to check)."""
    code = _modules(files)
    return code.modules, list(code.absent), list(code.unread)


@dataclass
class _Code:
    modules: list[str]
    absent: dict[str, str]  # path -> who needs it (`auto_map`, or the module importing it)
    unread: dict[str, Unread]
    outside: list[str]  # relative imports above the repo's root, as problems


def _modules(files: Mapping[str, bytes]) -> _Code:
    """The remote code `files` holds, read from `auto_map` along relative imports."""
    queue: list[tuple[str, str]] = [(p, "auto_map") for p in auto_map_modules(files)]
    seen: list[str] = []
    absent: dict[str, str] = {}
    unread: dict[str, Unread] = {}
    outside: list[str] = []
    while queue:
        path, by = queue.pop(0)
        if path in seen or path in absent:
            continue
        data = files.get(path)
        if data is None:
            absent[path] = by
            continue
        seen.append(path)
        tree = read_module(path, data)
        if isinstance(tree, Unread):
            unread[path] = tree
            continue
        for options in _relative_targets(path, tree):
            if isinstance(options, str):
                if options not in outside:
                    outside.append(options)
                continue
            held = [t for t in options if t in files]
            if held:
                if held[0] not in seen:
                    queue.append((held[0], path))
            elif options[0] not in absent:
                queue.append((options[0], path))
    return _Code(seen, {a: by for a, by in absent.items() if a not in seen}, unread, outside)


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


@dataclass(frozen=True)
class RemoteImports:
    """What a revision's remote code imports, and what stops it or was not checked."""

    modules: list[str]
    """Modules read (or tried), in load order."""
    imports: list[Import]
    """Their absolute imports."""
    problems: list[str]
    """Everything wrong or unknown about the code, one line each."""
    absent: list[str]
    """Modules the revision lacks: transformers fetches each one and fails without it."""
    broken: list[str]
    """Why the code imports on no transformers version, whatever its names: a module that does
    not parse, a relative import above the repo's root."""
    not_checked: list[str]
    """Code the preflight could not check: a module too large to parse here, an `auto_map` entry
    whose code is in another repo."""


def remote_code_imports(files: Mapping[str, bytes]) -> RemoteImports:
    """The remote code of `files` read by AST (see `RemoteImports`)."""
    code = _modules(files)
    found: list[Import] = []
    for path in code.modules:
        tree = read_module(path, files[path])
        if isinstance(tree, ast.Module):
            found.extend(imports_of(path, tree))
    broken = [u.why for u in code.unread.values() if u.breaks] + code.outside
    not_checked = [u.why for u in code.unread.values() if not u.breaks]
    not_checked += auto_map_elsewhere(files)
    problems = [absent_problem(p, by) for p, by in code.absent.items()]
    problems += broken + not_checked
    return RemoteImports(code.modules, found, problems, list(code.absent), broken, not_checked)
