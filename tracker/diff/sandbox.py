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


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    """ImmutableSandboxedEnvironment with size checks on operators, filters and calls."""

    code_generator_class = _BoundedCodeGenerator
    intercepted_binops = frozenset({"*", "**", "+", "%", "//"})

    def __init__(self, limits: RenderLimits) -> None:
        super().__init__(
            trim_blocks=True,
            lstrip_blocks=True,
            extensions=[_GenerationTag, jinja2.ext.loopcontrols],
        )
        self.limits = limits
        self.filters["tojson"] = _tojson
        self.filters = {name: self._bounded(f) for name, f in self.filters.items()}
        self.globals["raise_exception"] = _raise_exception
        self.globals["strftime_now"] = _strftime_now
        self.globals["dict"] = _TemplateDict()
        self.globals["namespace"] = _TemplateNamespace

    def _check_size(self, value: Any) -> Any:
        if (
            isinstance(value, str | list | tuple | bytes | dict)
            and len(value) > self.limits.max_size
        ):
            raise _LimitExceeded(
                f"value of {len(value)} items over the {self.limits.max_size} limit"
            )
        return value

    def _check_args(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        for value in (*args, *kwargs.values()):
            if (
                isinstance(value, int)
                and not isinstance(value, bool)
                and abs(value) > self.limits.max_int_arg
            ):
                raise _LimitExceeded(
                    f"integer argument {value} over the {self.limits.max_int_arg} limit"
                )

    def _bounded(self, func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self._check_args(args, kwargs)
            for value in args:
                if isinstance(value, str) and func.__name__ == "do_format":
                    _check_format(value)
            return self._check_size(func(*args, **kwargs))

        return wrapper

    def bounded_join(self, parts: tuple[Any, ...]) -> str:
        """`~` concatenation with the size limit."""
        texts = [str(p) for p in parts]
        if sum(len(t) for t in texts) > self.limits.max_size:
            raise _LimitExceeded("string concatenation over the size limit")
        return "".join(texts)

    def call_binop(
        self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any
    ) -> Any:
        ints = isinstance(left, int) and isinstance(right, int)
        if operator == "**" and ints and left not in (0, 1, -1) and (right > 4096 or right < -4096):
            raise _LimitExceeded(f"exponent {right} over the limit")
        if operator == "*" and not ints:
            for seq, n in ((left, right), (right, left)):
                if (
                    isinstance(seq, str | list | tuple)
                    and isinstance(n, int)
                    and len(seq) * n > self.limits.max_size
                ):
                    raise _LimitExceeded("repetition over the size limit")
        if operator == "*" and ints and left.bit_length() + right.bit_length() > 65536:
            raise _LimitExceeded("integer product over the limit")
        if operator == "%" and isinstance(left, str):
            _check_format(left)
        if (
            operator == "+"
            and isinstance(left, str | list | tuple)
            and isinstance(right, str | list | tuple)
            and len(left) + len(right) > self.limits.max_size
        ):
            raise _LimitExceeded("concatenation over the size limit")
        return self._check_size(super().call_binop(context, operator, left, right))

    def call(
        __self, __context: jinja2.runtime.Context, __obj: Any, *args: Any, **kwargs: Any
    ) -> Any:
        __self._check_args(args, kwargs)
        # jinja wraps str.format/format_map (sandbox.wrap_str_format); the string is the bound self
        target = getattr(__obj, "__wrapped__", __obj)
        owner = getattr(target, "__self__", None)
        if getattr(target, "__name__", "") in ("format", "format_map") and isinstance(owner, str):
            _check_format(owner)
        return __self._check_size(super().call(__context, __obj, *args, **kwargs))


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
