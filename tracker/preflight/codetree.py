"""The nn.Module classes of a revision's remote code, read by AST only (never imported or run).

For every class the remote code defines: its base names and, for every `self.NAME = ...` in its
methods, what is assigned: a Linear (`nn.Linear`, `torch.nn.Linear`, `nn.LazyLinear`, torch's
`NonDynamicallyQuantizableLinear`, transformers' `Conv1D`, or a remote class deriving from one of
them, since PEFT matches by `isinstance`), a `ModuleList` of Linears, another call (a module of
some class, an Embedding, a norm), or something else. A Linear may be built directly
(`nn.Linear(a, b)`) or through a factory whose first argument is the class
(`torch.nn.utils.skip_init(nn.Linear, a, b)`, chatglm's `init_method(nn.Linear, a, b)`).

The in/out features of a Linear built in `__init__` are its call's arguments evaluated against
config.json by `safeeval.evaluate` (constants, config keys, names bound earlier in the same
`__init__`, arithmetic, comparisons, conditionals; `if` statements whose test it can decide are
followed); the arguments a class is built with at its call site are bound into its `__init__`
(`attr_bound`). What it cannot evaluate is kept as the reason. config.json is read as the remote
configuration class reads it: its `attribute_map` aliases, its `__init__` defaults for keys
config.json lacks, and its one-line `@property` values.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tracker.preflight.imports import parse_module, statements
from tracker.preflight.safeeval import ClassRef, ConfigRef, Unknown, Value, evaluate

LINEAR_CLASSES = frozenset({"Linear", "LazyLinear", "NonDynamicallyQuantizableLinear", "Conv1D"})
_CONV1D = "Conv1D"  # transformers' Conv1D(nf=out, nx=in) stores its weight as [in, out]


@dataclass(frozen=True)
class Assigned:
    """What one `self.NAME = ...` assigns: kind `linear`, `linear_list`, `call` (a class that is
    not a Linear: `target` is its last name part), `unknown` (a function the code does not show
    building a class: `target` names it) or `other`; a Linear's features (or why unknown)."""

    kind: str
    target: str | None = None
    features: tuple[int, int] | str | None = None
    conv1d: bool = False
    bound: tuple[tuple[str, Value], ...] = ()
    items: int | str | None = None  # a ModuleList/Sequential: how many (or why unknown)


@dataclass
class ClassInfo:
    """One class of the remote code (see the module docstring)."""

    name: str
    file: str
    bases: tuple[str, ...]
    attrs: dict[str, list[Assigned]] = field(default_factory=dict)
    methods: dict[str, ast.FunctionDef] = field(default_factory=dict)


def _last(node: ast.expr) -> str | None:
    """The last name part of `a.b.C` / `C`."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _linear_args(call: ast.Call, skip: int) -> tuple[ast.expr | None, ast.expr | None]:
    """The in/out feature expressions of a Linear call (after `skip` leading positional args)."""
    args = call.args[skip:]
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    first = args[0] if args else None
    second = args[1] if len(args) > 1 else None
    return first or kw.get("in_features") or kw.get("nf"), second or kw.get(
        "out_features"
    ) or kw.get("nx")


class CodeTree:
    """The classes of the remote code `files` (path → source) for config.json `config`."""

    def __init__(self, files: Mapping[str, bytes], config: Mapping[str, Any]) -> None:
        self.config = config
        self.classes: dict[str, ClassInfo] = {}
        self.problems: list[str] = []
        self.functions: dict[str, ast.FunctionDef] = {}
        self._instances: dict[
            tuple[str, tuple[tuple[str, Value], ...]], tuple[dict[str, Assigned], set[str]]
        ] = {}
        self._bound_cache: dict[tuple[str, str, tuple[tuple[str, Value], ...]], list[Assigned]] = {}
        parsed: list[tuple[str, ast.ClassDef]] = []
        for path, data in files.items():
            tree = parse_module(path, data)
            if tree is None:
                self.problems.append(f"{path} does not parse")
                continue
            for node in statements(tree.body):
                if isinstance(node, ast.ClassDef):
                    parsed.append((path, node))
                elif isinstance(node, ast.FunctionDef):
                    self.functions.setdefault(node.name, node)
        for path, node in parsed:
            info = ClassInfo(
                name=node.name,
                file=path,
                bases=tuple(b for b in (_last(x) for x in node.bases) if b),
            )
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    info.methods[item.name] = item
            self.classes.setdefault(node.name, info)
        self.config = self._config_view(config, [n for _, n in parsed])
        for info in self.classes.values():
            # what an instance is built with: `__init__` and the methods it calls on self (a
            # setter such as `set_output_embeddings` assigns later, to an existing module)
            for name in _built_by(info):
                env: dict[str, Value] = {}
                self._exec(info, info.methods[name].body, env, exact=name == "__init__")

    def _config_view(self, config: Mapping[str, Any], nodes: list[ast.ClassDef]) -> dict[str, Any]:
        """config.json as the remote configuration class reads it: its `attribute_map` aliases
        (`num_hidden_layers` → `n_layer`, as PretrainedConfig resolves them) and its one-line
        `@property` values (`return self.hidden_size // self.n_head`), evaluated by the
        whitelist; keys config.json has are never overridden."""
        view = dict(config)
        configs = [n for n in nodes if self._is_config_class(n.name)]
        for node in configs:
            for item in node.body:
                if (
                    isinstance(item, ast.Assign)
                    and any(
                        isinstance(t, ast.Name) and t.id == "attribute_map" for t in item.targets
                    )
                    and isinstance(item.value, ast.Dict)
                ):
                    for k, v in zip(item.value.keys, item.value.values, strict=True):
                        if (
                            isinstance(k, ast.Constant)
                            and isinstance(v, ast.Constant)
                            and isinstance(k.value, str)
                            and v.value in view
                            and k.value not in view
                        ):
                            view[k.value] = view[v.value]
        for node in configs:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    for key, default in _init_defaults(item).items():
                        view.setdefault(key, default)
        for node in configs:
            for item in node.body:
                if not (
                    isinstance(item, ast.FunctionDef)
                    and any(_last(d) == "property" for d in item.decorator_list)
                    and len(item.body) == 1
                    and isinstance(item.body[0], ast.Return)
                    and item.body[0].value is not None
                    and item.name not in view
                ):
                    continue
                env: dict[str, Value] = {
                    f"self.{k}": v
                    for k, v in view.items()
                    if isinstance(v, int | float | str | bool) or v is None
                }
                value = evaluate(item.body[0].value, env, view)
                if not isinstance(value, Unknown | ConfigRef | ClassRef):
                    view[item.name] = value
        return view

    def _is_config_class(self, name: str, seen: frozenset[str] = frozenset()) -> bool:
        if name in ("PretrainedConfig", "PreTrainedConfig"):
            return True
        info = self.classes.get(name)
        if info is None or name in seen:
            return False
        return any(self._is_config_class(b, seen | {name}) for b in info.bases)

    # -- class relations -------------------------------------------------------------------

    def is_linear_class(self, name: str, seen: frozenset[str] = frozenset()) -> bool:
        """Whether class `name` is a Linear for PEFT (a known Linear class, or derives from one)."""
        if name in self.classes and name not in seen:
            return any(self.is_linear_class(b, seen | {name}) for b in self.classes[name].bases)
        return name in LINEAR_CLASSES

    def _conv1d(self, name: str, seen: frozenset[str] = frozenset()) -> bool:
        if name in self.classes and name not in seen:
            return any(self._conv1d(b, seen | {name}) for b in self.classes[name].bases)
        return name == _CONV1D

    def mro(self, name: str) -> list[ClassInfo]:
        """`name` and its remote-code bases, depth first (as far as the code defines them)."""
        out: list[ClassInfo] = []
        todo = [name]
        while todo:
            n = todo.pop(0)
            info = self.classes.get(n)
            if info is None or info in out:
                continue
            out.append(info)
            todo.extend(info.bases)
        return out

    def attr(self, cls: str, name: str) -> list[Assigned]:
        """What `cls` (or a remote base) assigns to `self.name` (first class that does)."""
        for info in self.mro(cls):
            if name in info.attrs:
                return info.attrs[name]
        return []

    def assignments(self, name: str) -> list[tuple[str, Assigned]]:
        """Every (class, assignment) of `self.name` in the remote code."""
        return [(c.name, a) for c in self.classes.values() for a in c.attrs.get(name, [])]

    # -- reading __init__ ------------------------------------------------------------------

    def _classify(self, value: ast.expr, env: Mapping[str, Value], exact: bool) -> Assigned:
        if isinstance(value, ast.Call):
            func = _last(value.func)
            alias = env.get(func or "") if isinstance(value.func, ast.Name) else None
            if isinstance(alias, ClassRef):
                func = alias.name
            factory_cls = _last(value.args[0]) if value.args else None
            if func and self.is_linear_class(func):
                return self._linear(value, 0, func, env, exact)
            if factory_cls and self.is_linear_class(factory_cls) and func not in ("ModuleList",):
                return self._linear(value, 1, factory_cls, env, exact)
            if func in ("ModuleList", "Sequential") and value.args:
                inner = value.args[0]
                elts: list[ast.expr] = []
                if isinstance(inner, ast.ListComp | ast.GeneratorExp):
                    elts = [inner.elt]
                elif isinstance(inner, ast.List | ast.Tuple):
                    elts = list(inner.elts)
                kinds = [self._classify(e, env, exact=False) for e in elts]
                items = self._items(inner, env, exact)
                if kinds and all(k.kind == "linear" for k in kinds):
                    feats = {k.features for k in kinds}
                    return Assigned(
                        "linear_list",
                        features=feats.pop() if len(feats) == 1 else "the list's Linears differ",
                        conv1d=kinds[0].conv1d,
                        items=items,
                    )
                targets = {k.target for k in kinds if k.kind == "call"}
                if len(targets) == 1 and all(k.kind == "call" for k in kinds):
                    bound = {k.bound for k in kinds}
                    return Assigned(
                        "call",
                        target=targets.pop(),
                        bound=bound.pop() if len(bound) == 1 else (),
                        items=items,
                    )
                return Assigned("unknown", target=f"{func}({ast.unparse(inner)[:60]})")
            if factory_cls and factory_cls in self.classes:
                return Assigned("call", target=factory_cls)
            if func in self.classes:
                return Assigned("call", target=func, bound=self._bind_call(func, value, env, exact))
            if func and func[:1].isupper():  # a class from outside the remote code
                return Assigned("call", target=func)
            if _value_call(value):
                return Assigned("other")
            returned = self._returns_class(func)
            if returned is not None:
                return Assigned("call", target=returned)
            return Assigned("unknown", target=f"{func or ast.unparse(value.func)}()")
        return Assigned("other")

    def _items(self, inner: ast.expr, env: Mapping[str, Value], exact: bool) -> int | str:
        """How many modules a ModuleList's argument makes: a literal's length, or the count of
        `[... for _ in range(N)]` with N evaluated."""
        if isinstance(inner, ast.List | ast.Tuple):
            return len(inner.elts)
        if (
            isinstance(inner, ast.ListComp | ast.GeneratorExp)
            and len(inner.generators) == 1
            and not inner.generators[0].ifs
            and isinstance(inner.generators[0].iter, ast.Call)
            and _last(inner.generators[0].iter.func) == "range"
            and len(inner.generators[0].iter.args) == 1
        ):
            arg = inner.generators[0].iter.args[0]
            n = evaluate(arg, env, self.config) if exact else Unknown(f"`{ast.unparse(arg)}`")
            if isinstance(n, Unknown):
                return n.why
            if type(n) is int and 0 <= n <= 100_000:
                return n
        return f"`{ast.unparse(inner)[:60]}`"

    def _returns_class(self, func: str | None) -> str | None:
        """The class a module-level or nested helper of the code always builds (`build_layer`
        returning `GLMBlock(...)`), or None when it is not that simple."""
        fn = self.functions.get(func or "")
        if fn is None:
            return None
        returns = [n.value for n in ast.walk(fn) if isinstance(n, ast.Return)]
        names = {_last(r.func) for r in returns if isinstance(r, ast.Call)}
        if len(names) == 1 and len(returns) == len([r for r in returns if isinstance(r, ast.Call)]):
            name = names.pop()
            if name and (name in self.classes or name[:1].isupper()):
                return name
        return None

    def _bind_call(
        self, cls: str, call: ast.Call, env: Mapping[str, Value], exact: bool
    ) -> tuple[tuple[str, Value], ...]:
        """The arguments of a call to remote class `cls`, bound to its `__init__` parameters and
        evaluated in the caller's `__init__` (known values only)."""
        init = next((c.methods["__init__"] for c in self.mro(cls) if "__init__" in c.methods), None)
        if init is None or not exact:
            return ()
        params = [a.arg for a in init.args.posonlyargs + init.args.args][1:]
        out: dict[str, Value] = {}
        for name, arg in zip(params, call.args, strict=False):
            out[name] = evaluate(arg, env, self.config)
        for kw in call.keywords:
            if (kw.arg and kw.arg in params) or kw.arg in [a.arg for a in init.args.kwonlyargs]:
                out[str(kw.arg)] = evaluate(kw.value, env, self.config)
        return tuple((k, v) for k, v in out.items() if not isinstance(v, Unknown) and k != "config")

    def instance_attrs(
        self, cls: str, bound: tuple[tuple[str, Value], ...]
    ) -> tuple[dict[str, Assigned], set[str]]:
        """What an instance of `cls` built with `bound` holds: each attribute's last assignment
        when the `__init__`s of its remote bases and then its own run, and the attributes set
        under a condition or loop the evaluator could not decide (`self.NAME`)."""
        key = (cls, bound)
        if key not in self._instances:
            attrs: dict[str, Assigned] = {}
            uncertain: set[str] = set()
            for info in reversed(self.mro(cls)):
                init = info.methods.get("__init__")
                if init is None:
                    continue
                scratch = ClassInfo(info.name, info.file, info.bases)
                self._exec(scratch, init.body, dict(bound), exact=True, uncertain=uncertain)
                for name, assigned in scratch.attrs.items():
                    attrs[name] = assigned[-1]
            self._instances[key] = (attrs, uncertain)
        return self._instances[key]

    def attr_bound(
        self, cls: str, name: str, bound: tuple[tuple[str, Value], ...]
    ) -> list[Assigned]:
        """What `cls` assigns to `self.name` when its `__init__` runs with the `bound` arguments
        of one call site (`attr` when there are none)."""
        if not bound:
            return self.attr(cls, name)
        key = (cls, name, bound)
        if key not in self._bound_cache:
            found: list[Assigned] = []
            for info in self.mro(cls):
                init = info.methods.get("__init__")
                if init is None:
                    continue
                scratch = ClassInfo(info.name, info.file, info.bases)
                self._exec(scratch, init.body, dict(bound), exact=True)
                if name in scratch.attrs:
                    found = scratch.attrs[name]
                    break
            self._bound_cache[key] = found or self.attr(cls, name)
        return self._bound_cache[key]

    def _linear(
        self, call: ast.Call, skip: int, cls: str, env: Mapping[str, Value], exact: bool
    ) -> Assigned:
        conv = self._conv1d(cls)
        a, b = _linear_args(call, skip)
        if conv:
            a, b = b, a  # Conv1D(nf=out, nx=in)
        if a is None or b is None:
            return Assigned("linear", target=cls, features="no in/out arguments", conv1d=conv)
        if not exact:
            return Assigned(
                "linear", target=cls, features="built outside straight-line __init__", conv1d=conv
            )
        i, o = evaluate(a, env, self.config), evaluate(b, env, self.config)
        for v in (i, o):
            if isinstance(v, Unknown):
                return Assigned("linear", target=cls, features=v.why, conv1d=conv)
        if type(i) is int and type(o) is int:
            return Assigned("linear", target=cls, features=(i, o), conv1d=conv)
        return Assigned("linear", target=cls, features="the features are not integers", conv1d=conv)

    def _class_ref(self, node: ast.expr, env: Mapping[str, Value]) -> ClassRef | None:
        """A class named by `node` (`RMSNorm`, `torch.nn.LayerNorm`, or a conditional choosing
        one: `RMSNorm if config.rmsnorm else LayerNorm`), for local aliases of classes."""
        if isinstance(node, ast.IfExp):
            test = evaluate(node.test, env, self.config)
            if isinstance(test, Unknown | ConfigRef):
                return None
            return self._class_ref(node.body if test else node.orelse, env)
        if isinstance(node, ast.Name | ast.Attribute):
            name = _last(node)
            if name and (name in self.classes or name[:1].isupper()):
                return ClassRef(name)
        return None

    def _bind(self, target: ast.expr, value: Value, env: dict[str, Value]) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = value
        elif (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
        ):
            env[f"self.{target.attr}"] = value
        elif isinstance(target, ast.Tuple | ast.List):
            for t in target.elts:
                self._bind(t, Unknown(f"`{ast.unparse(target)}`"), env)

    def _exec(
        self,
        info: ClassInfo,
        body: Iterable[ast.stmt],
        env: dict[str, Value],
        exact: bool,
        uncertain: set[str] | None = None,
    ) -> None:
        """Walk a method body in order, binding what the evaluator can and recording every
        `self.NAME = ...` (`exact`: straight-line `__init__` code, whose values are known)."""
        for stmt in body:
            if isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                value = evaluate(stmt.value, env, self.config) if exact else Unknown("not __init__")
                ref = self._class_ref(stmt.value, env) if exact else None
                if ref is not None:
                    value = ref
                for t in targets:
                    if (
                        isinstance(t, ast.Attribute)
                        and isinstance(t.value, ast.Name)
                        and t.value.id == "self"
                    ):
                        info.attrs.setdefault(t.attr, []).append(
                            self._classify(stmt.value, env, exact)
                        )
                    self._bind(t, value, env)
            elif isinstance(stmt, ast.AugAssign):
                cur = evaluate(stmt.target, env, self.config)
                new = evaluate(ast.BinOp(stmt.target, stmt.op, stmt.value), env, self.config)
                self._bind(stmt.target, new if not isinstance(cur, Unknown) else cur, env)
            elif isinstance(stmt, ast.If):
                test = evaluate(stmt.test, env, self.config) if exact else Unknown("")
                if exact and not isinstance(test, Unknown | ConfigRef):
                    self._exec(info, stmt.body if test else stmt.orelse, env, exact, uncertain)
                else:
                    why = Unknown(f"set under `if {ast.unparse(stmt.test)}`")
                    for branch in (stmt.body, stmt.orelse):
                        self._exec(info, branch, dict(env), exact=False)
                        for name in _assigned_names(branch):
                            env[name] = why
                            if uncertain is not None:
                                uncertain.add(name)
            elif isinstance(stmt, ast.With | ast.Try):
                self._exec(info, stmt.body, env, exact, uncertain)
            elif isinstance(stmt, ast.For | ast.While | ast.AsyncFor):
                self._exec(info, stmt.body, dict(env), exact=False)
                for name in _assigned_names(stmt.body):
                    env[name] = Unknown(f"set in a loop (`{ast.unparse(stmt)[:40]}`)")
                    if uncertain is not None:
                        uncertain.add(name)
            elif isinstance(stmt, ast.FunctionDef):
                env[stmt.name] = Unknown(f"`{stmt.name}()`")


def _built_by(info: ClassInfo) -> list[str]:
    """`__init__` and the methods of the class it calls as `self.method(...)`."""
    init = info.methods.get("__init__")
    if init is None:
        return []
    called = [
        node.func.attr
        for stmt in statements(init.body)
        if isinstance(stmt, ast.Expr | ast.Assign)
        for node in [stmt.value]
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "self"
        and node.func.attr in info.methods
        and node.func.attr != "__init__"
    ]
    return ["__init__", *dict.fromkeys(called)]


def _init_defaults(init: ast.FunctionDef) -> dict[str, Any]:
    """A configuration `__init__`'s defaults as attributes: `self.X = param` where `param` has a
    constant default (what the config object holds when config.json lacks the key)."""
    args = init.args
    positional = args.posonlyargs + args.args
    defaults: dict[str, ast.expr] = dict(
        zip(
            [a.arg for a in positional[len(positional) - len(args.defaults) :]],
            args.defaults,
            strict=True,
        )
    )
    defaults.update(
        {a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None}
    )
    out: dict[str, Any] = {}
    for stmt in init.body:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Attribute)
            and isinstance(stmt.targets[0].value, ast.Name)
            and stmt.targets[0].value.id == "self"
            and isinstance(stmt.value, ast.Name)
            and isinstance(defaults.get(stmt.value.id), ast.Constant)
        ):
            value = defaults[stmt.value.id]
            assert isinstance(value, ast.Constant)
            if isinstance(value.value, int | float | str | bool) or value.value is None:
                out.setdefault(stmt.targets[0].attr, value.value)
    return out


_BUILTINS = frozenset(
    {"max", "min", "int", "float", "bool", "str", "len", "abs", "round", "getattr", "sum",
     "tuple", "list", "dict", "set", "range", "isinstance", "hasattr", "divmod", "pow", "any",
     "all", "sorted", "zip", "enumerate", "type", "frozenset"}
)  # fmt: skip
_TENSOR_NAMESPACES = frozenset({"torch", "math", "F", "np", "numpy", "functional"})


def _value_call(call: ast.Call) -> bool:
    """A call that makes a value, not a module: a builtin (`max(1, n)`), or a lowercase
    function of torch / math / numpy (`torch.zeros(...)`: a tensor)."""
    if isinstance(call.func, ast.Name):
        return call.func.id in _BUILTINS
    if isinstance(call.func, ast.Attribute) and call.func.attr[:1].islower():
        base = call.func.value
        while isinstance(base, ast.Attribute):
            base = base.value
        return isinstance(base, ast.Name) and base.id in _TENSOR_NAMESPACES
    return False


def _assigned_names(body: Iterable[ast.stmt]) -> set[str]:
    out: set[str] = set()
    for stmt in body:
        for node in ast.walk(stmt):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
            elif isinstance(node, ast.AnnAssign | ast.AugAssign):
                targets = [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    out.add(t.id)
                elif (
                    isinstance(t, ast.Attribute)
                    and isinstance(t.value, ast.Name)
                    and t.value.id == "self"
                ):
                    out.add(f"self.{t.attr}")
    return out
