"""Symbol tables of a package's wheel: the names each module binds at module level, by AST only.

A table maps a dotted module name (`transformers.utils.import_utils`) to the names an
`from <module> import <name>` can find there, without importing anything:
- names bound at module level (`def`, `class`, assignments, imports, also inside module-level
  `if` / `try` / `with` blocks, never inside functions or classes);
- `from .x import *` re-exports (the target's `__all__`, or its public names);
- transformers' lazy modules: the lists of an `_import_structure = {...}` dictionary (and its
  `_import_structure["x"] = [...]` / `.extend([...])` / `.append(...)` edits), and
  `define_import_structure(<dir>)`, whose names are the `__all__` of every module under that
  directory;
- submodules of a package (`from transformers.utils import logging`);
- alias modules made by `_create_tokenization_alias("<pkg>.old", ".new")` (transformers 5.1) and by a
  `_LEGACY_MODULE_ALIASES = {"old": "new"}` dictionary (5.2x): the alias has the target's names.
A module that defines a module-level `__getattr__` may resolve more names at run time: it is
marked `dynamic`, and a name not found in it is reported as such, never as importable.

Speed: transformers' wheels hold 2,000-3,000 modules (50 MB of source); a full `ast.parse` of
each takes about a minute per version on a loaded 2-core machine. Only module-level bindings are
needed, so each file is first reduced to its skeleton (the bodies of functions and classes
dropped, line by line) and the skeleton is parsed; a skeleton that does not parse (a body whose
multi-line string reaches column 0, say) falls back to parsing the whole file, so the result is
the same as a full parse.
"""

from __future__ import annotations

import ast
import re
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from tracker.shared.domain import JSONValue

TABLE_FORMAT = 1
"""Bumped when what a table holds changes (cached tables of another format are rebuilt)."""

_DEF = re.compile(r"^(\s*)(?:async\s+def|def|class)\s+([A-Za-z_]\w*)")
_DECORATOR = re.compile(r"^(\s*)@")
_CLOSER = re.compile(r"^\s*[)\]}]")


def skeleton(text: str) -> str:
    """`text` with the body of every function and class replaced by `pass` (names kept).

    Line-based: a `def`/`class` line at indentation i keeps its name (`def NAME(): pass`) and every
    following line indented deeper than i, blank, or a closing bracket at i (the end of a
    multi-line signature) is dropped. Decorators are dropped with their argument lines.
    """
    lines = text.splitlines()
    out: list[str] = []
    skip_indent: int | None = None
    for line in lines:
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if skip_indent is not None:
            if not stripped or stripped.startswith("#"):
                continue
            if indent > skip_indent or (indent == skip_indent and _CLOSER.match(line)):
                continue
            skip_indent = None
        m = _DEF.match(line)
        if m:
            pad = m.group(1)
            keyword = "class" if line.lstrip().startswith("class") else "def"
            out.append(f"{pad}{keyword} {m.group(2)}{'' if keyword == 'class' else '()'}: pass")
            skip_indent = len(pad)
            continue
        d = _DECORATOR.match(line)
        if d:
            skip_indent = len(d.group(1))  # its argument lines, if any
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def parse_module_level(source: bytes, filename: str) -> ast.Module | None:
    """The module's AST with function and class bodies possibly elided (see `skeleton`); None
    when the file does not parse at all."""
    try:
        text = source.decode("utf-8")
    except UnicodeDecodeError:
        return None
    try:
        return ast.parse(skeleton(text), filename=filename)
    except (SyntaxError, ValueError):
        pass
    try:
        return ast.parse(text, filename=filename)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


@dataclass
class ModuleFacts:
    """What one module's source says, before re-exports are resolved."""

    name: str
    package: bool
    bound: set[str] = field(default_factory=set)
    all: list[str] | None = None
    star_from: list[str] = field(default_factory=list)  # absolute module names
    structure: set[str] = field(default_factory=set)  # _import_structure names
    structure_dirs: list[str] = field(default_factory=list)  # define_import_structure packages
    aliases: dict[str, str] = field(default_factory=dict)  # submodule name -> target module
    same_as: list[str] = field(default_factory=list)  # an alias module: the target's names
    dynamic: bool = False
    parsed: bool = True


def _resolve(module: str, package: bool, level: int, target: str | None) -> str:
    """The absolute module of a relative import `from <level dots><target> import ...`."""
    parts = module.split(".")
    base = parts if package else parts[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, *([target] if target else [])])


def _string_list(node: ast.expr) -> list[str] | None:
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        out = [
            e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
        ]
        return out
    return None


def _module_statements(body: Iterable[ast.stmt]) -> Iterable[ast.stmt]:
    """Statements executed at module level: into if/try/with/for blocks, not into defs/classes."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.If | ast.For | ast.While | ast.AsyncFor):
            yield from _module_statements(stmt.body)
            yield from _module_statements(stmt.orelse)
        elif isinstance(stmt, ast.Try | ast.TryStar):
            yield from _module_statements(stmt.body)
            for handler in stmt.handlers:
                yield from _module_statements(handler.body)
            yield from _module_statements(stmt.orelse)
            yield from _module_statements(stmt.finalbody)
        elif isinstance(stmt, ast.With | ast.AsyncWith):
            yield from _module_statements(stmt.body)
        elif isinstance(stmt, ast.Match):
            for case in stmt.cases:
                yield from _module_statements(case.body)


def _targets(node: ast.expr) -> Iterable[str]:
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, ast.Tuple | ast.List):
        for e in node.elts:
            yield from _targets(e)
    elif isinstance(node, ast.Starred):
        yield from _targets(node.value)


def _is_structure(node: ast.expr) -> bool:
    """`_import_structure["x"]` (a subscript of the lazy structure)."""
    return (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id == "_import_structure"
    )


def module_facts(name: str, package: bool, tree: ast.Module | None) -> ModuleFacts:
    """The raw facts of module `name` (a package's `__init__` when `package`) from its AST."""
    facts = ModuleFacts(name=name, package=package)
    if tree is None:
        facts.parsed = False
        return facts
    for stmt in _module_statements(tree.body):
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            facts.bound.add(stmt.name)
            if stmt.name == "__getattr__":
                facts.dynamic = True
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                facts.bound.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(stmt, ast.ImportFrom):
            source = (
                _resolve(name, package, stmt.level, stmt.module)
                if stmt.level
                else stmt.module or ""
            )
            for alias in stmt.names:
                if alias.name == "*":
                    facts.star_from.append(source)
                else:
                    facts.bound.add(alias.asname or alias.name)
        elif isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            value = stmt.value
            for t in targets:
                for n in _targets(t):
                    facts.bound.add(n)
                    if n == "__all__" and value is not None:
                        listed = _string_list(value)
                        if listed is not None:
                            if isinstance(stmt, ast.AugAssign):
                                facts.all = [*(facts.all or []), *listed]
                            else:
                                facts.all = listed
                    if n == "_import_structure" and isinstance(value, ast.Dict):
                        for v in value.values:
                            facts.structure.update(_string_list(v) or [])
                    if n.endswith("MODULE_ALIASES") and isinstance(value, ast.Dict):
                        _alias_dict(facts, value)
                if _is_structure(t) and value is not None:
                    facts.structure.update(_string_list(value) or [])
        if isinstance(stmt, ast.Expr | ast.Assign) and isinstance(stmt.value, ast.Call):
            _calls(facts, stmt.value)
    return facts


def _alias_dict(facts: ModuleFacts, value: ast.Dict) -> None:
    """`_LEGACY_MODULE_ALIASES = {"old": "new"}`: submodule `old` of this package serves `new`."""
    for k, v in zip(value.keys, value.values, strict=True):
        if (
            isinstance(k, ast.Constant)
            and isinstance(v, ast.Constant)
            and isinstance(k.value, str)
            and isinstance(v.value, str)
            and k.value.isidentifier()
        ):
            facts.aliases[k.value] = _resolve(facts.name, facts.package, 1, v.value)


def _calls(facts: ModuleFacts, call: ast.Call) -> None:
    func = call.func
    # _import_structure["x"].extend([...]) / .append("Name")
    if isinstance(func, ast.Attribute) and _is_structure(func.value) and call.args:
        if func.attr == "extend":
            facts.structure.update(_string_list(call.args[0]) or [])
        elif func.attr == "append":
            arg = call.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                facts.structure.add(arg.value)
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
    if name == "define_import_structure" and call.args:
        where = ast.unparse(call.args[0])
        sub = re.findall(r"""["']([A-Za-z_][\w/]*)["']""", where)
        base = facts.name if facts.package else facts.name.rpartition(".")[0]
        facts.structure_dirs.append(".".join([base, *sub[0].split("/")]) if sub else base)
    elif name == "_create_tokenization_alias" and len(call.args) == 2:
        old, new = call.args
        old_text = ast.unparse(old)
        new_text = new.value if isinstance(new, ast.Constant) else None
        m = re.search(r"\.(\w+)['\"]?$", old_text.rstrip("'\""))
        if m and isinstance(new_text, str) and new_text.startswith("."):
            facts.aliases[m.group(1)] = _resolve(facts.name, True, 1, new_text.lstrip("."))


@dataclass(frozen=True)
class SymbolTable:
    """The names of every module of one package version (see the module docstring)."""

    package: str
    version: str
    modules: Mapping[str, frozenset[str]]
    dynamic: frozenset[str]
    unparsed: frozenset[str]
    source: Mapping[str, JSONValue]  # where it came from: wheel file name, sha256, format

    def has_module(self, module: str) -> bool:
        return module in self.modules

    def lookup(self, module: str, name: str) -> str:
        """ "ok", "no-module" (module absent), "missing" (name absent), or "dynamic" (absent, but
        the module resolves names at run time through `__getattr__`)."""
        names = self.modules.get(module)
        if names is None:
            return "no-module"
        if name in names or f"{module}.{name}" in self.modules:
            return "ok"
        return "dynamic" if module in self.dynamic else "missing"

    def to_json(self) -> dict[str, JSONValue]:
        return {
            "format": TABLE_FORMAT,
            "package": self.package,
            "version": self.version,
            "source": dict(self.source),
            "dynamic": sorted(self.dynamic),
            "unparsed": sorted(self.unparsed),
            "modules": {m: sorted(n) for m, n in sorted(self.modules.items())},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, JSONValue]) -> SymbolTable:
        if data.get("format") != TABLE_FORMAT:
            raise ValueError(f"symbol table format {data.get('format')!r}, not {TABLE_FORMAT}")
        return cls(
            package=data["package"],
            version=data["version"],
            modules={m: frozenset(n) for m, n in data["modules"].items()},
            dynamic=frozenset(data["dynamic"]),
            unparsed=frozenset(data["unparsed"]),
            source=dict(data["source"]),
        )


def _resolve_names(facts: Mapping[str, ModuleFacts]) -> dict[str, frozenset[str]]:
    """Each module's final names: bound, star re-exports, lazy structures, submodules."""
    children: dict[str, set[str]] = {}
    for name in facts:
        parent, _, leaf = name.rpartition(".")
        if parent:
            children.setdefault(parent, set()).add(leaf)
    done: dict[str, frozenset[str]] = {}
    active: set[str] = set()

    def under(prefix: str) -> Iterable[str]:
        dotted = prefix + "."
        return (m for m in facts if m.startswith(dotted))

    def exported(module: str) -> set[str]:
        """What `from module import *` brings: `__all__`, else the public names."""
        f = facts.get(module)
        if f is None:
            return set()
        if f.all is not None:
            return set(f.all)
        return {n for n in names(module) if not n.startswith("_")}

    def names(module: str) -> frozenset[str]:
        if module in done:
            return done[module]
        f = facts.get(module)
        if f is None or module in active:
            return frozenset()
        active.add(module)
        out = set(f.bound) | f.structure | children.get(module, set()) | set(f.aliases)
        for star in f.star_from:
            out |= exported(star)
        for target in f.same_as:
            out |= names(target)
        for d in f.structure_dirs:
            for m in under(d):
                sub = facts[m]
                out |= set(sub.all or ())
            out |= children.get(d, set())
        active.discard(module)
        done[module] = frozenset(out)
        return done[module]

    return {m: names(m) for m in facts}


def build_table(
    wheel: zipfile.ZipFile, package: str, version: str, source: Mapping[str, JSONValue]
) -> SymbolTable:
    """The symbol table of `package` from the `.py` files of an open wheel (never imported)."""
    facts: dict[str, ModuleFacts] = {}
    prefix = f"{package}/"
    for info in wheel.infolist():
        path = info.filename
        if not path.startswith(prefix) or not path.endswith(".py"):
            continue
        p = PurePosixPath(path)
        package_init = p.name == "__init__.py"
        parts = list(p.parent.parts) if package_init else [*p.parent.parts, p.stem]
        if not all(part.isidentifier() for part in parts):
            continue
        module = ".".join(parts)
        tree = parse_module_level(wheel.read(info), path)
        facts[module] = module_facts(module, package_init, tree)
    for f in list(facts.values()):
        for alias, target in f.aliases.items():
            facts.setdefault(
                f"{f.name}.{alias}", ModuleFacts(name=f"{f.name}.{alias}", package=False)
            )
            facts[f"{f.name}.{alias}"].same_as.append(target)
    modules = _resolve_names(facts)
    return SymbolTable(
        package=package,
        version=version,
        modules=modules,
        dynamic=frozenset(m for m, f in facts.items() if f.dynamic),
        unparsed=frozenset(m for m, f in facts.items() if not f.parsed),
        source=dict(source),
    )
