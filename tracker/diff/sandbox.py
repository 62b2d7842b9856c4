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

from tracker.diff.bounds import LimitExceeded, estimate, weight

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
            raise LimitExceeded(f"{what} over the size limit ({self.limits.max_size})")

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
                raise LimitExceeded(
                    f"integer argument {value} over the {self.limits.max_int_arg} limit"
                )
        self._over(weight(values, self.limits.max_size), "arguments")

    def _bounded(self, name: str, func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            plain = _plain(args)
            self._check_args(plain, kwargs)
            self._over(estimate(name, plain, kwargs, self.limits.max_size), f"filter {name}")
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
            raise LimitExceeded(f"power with exponent {right} over the size limit")
        if operator == "*":
            if ints and left.bit_length() + right.bit_length() > 4 * budget:
                raise LimitExceeded("integer product over the size limit")
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
            self._over(estimate("format", [left, right], {}, self.limits.max_size), "%-formatting")
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
            __self._over(
                estimate(name, [owner, *args], kwargs, __self.limits.max_size), f"str.{name}"
            )
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
    except LimitExceeded as exc:
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
    except LimitExceeded as exc:
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
