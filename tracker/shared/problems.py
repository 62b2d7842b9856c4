"""One formatter from pydantic validation errors to the one-line problems a ConfigError lists.

The watchlist, its `estimate:` block and its `advisories:` overrides are pydantic models; they all
report through `validate`, so every problem is found at once and said the same way:
`<where>: unknown key 'poll_intervall' (did you mean 'poll_interval'?); allowed: ...`,
`<where>.severity: 'urgent' is not one of critical, high, moderate, low`,
`<where>: needs <the field's description>`, `<where>.lora_rank: must be > 0, got -5`.
Pure: pydantic and the standard library only.
"""

from __future__ import annotations

import difflib
import re
import typing
from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from tracker.shared.errors import ConfigError

M = TypeVar("M", bound=BaseModel)
_QUOTED = re.compile(r"'([^']*)'")


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    """` (did you mean 'x'?)` for the closest of `choices`, or ''."""
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _fields(loc: Sequence[int | str]) -> tuple[int | str, ...]:
    """`loc` without the tags pydantic adds for union members and validators (`list[int]`,
    `function-after[...]`): field names never hold brackets."""
    return tuple(p for p in loc if isinstance(p, int) or ("[" not in p and "(" not in p))


def _path(where: str, loc: Sequence[int | str]) -> str:
    out = where
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out = f"{out}.{part}" if out else str(part)
    return out


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _model_at(root: type[BaseModel], loc: Sequence[int | str]) -> type[BaseModel] | None:
    """The model class that validated the mapping at `loc` under `root` (None if not a model)."""
    models = [root]
    for part in loc:
        if isinstance(part, int):
            continue
        models = [
            m
            for model in models
            if (field := model.model_fields.get(part)) is not None
            for m in _models_in(field.annotation)
        ]
    return models[0] if models else None


def _keys(model: type[BaseModel]) -> list[str]:
    return [f.alias or name for name, f in model.model_fields.items()]


def describe(error: ErrorDetails, root: type[BaseModel] | None, where: str, name: str = "") -> str:
    """One line for one pydantic error, located as `where` + its path (`name` when that is
    empty: the document itself)."""
    loc = _fields(error["loc"])
    kind, value, ctx = error["type"], error.get("input"), error.get("ctx") or {}
    if kind == "extra_forbidden" and loc:
        parent = _model_at(root, loc[:-1]) if root is not None else None
        allowed = _keys(parent) if parent is not None else []
        key = str(loc[-1])
        tail = f"; allowed: {', '.join(allowed)}" if allowed else ""
        return f"{_path(where, loc[:-1]) or name}: unknown key {key!r}{did_you_mean(key, allowed)}{tail}"
    if kind == "missing" and loc:
        parent = _model_at(root, loc[:-1]) if root is not None else None
        field = parent.model_fields.get(str(loc[-1])) if parent is not None else None
        need = field.description if field is not None and field.description else repr(loc[-1])
        return f"{_path(where, loc[:-1]) or name}: needs {need}"
    at = _path(where, loc) or name
    if kind in ("enum", "literal_error"):
        choices = _QUOTED.findall(str(ctx.get("expected", "")))
        hint = did_you_mean(str(value), choices)
        return f"{at}: {value!r} is not one of {', '.join(choices)}{hint}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        op = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<"}.get(kind, "<=")
        bound = next(iter(ctx.values()), "?")
        return f"{at}: must be {op} {bound}, got {value!r}"
    if kind in ("int_type", "int_from_float", "int_parsing"):
        return f"{at}: must be an integer, got {value!r}"
    if kind in ("float_type", "float_parsing", "finite_number"):
        return f"{at}: must be a finite number, got {value!r}"
    if kind in ("string_type", "str_type"):
        return f"{at}: must be a string, got {value!r}"
    if kind in ("dict_type", "model_type", "model_attributes_type", "dataclass_type"):
        return f"{at}: must be a mapping, not {type(value).__name__}"
    if kind in ("list_type", "tuple_type"):
        return f"{at}: must be a list, not {type(value).__name__}"
    if kind == "too_short":
        return f"{at}: must not be empty"
    msg = error["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return f"{at}: {msg}"


def problems_of(
    exc: ValidationError, root: type[BaseModel] | None = None, where: str = "", name: str = ""
) -> tuple[str, ...]:
    """Every error of `exc` as one line (see `describe`), in order, without repeats."""
    return tuple(dict.fromkeys(describe(e, root, where, name) for e in exc.errors()))


def validate(
    model: type[M],
    data: object,
    *,
    where: str,
    message: str,
    error: type[ConfigError] = ConfigError,
) -> M:
    """`data` validated as `model`, or `error(message, every problem)`."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise error(message, problems_of(exc, model, where)) from exc


def collect(
    model: type[M], data: object, where: str, problems: list[str], *, name: str = ""
) -> M | None:
    """`data` validated as `model`, or None with its problems appended to `problems`."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems.extend(problems_of(exc, model, where, name))
        return None


__all__ = ["collect", "describe", "did_you_mean", "problems_of", "validate"]
