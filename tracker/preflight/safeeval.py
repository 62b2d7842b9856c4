"""A whitelist evaluator for expressions of remote modeling code, over config.json (pure, AST only).

`evaluate(node, env, config)` gives the value of an expression built only from constants, names
and `self.` attributes bound in `env`, attributes of `config` (and `self.config`), the call
`getattr(config, "key"[, default])`, `+ - * //`, unary minus, `not`, comparisons, `and`/`or` and
conditional expressions; anything else is `Unknown`, whose `why` names the expression that was not
understood. Nothing is ever executed: no call but that `getattr` is evaluated, no attribute but a
config key is read, so the code cannot reach the interpreter through it.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any


class Unknown:
    """A value the evaluator could not give; `why` names what was not understood."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why

    def __repr__(self) -> str:
        return f"Unknown({self.why!r})"


class ConfigRef:
    """The `config` object of the remote code: attribute reads are config.json lookups."""

    __slots__ = ("data",)

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.data = data


class ClassRef:
    """A local name bound to a class (`LayerNormFunc = RMSNorm if config.rmsnorm else LayerNorm`):
    not a value the evaluator computes with, only what a later call builds."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"ClassRef({self.name!r})"


Value = int | float | bool | str | None | Unknown | ConfigRef | ClassRef


def evaluate(node: ast.expr, env: Mapping[str, Value], config: Mapping[str, Any]) -> Value:
    """`node`'s value under the whitelist of the module docstring (Unknown otherwise)."""
    if isinstance(node, ast.Constant):
        v = node.value
        return (
            v
            if isinstance(v, int | float | str | bool) or v is None
            else Unknown(ast.unparse(node))
        )
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        if node.id == "config":
            return ConfigRef(config)
        return Unknown(f"`{node.id}`")
    if isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            key = f"self.{node.attr}"
            if key in env:
                return env[key]
            if node.attr == "config":
                return ConfigRef(config)
            return Unknown(f"`self.{node.attr}`")
        base = evaluate(node.value, env, config)
        if isinstance(base, ConfigRef):
            if node.attr in base.data:
                v = base.data[node.attr]
                return (
                    v
                    if isinstance(v, int | float | str | bool) or v is None
                    else Unknown(f"`config.{node.attr}` is not a number")
                )
            return Unknown(f"`config.{node.attr}` is not in config.json")
        return base if isinstance(base, Unknown) else Unknown(f"`{ast.unparse(node)}`")
    if isinstance(node, ast.Call):
        return _call(node, env, config)
    if isinstance(node, ast.BinOp):
        a, b = evaluate(node.left, env, config), evaluate(node.right, env, config)
        for side in (a, b):
            if isinstance(side, Unknown):
                return side
        if not (_number(a) and _number(b)):
            return Unknown(f"`{ast.unparse(node)}`")
        assert isinstance(a, int | float) and isinstance(b, int | float)
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult):
            return a * b
        if isinstance(node.op, ast.FloorDiv) and b != 0:
            return a // b
        return Unknown(f"`{ast.unparse(node)}`")
    if isinstance(node, ast.UnaryOp):
        operand = evaluate(node.operand, env, config)
        if isinstance(operand, Unknown):
            return operand
        if isinstance(node.op, ast.Not) and not isinstance(operand, ConfigRef):
            return not operand
        if isinstance(node.op, ast.USub) and _number(operand):
            assert isinstance(operand, int | float)
            return -operand
        return Unknown(f"`{ast.unparse(node)}`")
    if isinstance(node, ast.BoolOp):
        result: Value = None
        for part in node.values:
            result = evaluate(part, env, config)
            if isinstance(result, Unknown | ConfigRef):
                return Unknown(f"`{ast.unparse(node)}`")
            if isinstance(node.op, ast.And) and not result:
                return result
            if isinstance(node.op, ast.Or) and result:
                return result
        return result
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        a, b = evaluate(node.left, env, config), evaluate(node.comparators[0], env, config)
        if isinstance(a, Unknown | ConfigRef) or isinstance(b, Unknown | ConfigRef):
            return Unknown(f"`{ast.unparse(node)}`")
        return _compare(node.ops[0], a, b, node)
    if isinstance(node, ast.IfExp):
        test = evaluate(node.test, env, config)
        if isinstance(test, Unknown | ConfigRef):
            return Unknown(f"`{ast.unparse(node.test)}`")
        return evaluate(node.body if test else node.orelse, env, config)
    return Unknown(f"`{ast.unparse(node)}`")


def _number(v: Value) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _compare(op: ast.cmpop, a: Value, b: Value, node: ast.expr) -> Value:
    if isinstance(op, ast.Is):
        return a is b if a is None or b is None else Unknown(f"`{ast.unparse(node)}`")
    if isinstance(op, ast.IsNot):
        return a is not b if a is None or b is None else Unknown(f"`{ast.unparse(node)}`")
    if isinstance(op, ast.Eq):
        return a == b
    if isinstance(op, ast.NotEq):
        return a != b
    if _number(a) and _number(b):
        assert isinstance(a, int | float) and isinstance(b, int | float)
        if isinstance(op, ast.Lt):
            return a < b
        if isinstance(op, ast.LtE):
            return a <= b
        if isinstance(op, ast.Gt):
            return a > b
        if isinstance(op, ast.GtE):
            return a >= b
    return Unknown(f"`{ast.unparse(node)}`")


def _call(node: ast.Call, env: Mapping[str, Value], config: Mapping[str, Any]) -> Value:
    """Only `getattr(config, "key"[, default])` is evaluated: a config lookup."""
    if (
        isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and 2 <= len(node.args) <= 3
        and not node.keywords
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    ):
        base = evaluate(node.args[0], env, config)
        key = node.args[1].value
        if isinstance(base, ConfigRef):
            if key in base.data:
                v = base.data[key]
                return (
                    v
                    if isinstance(v, int | float | str | bool) or v is None
                    else Unknown(f"`config.{key}` is not a number")
                )
            if len(node.args) == 3:
                return evaluate(node.args[2], env, config)
            return Unknown(f"`config.{key}` is not in config.json")
    return Unknown(f"`{ast.unparse(node)}`")
