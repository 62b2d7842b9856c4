"""Bounded chat-template rendering: jinja2's ImmutableSandboxedEnvironment set up as transformers does,
with a deterministic cost budget. Every outcome is a pure function of (template, variables, limits).

Why a step budget and not a deadline: a render that runs out of time becomes a "no longer renders"
change, rated high and published exactly once. With a wall-clock deadline, CPU load alone decides
that outcome (a busy machine publishes a false advisory, two workers disagree). So the render is
charged in *steps*, counted from what the template does, never from time:

- static cost: each time a block of template code runs (the template body once; a loop body per
  iteration; a macro, `caller()` or block body per call), it is charged the number of jinja AST
  nodes in that block (nested loop/macro bodies excluded: they charge on their own entry), with
  literal text and string constants charged by length as well (1 step per SIZE_UNIT characters).
  The counts are computed once at compile time and charged by a one-line `environment.tick(n)`
  the code generator puts at the top of each such block;
- iteration: every item a `{% for %}` draws from its iterable costs 1 (so items a loop filter
  skips, or an empty body, are not free);
- data: every value the size guards below inspect (filter, method and call arguments and results,
  intercepted operators, `~` concatenation, slices, printed values, both operands of every
  comparison and test) is charged the values visited to weigh it plus 1 per SIZE_UNIT characters,
  so work done in C on big strings and lists is paid for in proportion to its size.

A render that would go past `RenderLimits.steps` stops with outcome BUDGET, the same on an idle
and on a saturated machine (tests/diff/test_diff_budget.py). The costs are deterministic but only
approximate CPU work: a render spending the whole budget takes 0.01-0.75 s of CPU depending on
what it does (bench/RESULTS.md, "Chat-template render budget"), while the heaviest real template
in ../shared/corpus needs under 1% of it (also tested). Why not a trace-based counter
(`sys.settrace` line or opcode events): it slows every render several times, counts nothing done
in C (a 1 MB string compare is one event), and its counts change with the Python version.

The other bounds: output size (a capped writer), size of every intermediate string or list built by
`*`, `+`, `~`, `%`, filters and method calls, integer arguments and exponents, recursion (Python's
limit: a frame count, deterministic) and template source length; each failure is a RenderResult.
Time is fixed (`strftime_now` uses FIXED_NOW). What the budget cannot see (a pathological case
that costs far more CPU per step than estimated, memory exhaustion) is caught by the backstop in
`tracker.sandbox.render_backstop`, which runs this renderer in a killable subprocess under a CPU rlimit and
reports a hit as "retry later" (an error), never as a RenderResult. The diff takes the renderer as a
`Renderer` argument: `render_in_process` here (pure), the backstop's `render_batch` in the pipeline.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, cast

import jinja2
import jinja2.ext
import jinja2.nodes as nodes
from jinja2.compiler import CodeGenerator, Frame, operators, optimizeconst
from jinja2.sandbox import ImmutableSandboxedEnvironment

from tracker.diff.bounds import LimitExceeded, estimate, weigh

FIXED_NOW = datetime(2026, 1, 1, 12, 0, 0)
"""The time `strftime_now` reports: rendering is pure and reproducible."""

SIZE_UNIT = 256
"""Characters (or digits) of data that cost one step."""


@dataclass(frozen=True)
class RenderLimits:
    """The bounds of one render.

    `steps`: the deterministic cost budget (see the module docstring); the size bounds; and the
    backstop (`tracker.sandbox.render_backstop`): CPU seconds of the render subprocess per request, wall
    seconds the caller waits for it, and how far (MiB) a render may grow the subprocess's address
    space. The backstop never changes a result, it only defers one.
    """

    steps: int = 1_000_000
    max_output: int = 1_000_000
    max_size: int = 1_000_000
    max_int_arg: int = 1_000_000
    max_source: int = 512_000
    backstop_cpu_s: int = 30
    backstop_wall_s: float = 120.0
    backstop_memory_mib: int = 1024


DEFAULT_LIMITS = RenderLimits()


class RenderOutcome(StrEnum):
    """How one render ended. Every member but OK is a failure `RenderResult.shown()` names."""

    OK = "ok"
    RAISED = "raised"  # the template called raise_exception: deliberate
    SYNTAX = "syntax"  # does not parse
    ERROR = "error"  # failed while rendering
    SECURITY = "security"  # the sandbox refused an operation
    LIMIT = "limit"  # a size or recursion bound
    BUDGET = "budget"  # the step budget ran out


@dataclass(frozen=True)
class RenderResult:
    """The outcome of one render: `output` when `outcome` is OK, else `error` says what failed;
    `steps`: what the render was charged (see the module docstring)."""

    output: str
    error: str = ""
    outcome: RenderOutcome = RenderOutcome.OK
    steps: int = 0

    @property
    def ok(self) -> bool:
        return self.outcome is RenderOutcome.OK

    def shown(self) -> str:
        """The output, or `<outcome: error>` when it failed."""
        return self.output if self.ok else f"<{self.outcome.value}: {self.error}>"


Renderer = Callable[[str, Sequence[Mapping[str, Any]], RenderLimits], list[RenderResult]]
"""Renders one template once per variables mapping: `render_in_process`, or the backstop's
`tracker.sandbox.render_backstop.render_batch` (same results; may raise RetryLaterError instead)."""


class _OverBudget(BaseException):
    """The step budget ran out (BaseException: nothing in a template or jinja's runtime catches it)."""


# -- compile-time instrumentation ---------------------------------------------------------------
_REPEATED = (nodes.For, nodes.Macro, nodes.CallBlock, nodes.Block)
"""Nodes whose body runs once per iteration or call, and so charges on its own entry."""


def _static_cost(roots: Sequence[nodes.Node]) -> int:
    """Steps charged each time the block made of `roots` runs (nested repeated bodies excluded)."""
    total = 0
    stack = list(roots)
    while stack:
        node = stack.pop()
        total += 1
        if isinstance(node, nodes.TemplateData):
            total += len(node.data) // SIZE_UNIT
        elif isinstance(node, nodes.Const) and isinstance(node.value, str):
            total += len(node.value) // SIZE_UNIT
        if isinstance(node, nodes.For):
            stack.extend([node.target, node.iter, *node.else_])
        elif isinstance(node, nodes.Macro):
            stack.extend([*node.args, *node.defaults])
        elif isinstance(node, nodes.CallBlock):
            stack.extend([node.call, *node.args, *node.defaults])
        elif not isinstance(node, nodes.Block):
            stack.extend(node.iter_child_nodes())
    return total


class _BoundedCodeGenerator(CodeGenerator):
    """Emits the step charges and routes `~`, comparisons and slices through size checks.

    Before compiling, the template's AST is measured: the root body and every repeated body
    (loop, macro, call block, block) get a cost, written as `environment.tick(cost)` at the top of
    that body; every `for` loop's iterable is wrapped in `environment.counted(...)`. (jinja allows
    no custom node types, so this is done at code generation, keyed by the nodes' identity.)
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._tick_costs: dict[int, int] = {}
        self._counted_iters: set[int] = set()

    def visit_Template(self, node: nodes.Template, frame: Frame | None = None) -> None:
        self._tick_costs[id(node.body)] = _static_cost(node.body)
        for body_owner in node.find_all(_REPEATED):
            assert isinstance(body_owner, nodes.For | nodes.Macro | nodes.CallBlock | nodes.Block)
            extra = (
                [body_owner.test] if isinstance(body_owner, nodes.For) and body_owner.test else []
            )
            self._tick_costs[id(body_owner.body)] = _static_cost([*body_owner.body, *extra])
            if isinstance(body_owner, nodes.For):
                self._counted_iters.add(id(body_owner.iter))
        super().visit_Template(node, frame)

    def blockvisit(self, body: Iterable[nodes.Node], frame: Frame) -> None:
        cost = self._tick_costs.get(id(body))
        if cost is not None:
            self.writeline(f"environment.tick({cost})")
        super().blockvisit(body, frame)

    def visit(self, node: nodes.Node, *args: Any, **kwargs: Any) -> Any:
        if id(node) in self._counted_iters:
            self.write("environment.counted(")
            super().visit(node, *args, **kwargs)
            self.write(")")
            return None
        return super().visit(node, *args, **kwargs)

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.bounded_join((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")

    @optimizeconst
    def visit_Compare(self, node: nodes.Compare, frame: Frame) -> None:
        self.write("(environment.sized(")
        self.visit(node.expr, frame)
        self.write(")")
        for op in node.ops:
            self.write(f" {operators[op.op]} environment.sized(")
            self.visit(op.expr, frame)
            self.write(")")
        self.write(")")

    def visit_Getitem(self, node: nodes.Getitem, frame: Frame) -> None:
        if isinstance(node.arg, nodes.Slice):  # jinja compiles slices inline, past getitem()
            self.write("environment.guarded(")
            super().visit_Getitem(node, frame)
            self.write(")")
        else:
            super().visit_Getitem(node, frame)


class _CountedIterable:
    """An iterable that charges one step per item; keeps the inner length (`loop.length`)."""

    __slots__ = ("_env", "_inner")

    def __init__(self, env: BoundedEnvironment, inner: Any) -> None:
        self._env = env
        self._inner = inner

    def __iter__(self) -> Iterator[Any]:
        tick = self._env.tick
        for item in self._inner:
            tick(1)
            yield item

    def __len__(self) -> int:
        return len(self._inner)


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
    """ImmutableSandboxedEnvironment that charges every render's steps and bounds what it builds.

    Operators (`*`, `**`, `+`, `-`, `/`, `//`, `%`, unary `-`), `~` concatenation, slices, every
    filter and test, every method call and every printed value are checked before they run
    (estimated result size, integer arguments) and after (actual result size); comparisons weigh
    their operands. Every check is charged to the step budget (see the module docstring).
    Non-deterministic helpers (`random` filter, `lipsum`) are refused so that a render is a pure
    function of template and conversation. One environment renders one template once.
    """

    code_generator_class = _BoundedCodeGenerator
    intercepted_binops = frozenset({"*", "**", "+", "-", "/", "//", "%"})
    intercepted_unops = frozenset({"-"})

    def __init__(self, limits: RenderLimits) -> None:
        super().__init__(
            trim_blocks=True,
            lstrip_blocks=True,
            extensions=[_GenerationTag, jinja2.ext.loopcontrols],
            finalize=self._finalize,
        )
        self.limits = limits
        self.steps = 0
        self._budget = limits.steps
        self.filters["tojson"] = _tojson
        self.filters["random"] = _refuse("the random filter")
        self.filters = {name: self._bounded(name, f) for name, f in self.filters.items()}
        tests = cast(dict[str, Callable[..., Any]], self.tests)
        self.tests = {name: self._tested(f) for name, f in tests.items()}
        self.globals["raise_exception"] = _raise_exception
        self.globals["strftime_now"] = _strftime_now
        self.globals["dict"] = _TemplateDict()
        self.globals["namespace"] = _TemplateNamespace
        self.globals["lipsum"] = _refuse("lipsum()")

    # -- the step budget --------------------------------------------------------------------
    def tick(self, cost: int) -> None:
        """Charge `cost` steps; past the budget the render stops (outcome BUDGET)."""
        self.steps += cost
        if self.steps > self._budget:
            raise _OverBudget

    def counted(self, iterable: Any) -> _CountedIterable:
        """A loop's iterable, one step per item drawn."""
        return _CountedIterable(self, iterable)

    def sized(self, value: Any) -> Any:
        """A comparison operand: charged by size (comparing big values is work, and a shared
        structure whose size explodes is refused before Python compares it)."""
        t = type(value)
        if t is str:
            self.tick(len(value) // SIZE_UNIT)
        elif not (
            t is bool or t is float or value is None or (t is int and value.bit_length() < 64)
        ):
            self._over(self._weigh(value), "compared value")
        return value

    def guarded(self, value: Any) -> Any:
        """A slice's result, checked and charged like any built value."""
        return self._guard(value, "slice")

    # -- checks ---------------------------------------------------------------------------
    def _weigh(self, value: Any) -> int:
        size, visits = weigh(value, self.limits.max_size)
        self.tick(visits + size // SIZE_UNIT)
        return size

    def _over(self, size: int, what: str) -> None:
        if size > self.limits.max_size:
            raise LimitExceeded(f"{what} over the size limit ({self.limits.max_size})")

    def _guard(self, value: Any, what: str = "value") -> Any:
        self._over(self._weigh(value), what)
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
        self._over(self._weigh(values), "arguments")

    def _bounded(self, name: str, func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            plain = _plain(args)
            self._check_args(plain, kwargs)
            self._over(estimate(name, plain, kwargs, self.limits.max_size), f"filter {name}")
            return self._guard(func(*args, **kwargs), f"result of filter {name}")

        return wrapper

    def _tested(self, func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for value in (*_plain(args), *kwargs.values()):
                self.sized(value)
            return func(*args, **kwargs)

        return wrapper

    def _finalize(self, value: Any) -> Any:
        return self._guard(value, "printed value")

    # -- interception points ------------------------------------------------------------------
    def bounded_join(self, parts: tuple[Any, ...]) -> str:
        """`~` concatenation with the size limit (checked before any str() conversion)."""
        self._guard(list(parts), "string concatenation")
        texts = [str(p) for p in parts]
        total = sum(len(t) for t in texts)
        self._over(total, "string concatenation")
        self.tick(total // SIZE_UNIT)
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
                    self._over(self._weigh(seq) * max(n, 0), "repetition")
        if (
            operator == "+"
            and isinstance(left, str | list | tuple)
            and isinstance(right, str | list | tuple)
        ):
            self._over(self._weigh(left) + self._weigh(right), "concatenation")
        if operator == "%" and isinstance(left, str):
            self._over(estimate("format", [left, right], {}, self.limits.max_size), "%-formatting")
        return self._guard(
            super().call_binop(context, operator, left, right), f"result of {operator}"
        )

    def call_unop(self, context: jinja2.runtime.Context, operator: str, arg: Any) -> Any:
        return self._guard(super().call_unop(context, operator, arg), f"result of {operator}")

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


def render_bounded(
    source: str, variables: Mapping[str, Any], limits: RenderLimits = DEFAULT_LIMITS
) -> RenderResult:
    """Render chat template `source` with `variables` within `limits`, in this process.

    Deterministic: the same arguments give the same RenderResult (steps included) on any machine
    load. Never raises for anything the template does, except MemoryError (the backstop's
    business: `tracker.sandbox.render_backstop` turns it into "retry later").
    """
    return render_in_process(source, [variables], limits)[0]


def render_in_process(
    source: str, variables: Sequence[Mapping[str, Any]], limits: RenderLimits = DEFAULT_LIMITS
) -> list[RenderResult]:
    """The Renderer that renders in this process: `source` compiled once, then rendered once per
    variables mapping, each render charged from the same start (what compiling cost: constant
    folding runs filters), so each result is what `render_bounded` alone would give."""
    if len(source) > limits.max_source:
        failed = RenderResult(
            "",
            f"template of {len(source)} characters over the {limits.max_source} limit",
            RenderOutcome.LIMIT,
        )
        return [failed] * len(variables)
    env = BoundedEnvironment(limits)
    compiled = _compile(env, source, limits)
    if not isinstance(compiled, jinja2.Template):
        output, error, outcome = compiled
        return [RenderResult(output, error, outcome, env.steps)] * len(variables)
    start = env.steps
    results = []
    for v in variables:
        env.steps = start
        output, error, outcome = _render(env, compiled, v, limits)
        results.append(RenderResult(output, error, outcome, env.steps))
    return results


def _compile(
    env: BoundedEnvironment, source: str, limits: RenderLimits
) -> jinja2.Template | tuple[str, str, RenderOutcome]:
    try:
        return env.from_string(source)
    except jinja2.exceptions.TemplateSyntaxError as exc:
        return "", f"line {exc.lineno}: {exc.message}", RenderOutcome.SYNTAX
    except RecursionError as exc:  # the parser's own nesting limit
        return (
            "",
            f"template too deeply nested to parse ({type(exc).__name__})",
            RenderOutcome.LIMIT,
        )
    except MemoryError:
        raise
    except _OverBudget:
        return "", f"rendering needs over {limits.steps:,} steps", RenderOutcome.BUDGET
    except LimitExceeded as exc:
        return "", str(exc), RenderOutcome.LIMIT
    except Exception as exc:
        return "", f"{type(exc).__name__}: {exc}", RenderOutcome.SYNTAX


def _render(
    env: BoundedEnvironment,
    template: jinja2.Template,
    variables: Mapping[str, Any],
    limits: RenderLimits,
) -> tuple[str, str, RenderOutcome]:
    chunks: list[str] = []
    size = 0
    try:
        for chunk in template.generate(**variables):
            size += len(chunk)
            if size > limits.max_output:
                return "", f"output over {limits.max_output} characters", RenderOutcome.LIMIT
            chunks.append(chunk)
    except _OverBudget:
        return "", f"rendering needs over {limits.steps:,} steps", RenderOutcome.BUDGET
    except LimitExceeded as exc:
        return "", str(exc), RenderOutcome.LIMIT
    except jinja2.exceptions.SecurityError as exc:
        return "", str(exc), RenderOutcome.SECURITY
    except (RecursionError, OverflowError) as exc:
        return "", f"{type(exc).__name__}: {exc}", RenderOutcome.LIMIT
    except jinja2.exceptions.UndefinedError as exc:
        return "", f"UndefinedError: {exc}", RenderOutcome.ERROR
    except jinja2.exceptions.TemplateError as exc:
        return "", str(exc), RenderOutcome.RAISED
    except MemoryError:
        raise
    except Exception as exc:
        return "", f"{type(exc).__name__}: {exc}", RenderOutcome.ERROR
    return "".join(chunks), "", RenderOutcome.OK
