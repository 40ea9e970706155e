"""The deterministic, sandboxed Jinja environment: the only module that imports jinja2.

Every template is compiled once, at build time, from its source text:

* ``SandboxedEnvironment`` with ``StrictUndefined``, ``keep_trailing_newline`` and a fixed
  ``"\\n"`` newline sequence, no autoescape, no loader;
* nothing that could make output depend on anything but the variables: no ``lipsum``
  global and no ``random`` filter; there is no clock, random or environment access;
* ``{% include %}``, ``{% import %}`` and ``{% extends %}`` are refused (a template is
  self-contained, so its source alone determines its output), and so is any attribute
  starting with ``_`` (the sandbox would refuse it at render time anyway; the build
  refuses it earlier);
* :func:`jinja2.meta.find_undeclared_variables` proves which variables a template reads;
  a variable of the forbidden kind (conversation-level data in a runtime template,
  turn-level data in the request-context template) or an unknown one fails the build,
  naming every template line where it is used.

The sandbox is immutable and bounded (issue 14):

* ``ImmutableSandboxedEnvironment``: a template cannot call a mutating method
  (``.update()``, ``.append()``, ...) of the data it is given; doing so is a
  ``refused by the sandbox`` error at its line;
* no constant folding of ``*``, ``**``, ``+``, ``%`` and ``//`` when compiling, so
  ``{{ 'a' * 10**9 }}`` allocates nothing at build time; instead the build evaluates
  constant operands with the same bounds and fails at the template's line;
* every render is bounded by :data:`MAX_OUTPUT` characters (output, and any string or
  list an operator, filter or method builds) and :data:`MAX_ITERATIONS` loop iterations
  (all ``{% for %}`` loops together); ``**`` is limited to :data:`MAX_POWER_BITS` bits.

Every string a template builds is metered *before* it is built (issue 43): a check after
the fact would come too late, since doubling a string forty times allocates terabytes
before any result could be measured. The builders are few, and each is counted:

* ``~`` concatenation and every block that captures its output (``{% set %}...{% endset %}``,
  macros, ``caller()``, ``{% filter %}``) go through the code generator of this sandbox
  (:class:`_MeteredCodeGenerator`), which routes them to a metered join and to a buffer
  that counts what is appended to it;
* every ``{% set %}`` value (namespace attributes included) and every value written to
  the output is measured with :func:`_text_size` (the length of its text, without
  building it, stopping past the limit) before it is stored or converted;
* ``+``, ``*``, ``%``, the filters and the string methods that can multiply their input
  (``join``, ``replace``, ``format``, ``indent``, ``wordwrap``, ``tojson``, ``pprint``,
  ``sum``, ``expandtabs``, ``translate``) compute the size of their result from their
  arguments first; the other filters that turn a value into text measure that value.
  A limit hit is a :class:`~prefixlock.core.errors.SpecErrors` at ``<template>:<line>``.
  The bounds count work, never time, so a render fails or succeeds the same way on any
  machine.

Extra filters: ``canonical`` (canonical JSON text, :func:`prefixlock.core.canonical.dumps`) and
``sortby(key)`` (stable sort of a list of mappings by ``key``; without a key, of scalars;
strings compare by code point).

Errors are :class:`~prefixlock.core.errors.SpecErrors` located at ``<template name>:<line>``.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import operator
import re
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sized
from types import TracebackType
from typing import Any

import attrs
import jinja2
import jinja2.compiler
import jinja2.exceptions
import jinja2.filters
import jinja2.meta
import jinja2.nodes
import jinja2.sandbox

from ..core import canonical
from ..core.errors import Location, SpecError, SpecErrors
from ..core.names import closest

__all__ = ["CompiledTemplate", "compile_template"]

#: The most characters a render may output, and the longest string or list it may build.
MAX_OUTPUT = 4 * 1024 * 1024
#: The most steps of one render: loop iterations, calls and filters, all together.
MAX_ITERATIONS = 250_000
#: The largest result of ``**``, in bits.
MAX_POWER_BITS = 4096
#: Operators the sandbox evaluates itself (never constant-folded by Jinja).
_BOUNDED_OPERATORS = frozenset({"*", "**", "+", "%", "//"})
#: The name under which compiled loops reach :func:`_bounded_iter`.
_ITER_GLOBAL = "prefixlock_bounded_iter"

_BINOPS: dict[str, Callable[[Any, Any], Any]] = {
    "*": operator.mul,
    "**": operator.pow,
    "+": operator.add,
    "%": operator.mod,
    "//": operator.floordiv,
}


class _LimitExceeded(jinja2.TemplateRuntimeError):
    """A render went past one of the sandbox's bounds."""


def _size(value: Any) -> int:
    return len(value) if isinstance(value, str | bytes | list | tuple | dict) else 0


def _check_size(value: Any, what: str) -> Any:
    if _size(value) > MAX_OUTPUT:
        raise _LimitExceeded(f"{what} builds {_size(value)} items, over the limit of {MAX_OUTPUT}")
    return value


def _over(what: str) -> _LimitExceeded:
    return _LimitExceeded(f"{what} builds more than the limit of {MAX_OUTPUT} characters")


def _text_size(value: Any, limit: int = MAX_OUTPUT, indent: int = 0) -> int:
    """About ``len(str(value))``, measured without building the text.

    Exact for strings; for containers, every item counts its own text and two characters
    of punctuation, and with ``indent`` every item also counts a line indented by its
    depth (a pretty-printer's output). A container met twice is measured once (a list
    that holds the same list twice, forty levels deep, costs forty steps), and the walk
    stops as soon as the count passes ``limit``, so measuring costs at most about
    ``limit`` steps whatever the value holds.
    """
    if not isinstance(value, _CONTAINERS):
        return _leaf_size(value)
    known: dict[tuple[int, int], int] = {}
    spent = 2
    stack: list[list[Any]] = [[value, 0, _children(value), 2]]
    while stack:
        frame = stack[-1]
        item = next(frame[2], _END)
        if item is _END:
            stack.pop()
            known[(id(frame[0]), frame[1])] = frame[3]
            if not stack:
                return int(frame[3])
            stack[-1][3] += frame[3]
            continue
        cost: int = 2 + indent * (frame[1] + 1)
        if isinstance(item, _CONTAINERS):
            size = known.get((id(item), frame[1] + 1))
            if size is None:
                frame[3] += cost
                stack.append([item, frame[1] + 1, _children(item), 2])
            else:
                cost += size
                frame[3] += cost
        else:
            cost += _leaf_size(item)
            frame[3] += cost
        spent += cost
        if spent > limit:
            return spent
    return spent  # not reached: the loop returns when the outermost value is done


_END = object()
_CONTAINERS = (Mapping, list, tuple, set, frozenset)


def _leaf_size(value: Any) -> int:
    if isinstance(value, str | bytes):
        return len(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value.bit_length() * 3 // 10 + 1
    return 0


def _children(value: Any) -> Iterator[Any]:
    if isinstance(value, Mapping):
        return iter((*value.keys(), *value.values()))
    return iter(value)


def _measured(value: Any, what: str) -> Any:
    """``value``, refused if its text would be past the limit."""
    if _text_size(value) > MAX_OUTPUT:
        raise _over(what)
    return value


def _format_size(text: str, args: Iterable[Any]) -> int:
    """An upper bound of the length of ``text`` formatted with ``args`` (by ``%`` or by
    ``str.format``): every field may hold every argument, at its widest width."""
    fields = text.count("%") + text.count("{")
    numbers = [int(n) for m in _PERCENT_FIELD.finditer(text) for n in m.groups() if n]
    numbers += [int(n) for m in _BRACE_FIELD.finditer(text) for n in re.findall(r"\d+", m[1])]
    widths = sum(numbers)
    values = list(args)
    numbers = [abs(v) for v in values if isinstance(v, int) and not isinstance(v, bool)]
    if "*" in text or _NESTED_FIELD.search(text):
        # A width taken from the arguments (``%*d``, ``{:{}}``): any field may take any.
        widths += fields * max(numbers, default=0)
    return len(text) + fields * sum(_text_size(v) for v in values) + widths


def _replace_size(text: str, old: str, new: str, count: int | None) -> int:
    times = text.count(old) if old else len(text) + 1
    if count is not None and count >= 0:
        times = min(times, count)
    return len(text) + max(0, len(new) - len(old)) * times


def _join_size(items: list[Any], separator: str) -> int:
    total = len(separator) * max(0, len(items) - 1)
    for item in items:
        if total > MAX_OUTPUT:
            break
        total += _text_size(item)
    return total


def _bounded_binop(op: str, left: Any, right: Any) -> Any:
    """``left <op> right``, refused before it allocates past the bounds."""
    if op == "**" and isinstance(left, int) and isinstance(right, int):
        bits = max(abs(left), 1).bit_length() * right if right > 0 else 0
        if bits > MAX_POWER_BITS:
            raise _LimitExceeded(
                f"{left} ** {right} has about {bits} bits, over the limit of {MAX_POWER_BITS}"
            )
    elif op == "*":
        for seq, times in ((left, right), (right, left)):
            counted = isinstance(times, int) and not isinstance(times, bool)
            if counted and isinstance(seq, Sized) and _size(seq) * times > MAX_OUTPUT:
                raise _LimitExceeded(
                    f"repeating {_size(seq)} items {times} times is over the limit of {MAX_OUTPUT}"
                )
    elif op == "%":
        _check_format(left, right, "operator '%'")
        if isinstance(left, str):
            values = right if isinstance(right, tuple) else (right,)
            if isinstance(right, Mapping):
                values = tuple(right.values())
            if _format_size(left, values) > MAX_OUTPUT:
                raise _over("operator '%'")
    elif op == "+" and _size(left) + _size(right) > MAX_OUTPUT:
        raise _LimitExceeded(
            f"joining {_size(left)} and {_size(right)} items is over the limit of {MAX_OUTPUT}"
        )
    return _check_size(_BINOPS[op](left, right), f"operator {op!r}")


class _Budget:
    """Loop iterations left in the current render."""

    def __init__(self) -> None:
        self.iterations = MAX_ITERATIONS


_BUDGET: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar(
    "prefixlock_template_budget", default=None
)


def _spend() -> None:
    """One step of the render's budget: a loop iteration, a call or a filter."""
    budget = _BUDGET.get()
    if budget is not None:
        budget.iterations -= 1
        if budget.iterations < 0:
            raise _LimitExceeded(
                f"more than {MAX_ITERATIONS} loop iterations and calls in one render"
            )


def _bounded_iter(iterable: Any) -> Iterator[Any]:
    """Every ``{% for %}`` loop iterates through this: it spends the render's budget."""
    for item in iterable:
        _spend()
        yield item


#: ``%`` conversions and ``{:...}`` fields, with their width and precision.
_PERCENT_FIELD = re.compile(r"%[#0\- +]*(\d*)(?:\.(\d*))?")
_BRACE_FIELD = re.compile(r"\{[^{}]*:([^{}]*)\}")
#: A ``{...}`` field whose format spec holds another field (a width from an argument).
_NESTED_FIELD = re.compile(r"\{[^{}]*\{")


def _check_format(text: Any, args: Any, what: str) -> None:
    """Refuse a format string whose widths, or whose ``*`` arguments, are past the bound."""
    if not isinstance(text, str):
        return
    numbers = [int(n) for m in _PERCENT_FIELD.finditer(text) for n in m.groups() if n]
    numbers += [int(n) for m in _BRACE_FIELD.finditer(text) for n in re.findall(r"\d+", m[1])]
    values = args if isinstance(args, tuple | list) else (args,)
    numbers += [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    if any(abs(n) > MAX_OUTPUT for n in numbers):
        raise _LimitExceeded(f"{what}: a width over the limit of {MAX_OUTPUT}")


def _check_arguments(args: tuple[Any, ...], kwargs: Mapping[str, Any], what: str) -> None:
    for arg in (*args, *kwargs.values()):
        if isinstance(arg, int) and not isinstance(arg, bool) and abs(arg) > MAX_OUTPUT:
            raise _LimitExceeded(f"{what} got the argument {arg}, over the limit of {MAX_OUTPUT}")


#: Filters that never turn their input into text (so a large input is no reason to refuse).
_STRUCTURAL_FILTERS = frozenset(
    {
        "abs", "attr", "batch", "bool", "count", "d", "default", "dictsort", "first", "float",
        "groupby", "int", "items", "last", "length", "list", "map", "max", "min", "reject",
        "rejectattr", "reverse", "round", "select", "selectattr", "slice", "sort", "sortby",
        "sum", "unique",
    }
)  # fmt: skip


def _attribute_values(environment: Any, items: list[Any], attribute: Any) -> list[Any]:
    if attribute is None:
        return items
    getter = jinja2.filters.make_attrgetter(environment, attribute)
    return [getter(item) for item in items]


def _filter_size(name: str, bound: inspect.BoundArguments, environment: Any) -> int:
    """The size of the result of filter ``name``, computed from its arguments (which it
    may materialise, so that an iterator is read once); 0 when the input bounds it."""
    arguments = bound.arguments
    if name == "join":
        items = arguments["value"] = list(arguments["value"])
        values = _attribute_values(environment, items, arguments.get("attribute"))
        return _join_size(values, str(arguments.get("d", "")))
    if name == "sum":
        items = arguments["iterable"] = list(arguments["iterable"])
        values = _attribute_values(environment, items, arguments.get("attribute"))
        return sum(_size(v) for v in (*values, arguments.get("start", 0)))
    value = arguments.get("value", arguments.get("s"))
    if name in _STRUCTURAL_FILTERS:
        return 0
    size = _text_size(value)
    if size > MAX_OUTPUT or not isinstance(value, str):
        # Measured before str() of it: the filters below then handle text of bounded size.
        return size if size > MAX_OUTPUT else 0
    if name == "replace":
        old, new = str(arguments["old"]), str(arguments["new"])
        return _replace_size(value, old, new, arguments.get("count"))
    if name == "indent":
        width = arguments.get("width", 4)
        prefix = len(width) if isinstance(width, str) else int(width)
        return size + (value.count("\n") + 1) * prefix
    if name == "wordwrap":
        width = max(1, int(arguments.get("width", 79)))
        wrap = arguments.get("wrapstring")
        lines = 2 * size // width + value.count("\n") + 2
        return size + lines * (len(str(wrap)) if wrap is not None else 1)
    if name == "format":
        return _format_size(
            value, (*arguments.get("args", ()), *arguments.get("kwargs", {}).values())
        )
    return 0


def _serialized_size(name: str, bound: inspect.BoundArguments) -> int:
    """The size of the text of ``tojson`` and ``pprint``, which indent by depth."""
    value = bound.arguments.get("value")
    indent = 1 if name == "pprint" else bound.arguments.get("indent") or 0
    return _text_size(value, indent=indent if isinstance(indent, int) else len(str(indent)))


def _bounded_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` with its size arguments and its result held to :data:`MAX_OUTPUT`, the size
    of a result that can outgrow its input computed before it is built."""
    passes = hasattr(func, "jinja_pass_arg")  # the context or environment comes first
    signature = inspect.signature(func)
    parameters = list(signature.parameters.values())
    if passes and parameters and parameters[0].name in ("context", "eval_ctx", "environment"):
        # Jinja's async variants show the signature of the plain function, without it.
        signature = signature.replace(parameters=parameters[1:])

    @functools.wraps(func)  # keeps ``jinja_pass_arg`` (pass_context, pass_environment)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        _spend()
        _check_arguments(args, kwargs, f"filter {name!r}")
        if name == "format" and args:
            _check_format(args[0], args[1:], "filter 'format'")
        head, args = (args[:1], args[1:]) if passes else ((), args)
        bound = signature.bind(*args, **kwargs)
        environment = getattr(head[0], "environment", head[0]) if head else None
        if name in ("tojson", "pprint"):
            size = _serialized_size(name, bound)
        else:
            size = _filter_size(name, bound, environment)
        if size > MAX_OUTPUT:
            raise _over(f"filter {name!r}")
        return _check_size(func(*head, *bound.args, **bound.kwargs), f"filter {name!r}")

    return bounded


def _method_size(method: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> int:
    """The size of the result of a string method that can outgrow its string (0 for the
    others, whose result the call's own check bounds)."""
    text = getattr(method, "__self__", None)
    name = getattr(method, "__name__", "")
    if not isinstance(text, str):
        return 0
    if name == "join" and args:
        return _join_size(list(args[0]), text)
    if name == "replace" and len(args) >= 2:
        count = args[2] if len(args) > 2 else kwargs.get("count")
        return _replace_size(text, str(args[0]), str(args[1]), count)
    if name == "format":
        return _format_size(text, (*args, *kwargs.values()))
    if name == "format_map" and args and isinstance(args[0], Mapping):
        return _format_size(text, args[0].values())
    if name == "expandtabs":
        size = args[0] if args else kwargs.get("tabsize", 8)
        return len(text) + text.count("\t") * (size if isinstance(size, int) else 0)
    if name == "translate" and args and isinstance(args[0], Mapping):
        longest = max((_text_size(v) for v in args[0].values()), default=0)
        return len(text) * max(longest, 1)
    return 0


class _MeteredBuffer(list[str]):
    """The buffer of a block that captures its output: it counts what is appended."""

    __slots__ = ("size",)

    def __init__(self) -> None:
        super().__init__()
        self.size = 0

    def append(self, chunk: str) -> None:
        self.size += len(chunk)
        if self.size > MAX_OUTPUT:
            raise _over("a captured block")
        super().append(chunk)

    def extend(self, chunks: Iterable[str]) -> None:
        for chunk in chunks:
            self.append(chunk)


class _MeteredCodeGenerator(jinja2.compiler.CodeGenerator):
    """Jinja's code generator, with every string builder routed through the sandbox.

    Compiled template code reaches the environment as the module global ``environment``;
    the methods named here are :class:`_Sandbox`'s.
    """

    _assigned: jinja2.nodes.Node | None = None

    def buffer(self, frame: jinja2.compiler.Frame) -> None:
        frame.buffer = self.temporary_identifier()
        self.writeline(f"{frame.buffer} = environment.metered_buffer()")

    def visit_Concat(self, node: jinja2.nodes.Concat, frame: jinja2.compiler.Frame) -> None:
        self.write("environment.metered_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")

    def visit_Output(self, node: jinja2.nodes.Output, frame: jinja2.compiler.Frame) -> None:
        # A buffer's ``extend((`` line would carry the line of the statement before it,
        # so that a captured block past the limit would name the wrong template line.
        self.newline(node)
        super().visit_Output(node, frame)

    def visit_Assign(self, node: jinja2.nodes.Assign, frame: jinja2.compiler.Frame) -> None:
        self._assigned = node.node
        super().visit_Assign(node, frame)

    def visit(self, node: jinja2.nodes.Node, *args: Any, **kwargs: Any) -> Any:
        if node is not self._assigned:
            return super().visit(node, *args, **kwargs)
        # The value of a ``{% set %}`` (a namespace attribute too) is measured.
        self._assigned = None
        self.write("environment.metered_value(")
        super().visit(node, *args, **kwargs)
        self.write(")")
        return None


class _Sandbox(jinja2.sandbox.ImmutableSandboxedEnvironment):
    """Read-only data, bounded operators and calls (see the module docstring)."""

    intercepted_binops = _BOUNDED_OPERATORS
    code_generator_class = _MeteredCodeGenerator

    @staticmethod
    def metered_buffer() -> _MeteredBuffer:
        return _MeteredBuffer()

    @staticmethod
    def metered_concat(values: tuple[Any, ...]) -> str:
        """``~``: the text of every operand measured before any is converted or joined."""
        size = 0
        for value in values:
            size += _text_size(value)
            if size > MAX_OUTPUT:
                raise _over("operator '~'")
        return "".join(map(str, values))

    @staticmethod
    def metered_value(value: Any) -> Any:
        # Only a string is text already built; a container's text is measured where
        # it is built (output, ``~``, a filter), so a set of a nested list costs nothing.
        if isinstance(value, str) and len(value) > MAX_OUTPUT:
            raise _over("a {% set %}")
        return value

    def call_binop(
        self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any
    ) -> Any:
        return _bounded_binop(operator, left, right)

    def call(
        __self,  # jinja2's own signature (``self`` may be a keyword argument)
        __context: jinja2.runtime.Context,
        __obj: Any,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        _spend()
        if __obj is not jinja2.sandbox.safe_range:  # range has its own bound
            _check_arguments(args, kwargs, "a call")
        method = getattr(__obj, "__wrapped__", __obj)  # the sandbox wraps str.format
        if getattr(__obj, "__name__", None) in ("format", "format_map"):
            _check_format(getattr(method, "__self__", None), (), "format")
        if getattr(method, "__name__", None) == "join" and args:
            args = (list(args[0]), *args[1:])  # measured, then joined: read once
        if _method_size(method, args, kwargs) > MAX_OUTPUT:
            raise _over(f"method {getattr(method, '__name__', '')!r}")
        result = super().call(__context, __obj, *args, **kwargs)
        return _check_size(result, "a call")


#: Globals removed from Jinja's defaults: ``lipsum`` is randomised.
_REMOVED_GLOBALS = ("lipsum",)
#: Filters removed from Jinja's defaults: ``random`` is randomised.
_REMOVED_FILTERS = ("random",)


def _filter_canonical(value: Any) -> str:
    """Canonical JSON text of ``value`` (the one encoder of the project)."""
    return canonical.dumps(value)


def _filter_sortby(items: Iterable[Any], key: str | None = None) -> list[Any]:
    """Stable sort of ``items``: mappings by ``items[i][key]``, or scalars by value.

    Strings compare by code point, independent of locale; ties keep their input order.
    """
    values = list(items)
    if key is None:
        return sorted(values)
    for index, item in enumerate(values):
        if not isinstance(item, Mapping):
            raise jinja2.TemplateRuntimeError(
                f"sortby: item {index} is a {type(item).__name__}, not a mapping"
            )
        if key not in item:
            raise jinja2.TemplateRuntimeError(f"sortby: item {index} has no key {key!r}")
    return sorted(values, key=lambda item: item[key])


def _stub_test(value: Any) -> bool:
    """Stands in for an unknown test during analysis only (it is reported, never run)."""
    return bool(value)


class _Undefined(jinja2.StrictUndefined):
    """StrictUndefined whose message names the closest key of a mapping, so that
    ``{{ mode.remindr }}`` says ``did you mean 'reminder'?``."""

    __slots__ = ()

    @property
    def _undefined_message(self) -> str:
        message: str = super()._undefined_message
        obj, name = self._undefined_obj, self._undefined_name
        if not self._undefined_hint and isinstance(name, str) and isinstance(obj, Mapping):
            close = closest(name, [key for key in obj if isinstance(key, str)])
            if close is not None:
                return f"{message} (did you mean {close!r}?)"
        return message


def _finalize(value: Any) -> Any:
    """Every value written to the output is measured before Jinja converts it to text."""
    return _measured(value, "an output value")


def _environment() -> _Sandbox:
    env = _Sandbox(
        undefined=_Undefined,
        finalize=_finalize,
        keep_trailing_newline=True,
        newline_sequence="\n",
        autoescape=False,
        auto_reload=False,
        cache_size=0,
        loader=None,
    )
    for name in _REMOVED_GLOBALS:
        env.globals.pop(name, None)
    for name in _REMOVED_FILTERS:
        env.filters.pop(name, None)
    env.filters["canonical"] = _filter_canonical
    env.filters["sortby"] = _filter_sortby
    for name, func in list(env.filters.items()):
        env.filters[name] = _bounded_filter(name, func)
    env.globals[_ITER_GLOBAL] = _bounded_iter
    return env


_ENV = _environment()


@attrs.frozen(eq=False)
class CompiledTemplate:
    """A template proven at build time to read only allowed variables.

    ``name`` is the spec-root-relative path of the template file; it appears in every
    error. ``variables`` are the names the template reads from its context.
    """

    name: str
    source: str
    variables: frozenset[str]
    _template: jinja2.Template = attrs.field(repr=False, alias="template")
    #: The names of its section blocks in template order (``context_updates: sections``;
    #: empty for every other template).
    sections: tuple[str, ...] = ()

    def render(self, variables: Mapping[str, Any]) -> str:
        """Render with ``variables``; any failure is a :class:`SpecErrors` at a line."""
        return self._run(
            self._template.root_render_func, self._template.new_context(dict(variables))
        )

    def render_section(self, name: str, variables: Mapping[str, Any]) -> str:
        """The text of section block ``name`` alone, rendered with ``variables`` (the
        build proved it reads nothing set outside itself)."""
        return self._run(self._template.blocks[name], self._template.new_context(dict(variables)))

    def render_frame(self, variables: Mapping[str, Any], texts: Mapping[str, str]) -> str:
        """The whole template with each section block replaced by ``texts[name]`` (an
        absent name renders nothing): the text outside the blocks reads ``variables``."""
        context = self._template.new_context(dict(variables))
        for name in self.sections:
            context.blocks[name] = [_fixed_text(texts.get(name, ""))]
        return self._run(self._template.root_render_func, context)

    def _run(
        self,
        render: Callable[[jinja2.runtime.Context], Iterator[str]],
        context: jinja2.runtime.Context,
    ) -> str:
        token = _BUDGET.set(_Budget())
        try:
            return _bounded_output(_generate(render, context))
        except _LimitExceeded as err:
            message = f"template limit: {err.message}"
            tb = err.__traceback__
        except jinja2.UndefinedError as err:
            message = f"undefined value: {err.message}"
            tb = err.__traceback__
        except jinja2.exceptions.SecurityError as err:
            message = f"refused by the sandbox: {err.message}"
            tb = err.__traceback__
        except Exception as err:  # any failure inside the template is the author's
            message = f"template error: {_describe(err)}"
            tb = err.__traceback__
        finally:
            _BUDGET.reset(token)
        raise SpecErrors(
            [SpecError(Location(self.name, _template_line(tb, self.name)), "", message)]
        )


def _fixed_text(text: str) -> Callable[[jinja2.runtime.Context], Iterator[str]]:
    def block(_context: jinja2.runtime.Context) -> Iterator[str]:
        yield text

    return block


def _generate(
    render: Callable[[jinja2.runtime.Context], Iterator[str]], context: jinja2.runtime.Context
) -> Generator[str, None, None]:
    """What :meth:`jinja2.Template.generate` does around its root render function, for any
    render function: a failure is re-raised with its traceback rewritten to template lines."""
    try:
        yield from render(context)
    except Exception:
        yield _ENV.handle_exception()


def _bounded_output(chunks: Generator[str, None, None]) -> str:
    out: list[str] = []
    size = 0
    for chunk in chunks:
        size += len(chunk)
        if size > MAX_OUTPUT:
            # Thrown into the template, so that the error names the line that wrote it.
            chunks.throw(_LimitExceeded(f"output is over the limit of {MAX_OUTPUT} characters"))
        out.append(chunk)
    return "".join(out)


def _describe(err: Exception) -> str:
    text = str(err)
    if isinstance(err, jinja2.TemplateError):
        return text
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _template_line(tb: TracebackType | None, name: str) -> int:
    """The innermost line of template ``name`` in a traceback (0 if none).

    Jinja rewrites tracebacks so that frames of template code carry the template's file
    name and line number.
    """
    line = 0
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == name:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def compile_template(
    name: str,
    source: str,
    allowed: frozenset[str],
    forbidden: frozenset[str],
    forbidden_kind: str,
    *,
    template_kind: str = "template",
    sections: frozenset[str] | None = None,
) -> CompiledTemplate:
    """Parse, check and compile one template.

    ``sections``: compile a request-context template of ``context_updates: sections``
    whose section blocks may read only these variables (see :func:`_section_problems`);
    the text outside them may read only ``update``.

    ``allowed`` are the variables it may read; reading one of ``forbidden`` is reported as
    ``<template_kind> template uses <forbidden_kind> variable 'x'``, any other unknown
    variable as ``... uses unknown variable 'x'``. All problems of the template are
    collected and raised together as :class:`SpecErrors`.
    """
    try:
        ast = _ENV.parse(source, name=name, filename=name)
    except jinja2.TemplateSyntaxError as err:
        line = err.lineno if err.lineno else 0
        raise SpecErrors(
            [SpecError(Location(name, line), "", f"template syntax error: {err.message}")]
        ) from None

    errors = [SpecError(Location(name, line), "", message) for line, message in _refused_nodes(ast)]
    errors += [
        SpecError(Location(name, line), "", f"template limit: {message}")
        for line, message in _constant_limits(ast)
    ]
    used = _undeclared_variables(ast, source)
    bad = used - allowed
    if bad:
        plural = f"{template_kind} templates" if template_kind != "template" else "templates"
        may_use = ", ".join(sorted(allowed)) or "no variables"
        for node in ast.find_all(jinja2.nodes.Name):
            if node.ctx == "load" and node.name in bad:
                kind = forbidden_kind if node.name in forbidden else "unknown"
                close = closest(node.name, allowed) if kind == "unknown" else None
                guess = f"did you mean {close!r}? " if close else ""
                message = (
                    f"{template_kind} template uses {kind} variable {node.name!r}"
                    f" ({guess}{plural} may use only: {may_use})"
                )
                errors.append(SpecError(Location(name, node.lineno), "", message))
    names: tuple[str, ...] = ()
    if sections is not None:
        names = tuple(b.name for b in ast.body if isinstance(b, jinja2.nodes.Block))
        errors += [
            SpecError(Location(name, line), "", message)
            for line, message in _section_problems(ast, sections, frozenset(bad))
        ]
    if errors:
        raise SpecErrors(errors)

    for loop in ast.find_all(jinja2.nodes.For):
        # Every loop spends the render's iteration budget (see _bounded_iter).
        loop.iter = jinja2.nodes.Call(
            jinja2.nodes.Name(_ITER_GLOBAL, "load", lineno=loop.lineno),
            [loop.iter],
            [],
            None,
            None,
            lineno=loop.lineno,
        )
    code = _ENV.compile(ast, name=name, filename=name)
    template = _ENV.template_class.from_code(_ENV, code, _ENV.make_globals(None), None)
    return CompiledTemplate(
        name=name, source=source, variables=used, template=template, sections=names
    )


#: A section's name: it names the section to the model and in reports.
_SECTION_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
#: What the text outside the section blocks must read of ``update``.
_UPDATE_FIELDS = ("sections", "cleared")


def _section_problems(
    ast: jinja2.nodes.Template, allowed: frozenset[str], reported: frozenset[str]
) -> Iterator[tuple[int, str]]:
    """``(line, message)`` for every rule of a sectioned request-context template broken.

    Each top-level ``{% block NAME %}`` is one section, in template order. A section's
    text is compared alone with the one last sent, so a block must be a function of the
    conversation-level data only (``allowed``, nothing set outside it, not ``update``),
    and the text outside the blocks of ``update`` only: the full context has ``update``
    none, an update lists the sections it replaces (``update.sections``) and those of
    them now empty (``update.cleared``), and the wording must say so.
    """
    top = [node for node in ast.body if isinstance(node, jinja2.nodes.Block)]
    if not top:
        yield (
            1,
            (
                "context_updates: sections needs the request-context template to define its "
                "sections as top-level {% block NAME %} ... {% endblock %}; it defines none"
            ),
        )
    for block in ast.find_all(jinja2.nodes.Block):
        if not any(block is t for t in top):
            yield (
                block.lineno,
                (
                    f"section block {block.name!r} is not at the top level of the template "
                    "(inside another block, an if or a for): sections follow one another"
                ),
            )
    for block in top:
        if not _SECTION_NAME.match(block.name):
            yield (
                block.lineno,
                (
                    f"section name {block.name!r}: lowercase letters, digits and '_', "
                    "starting with a letter"
                ),
            )
        if block.scoped or block.required:
            yield block.lineno, f"section block {block.name!r}: no 'scoped' or 'required'"
        used = _undeclared_variables(_part(block.body), "")
        for node in _loads(block, used - allowed - reported):
            if node.name == "update":
                why = "the update's own variable is for the text outside the section blocks"
            else:
                why = "a section block is rendered on its own: set it inside the block"
            yield (
                node.lineno,
                (
                    f"section block {block.name!r} uses variable {node.name!r} ({why}; a section "
                    f"may use only: {', '.join(sorted(allowed))})"
                ),
            )
    frame = _part([node for node in ast.body if not isinstance(node, jinja2.nodes.Block)])
    outside = _undeclared_variables(frame, "") - {"update"} - reported
    for node in _loads(frame, outside):
        yield (
            node.lineno,
            (
                f"text outside the section blocks uses variable {node.name!r} (it may use only "
                "'update'; conversation-level data goes inside a section block)"
            ),
        )
    read = {
        node.attr
        for node in frame.find_all(jinja2.nodes.Getattr)
        if isinstance(node.node, jinja2.nodes.Name) and node.node.name == "update"
    }
    for field in _UPDATE_FIELDS:
        if field not in read:
            yield (
                1,
                (
                    f"the text outside the section blocks never reads update.{field}: an update "
                    "must tell the model which sections it replaces (update.sections), which "
                    "of them are cleared (update.cleared), and that the rest stay in force"
                ),
            )


def _part(body: list[jinja2.nodes.Node]) -> jinja2.nodes.Template:
    """A template of ``body`` alone (nodes of a parsed one), to analyse."""
    part = jinja2.nodes.Template(body, lineno=1)
    part.environment = _ENV
    return part


def _loads(node: jinja2.nodes.Node, names: frozenset[str]) -> Iterator[jinja2.nodes.Name]:
    """Every read of one of ``names`` in ``node``, in template order."""
    for found in node.find_all(jinja2.nodes.Name):
        if found.ctx == "load" and found.name in names:
            yield found


def _refused_nodes(ast: jinja2.nodes.Template) -> Iterator[tuple[int, str]]:
    """``(line, message)`` for every construct the build refuses."""
    self_contained = "templates must be self-contained"
    private = "names starting with '_' are refused"
    for node in ast.find_all(jinja2.nodes.Node):
        if isinstance(node, jinja2.nodes.Extends):
            yield node.lineno, f"template uses {{% extends %}}: {self_contained}"
        elif isinstance(node, jinja2.nodes.Include):
            yield node.lineno, f"template uses {{% include %}}: {self_contained}"
        elif isinstance(node, jinja2.nodes.Import | jinja2.nodes.FromImport):
            yield node.lineno, f"template uses {{% import %}}: {self_contained}"
        elif isinstance(node, jinja2.nodes.Getattr):
            if node.attr.startswith("_"):
                yield node.lineno, f"template uses attribute {node.attr!r} ({private})"
        elif isinstance(node, jinja2.nodes.Getitem):
            key = node.arg.value if isinstance(node.arg, jinja2.nodes.Const) else None
            if isinstance(key, str) and key.startswith("_"):
                yield node.lineno, f"template uses item {key!r} ({private})"
        elif isinstance(node, jinja2.nodes.Filter):
            if node.name not in _ENV.filters:
                yield node.lineno, f"template uses unknown filter {node.name!r}"
        elif isinstance(node, jinja2.nodes.Test) and node.name not in _ENV.tests:
            yield node.lineno, f"template uses unknown test {node.name!r}"


class _NotConstant(Exception):
    pass


def _constant(node: jinja2.nodes.Node) -> Any:
    """The value of a constant expression, evaluated with the sandbox's bounds."""
    if isinstance(node, jinja2.nodes.Const):
        return node.value
    if isinstance(node, jinja2.nodes.List | jinja2.nodes.Tuple):
        items = [_constant(item) for item in node.items]
        return items if isinstance(node, jinja2.nodes.List) else tuple(items)
    if isinstance(node, jinja2.nodes.Neg):
        return -_constant(node.node)
    if isinstance(node, jinja2.nodes.BinExpr) and node.operator in _BINOPS:
        return _bounded_binop(node.operator, _constant(node.left), _constant(node.right))
    raise _NotConstant


def _constant_limits(ast: jinja2.nodes.Template) -> Iterator[tuple[int, str]]:
    """``(line, message)`` for every constant expression past the bounds: the build
    finds them, so no turn ever renders them (and nothing is folded unboundedly)."""
    for node in ast.find_all(jinja2.nodes.BinExpr):
        try:
            _constant(node)
        except _LimitExceeded as err:
            yield node.lineno, str(err.message)
        except Exception:  # not constant, or it fails only at render time
            continue


def _undeclared_variables(ast: jinja2.nodes.Template, source: str) -> frozenset[str]:
    """The variables ``ast`` reads from its context (globals such as ``range`` excluded)."""
    unknown = {n.name for n in ast.find_all(jinja2.nodes.Filter) if n.name not in _ENV.filters}
    unknown_tests = {n.name for n in ast.find_all(jinja2.nodes.Test) if n.name not in _ENV.tests}
    if unknown or unknown_tests:
        # jinja2's code generator stops at an unknown filter or test; stub them (already
        # reported) so that the variables are still checked and every error is reported.
        env = _environment()
        env.filters.update(dict.fromkeys(unknown, _filter_canonical))
        env.tests.update(dict.fromkeys(unknown_tests, _stub_test))
        ast = env.parse(source)
    return frozenset(jinja2.meta.find_undeclared_variables(ast))
