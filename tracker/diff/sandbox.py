"""Bounded chat-template rendering: jinja2's ImmutableSandboxedEnvironment set up as transformers does.

Bounds: wall time (a worker thread with a trace-based deadline checked on every template line and
call, abandoned if stuck in C), output size (a capped writer), size of every intermediate string
or list built by `*`, `+`, `~`, `%`, filters and method calls, integer arguments and exponents,
recursion (Python's limit) and template source length. Every failure is a RenderResult, never a
raised exception, a hang or an escape. Time is fixed (`strftime_now` uses FIXED_NOW): pure.
"""

from __future__ import annotations

import functools
import json
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from types import FrameType
from typing import Any

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.sandbox import ImmutableSandboxedEnvironment

FIXED_NOW = datetime(2026, 1, 1, 12, 0, 0)
"""The time `strftime_now` reports: rendering is pure and reproducible."""


@dataclass(frozen=True)
class RenderLimits:
    """The bounds of one render."""

    seconds: float = 2.0
    max_output: int = 1_000_000
    max_size: int = 1_000_000
    max_int_arg: int = 1_000_000
    max_source: int = 512_000


DEFAULT_LIMITS = RenderLimits()


@dataclass(frozen=True)
class RenderResult:
    """The outcome of one render: `output` when `error` is empty, else the failure.

    `category`: `ok`; `raised` (the template called raise_exception: deliberate); `syntax` (does
    not parse); `error` (failed while rendering); `security` (sandbox refused an operation);
    `limit` (a size or recursion bound); `timeout` (ran past the deadline).
    """

    output: str
    error: str = ""
    category: str = "ok"

    @property
    def ok(self) -> bool:
        return self.category == "ok"

    def shown(self) -> str:
        """The output, or `<category: error>` when it failed."""
        return self.output if self.ok else f"<{self.category}: {self.error}>"


class _Deadline(BaseException):
    """Raised inside the worker thread when time is up (BaseException: templates cannot swallow it)."""


class _LimitExceeded(jinja2.exceptions.SecurityError):
    """An operation would build something larger than the limits allow."""


_BIG_NUMBER_IN_FORMAT = re.compile(r"\d{7,}|\*")


def _check_format(fmt: str) -> None:
    if _BIG_NUMBER_IN_FORMAT.search(fmt):
        raise _LimitExceeded("format string with an oversized width, precision or '*'")


class _BoundedCodeGenerator(CodeGenerator):
    """Routes `~` concatenation through a size-checked join."""

    def visit_Concat(self, node: jinja2.nodes.Concat, frame: Frame) -> None:
        self.write("environment.bounded_join((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class _GenerationTag(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}` (transformers' AssistantTracker), rendered as its body."""

    tags = {"generation"}  # noqa: RUF012 (jinja's API)

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller: Callable[[], str]) -> str:
        return caller()


class _TemplateNamespace(jinja2.utils.Namespace):
    """Namespace that rejects underscore-prefixed names, as transformers' TemplateNamespace does."""

    def __init__(*args: Any, **kwargs: Any) -> None:
        self, rest = args[0], args[1:]
        attrs = dict(*rest, **kwargs)
        for name in attrs:
            _TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        _TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check_name(name: Any) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"underscore-prefixed namespace attribute {name!r}"
            )


class _TemplateDict:
    """`dict(...)` for templates without exposing the dict type (as transformers does)."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict.fromkeys(*args, **kwargs)


_JINJA_INTERNALS = (jinja2.runtime.Context, jinja2.nodes.EvalContext, jinja2.Environment)


MAX_STEPS = 20_000
"""weight() looks at no more than this many values: anything larger counts as over the budget."""


def weight(value: Any, budget: int) -> int:
    """An upper-bound-ish size of `value` once rendered (characters, items, digits), computed
    iteratively and stopping as soon as it exceeds `budget` (so it costs O(budget) at most).

    Strings count their length, containers their items plus their elements' weights, namespaces
    their attributes, ints their decimal digits; more than MAX_STEPS values count as over the
    budget (a check stays cheap). A container referenced twice counts twice (its repr is printed
    twice: `[x, x]` doubling must not look small); every visit adds at least 1, so cycles and
    shared structure end when the budget runs out. Types are tested with `type()`, never
    `isinstance`, which would run a Namespace's own `__getattribute__`.
    """
    total = 0
    steps = 0
    stack = [value]
    while stack:
        steps += 1
        if steps > MAX_STEPS:
            return budget + 1
        v = stack.pop()
        t = type(v)
        if issubclass(t, str | bytes):
            total += len(v)
        elif t is bool or v is None:
            total += 1
        elif issubclass(t, int):
            total += v.bit_length() // 3 + 1
        elif t is range:
            total += len(v)
        elif issubclass(t, list | tuple | set | frozenset | dict | jinja2.utils.Namespace):
            if issubclass(t, jinja2.utils.Namespace):
                v = object.__getattribute__(v, "_Namespace__attrs")
            total += 1 + len(v)
            if total > budget:
                return total
            if isinstance(v, dict):
                stack.extend(v.keys())
                stack.extend(v.values())
            else:
                stack.extend(v)
        else:
            total += 1
        if total > budget:
            return total
    return total


def _plain(args: tuple[Any, ...]) -> list[Any]:
    """Filter arguments without jinja's injected context objects."""
    return [a for a in args if not isinstance(a, _JINJA_INTERNALS)]


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    """ImmutableSandboxedEnvironment that estimates and bounds the size of everything it builds.

    Operators (`*`, `**`, `+`, `%`), `~` concatenation, every filter, every method call and every
    printed value are checked before they run (estimated result size, integer arguments) and after
    (actual result size). Non-deterministic helpers (`random` filter, `lipsum`) are refused so that
    a render is a pure function of template and conversation.
    """

    code_generator_class = _BoundedCodeGenerator
    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, limits: RenderLimits) -> None:
        super().__init__(
            trim_blocks=True,
            lstrip_blocks=True,
            extensions=[_GenerationTag, jinja2.ext.loopcontrols],
            finalize=self._finalize,
        )
        self.limits = limits
        self.filters["tojson"] = _tojson
        self.filters["random"] = _refuse("the random filter")
        self.filters = {name: self._bounded(name, f) for name, f in self.filters.items()}
        self.globals["raise_exception"] = _raise_exception
        self.globals["strftime_now"] = _strftime_now
        self.globals["dict"] = _TemplateDict()
        self.globals["namespace"] = _TemplateNamespace
        self.globals["lipsum"] = _refuse("lipsum()")

    # -- checks ---------------------------------------------------------------------------
    def _over(self, size: int, what: str) -> None:
        if size > self.limits.max_size:
            raise _LimitExceeded(f"{what} over the size limit ({self.limits.max_size})")

    def _guard(self, value: Any, what: str = "value") -> Any:
        self._over(weight(value, self.limits.max_size), what)
        return value

    def _check_args(self, args: Any, kwargs: Mapping[str, Any]) -> None:
        values = [*args, *kwargs.values()]
        for value in values:
            if (
                isinstance(value, int)
                and not isinstance(value, bool)
                and abs(value) > self.limits.max_int_arg
            ):
                raise _LimitExceeded(
                    f"integer argument {value} over the {self.limits.max_int_arg} limit"
                )
        self._over(weight(values, self.limits.max_size), "arguments")

    def _estimate(self, name: str, args: list[Any], kwargs: Mapping[str, Any]) -> int:
        """Estimated result size of filter / str method `name` (0 when it cannot grow its input)."""
        budget = self.limits.max_size
        first = args[0] if args else None
        rest = args[1:]
        if name == "join":
            sep = rest[0] if rest else kwargs.get("d", "")
            if isinstance(first, str) and isinstance(rest[0] if rest else None, list | tuple):
                first, sep = rest[0], first  # str.join(iterable): self is the separator
            n = len(first) if isinstance(first, list | tuple | dict | str) else 0
            return weight(first, budget) + n * (len(sep) if isinstance(sep, str) else 1)
        if name == "replace" and isinstance(first, str) and len(rest) >= 2:
            old, new = str(rest[0]), str(rest[1])
            hits = first.count(old) if old else len(first) + 1
            return len(first) + hits * max(0, len(new) - len(old))
        if name == "indent" and isinstance(first, str):
            width = rest[0] if rest else kwargs.get("width", 4)
            per = width if isinstance(width, int) else len(str(width))
            return len(first) + (first.count("\n") + 1) * per
        if name in ("format", "format_map") and isinstance(first, str):
            _check_format(first)
            refs = first.count("{") + first.count("%") + 1
            return len(first) + refs * weight([rest, dict(kwargs)], budget)
        if name == "expandtabs" and isinstance(first, str):
            tab = rest[0] if rest else kwargs.get("tabsize", 8)
            return len(first) + first.count("\t") * (tab if isinstance(tab, int) else 8)
        if name == "wordwrap" and isinstance(first, str):
            width = rest[0] if rest else kwargs.get("width", 79)
            wrap = rest[3] if len(rest) > 3 else kwargs.get("wrapstring", "\n")
            lines = len(first) // max(1, width if isinstance(width, int) else 1) + 1
            return len(first) + lines * len(str(wrap))
        if name == "tojson":
            indent = rest[1] if len(rest) > 1 else kwargs.get("indent")
            per = indent if isinstance(indent, int) else len(str(indent or ""))
            return weight(first, budget) * (4 + per)
        return 0

    def _bounded(self, name: str, func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            plain = _plain(args)
            self._check_args(plain, kwargs)
            self._over(self._estimate(name, plain, kwargs), f"filter {name}")
            return self._guard(func(*args, **kwargs), f"result of filter {name}")

        return wrapper

    def _finalize(self, value: Any) -> Any:
        return self._guard(value, "printed value")

    # -- interception points ------------------------------------------------------------------
    def bounded_join(self, parts: tuple[Any, ...]) -> str:
        """`~` concatenation with the size limit (checked before any str() conversion)."""
        self._guard(list(parts), "string concatenation")
        texts = [str(p) for p in parts]
        self._over(sum(len(t) for t in texts), "string concatenation")
        return "".join(texts)

    def call_binop(
        self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any
    ) -> Any:
        budget = self.limits.max_size
        ints = isinstance(left, int) and isinstance(right, int)
        if (
            operator == "**"
            and ints
            and abs(left) > 1
            and right > 0
            and left.bit_length() * right > 4 * budget
        ):
            raise _LimitExceeded(f"power with exponent {right} over the size limit")
        if operator == "*":
            if ints and left.bit_length() + right.bit_length() > 4 * budget:
                raise _LimitExceeded("integer product over the size limit")
            for seq, n in ((left, right), (right, left)):
                if (
                    isinstance(seq, str | list | tuple)
                    and isinstance(n, int)
                    and not isinstance(n, bool)
                ):
                    self._over(weight(seq, budget) * max(n, 0), "repetition")
        if (
            operator == "+"
            and isinstance(left, str | list | tuple)
            and isinstance(right, str | list | tuple)
        ):
            self._over(weight(left, budget) + weight(right, budget), "concatenation")
        if operator == "%" and isinstance(left, str):
            self._over(self._estimate("format", [left, right], {}), "%-formatting")
        return self._guard(
            super().call_binop(context, operator, left, right), f"result of {operator}"
        )

    def call(
        __self, __context: jinja2.runtime.Context, __obj: Any, *args: Any, **kwargs: Any
    ) -> Any:
        __self._check_args(args, kwargs)
        # jinja wraps str.format/format_map (sandbox.wrap_str_format); the string is the bound self
        target = getattr(__obj, "__wrapped__", __obj)
        owner = getattr(target, "__self__", None)
        if isinstance(owner, str):
            name = getattr(target, "__name__", "")
            __self._over(__self._estimate(name, [owner, *args], kwargs), f"str.{name}")
        return __self._guard(super().call(__context, __obj, *args, **kwargs), "result of a call")


def _refuse(what: str) -> Callable[..., Any]:
    def refused(*args: Any, **kwargs: Any) -> Any:
        raise jinja2.exceptions.SecurityError(
            f"{what} is not available (renders must be deterministic)"
        )

    return refused


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(
    x: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: Any = None,
    sort_keys: bool = False,
) -> str:
    # transformers overrides jinja's tojson (which HTML-escapes) with plain json.dumps and these options
    return json.dumps(
        x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _strftime_now(fmt: str) -> str:
    return FIXED_NOW.strftime(fmt)


def _render_in_thread(
    source: str, variables: Mapping[str, Any], limits: RenderLimits, box: list[RenderResult]
) -> None:
    deadline = time.monotonic() + limits.seconds

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if time.monotonic() > deadline:
            raise _Deadline
        return local

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        if time.monotonic() > deadline:
            raise _Deadline
        return local if frame.f_code.co_filename == "<template>" else None

    sys.settrace(tracer)
    try:
        box.append(_render_now(source, variables, limits))
    except _Deadline:
        box.append(RenderResult("", f"rendering took over {limits.seconds:g} s", "timeout"))
    finally:
        sys.settrace(None)


def _render_now(source: str, variables: Mapping[str, Any], limits: RenderLimits) -> RenderResult:
    env = BoundedEnvironment(limits)
    try:
        template = env.from_string(source)
    except jinja2.exceptions.TemplateSyntaxError as exc:
        return RenderResult("", f"line {exc.lineno}: {exc.message}", "syntax")
    except (RecursionError, MemoryError) as exc:
        return RenderResult(
            "", f"template too deeply nested to parse ({type(exc).__name__})", "limit"
        )
    except _LimitExceeded as exc:
        return RenderResult("", str(exc), "limit")
    except Exception as exc:
        return RenderResult("", f"{type(exc).__name__}: {exc}", "syntax")
    chunks: list[str] = []
    size = 0
    try:
        for chunk in template.generate(**variables):
            size += len(chunk)
            if size > limits.max_output:
                return RenderResult("", f"output over {limits.max_output} characters", "limit")
            chunks.append(chunk)
    except _LimitExceeded as exc:
        return RenderResult("", str(exc), "limit")
    except jinja2.exceptions.SecurityError as exc:
        return RenderResult("", str(exc), "security")
    except (RecursionError, MemoryError, OverflowError) as exc:
        return RenderResult("", f"{type(exc).__name__}: {exc}", "limit")
    except jinja2.exceptions.UndefinedError as exc:
        return RenderResult("", f"UndefinedError: {exc}", "error")
    except jinja2.exceptions.TemplateError as exc:
        return RenderResult("", str(exc), "raised")
    except Exception as exc:
        return RenderResult("", f"{type(exc).__name__}: {exc}", "error")
    return RenderResult("".join(chunks))


def render_template(
    source: str, variables: Mapping[str, Any], limits: RenderLimits = DEFAULT_LIMITS
) -> RenderResult:
    """Render chat template `source` with `variables` within `limits`; never raises, never hangs.

    Output: RenderResult (see its categories). The render runs in a daemon worker thread; when it
    does not finish by the deadline plus a grace second (stuck inside one C call), it is abandoned
    and reported as a timeout.
    """
    if len(source) > limits.max_source:
        return RenderResult(
            "", f"template of {len(source)} characters over the {limits.max_source} limit", "limit"
        )
    box: list[RenderResult] = []
    worker = threading.Thread(
        target=_render_in_thread,
        args=(source, variables, limits, box),
        name="chat-template-render",
        daemon=True,
    )
    worker.start()
    worker.join(limits.seconds + 1.0)
    if worker.is_alive() or not box:
        return RenderResult("", f"rendering took over {limits.seconds:g} s", "timeout")
    return box[0]
