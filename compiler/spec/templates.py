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

Extra filters: ``canonical`` (canonical JSON text, :func:`prefixlock.core.canonical.dumps`) and
``sortby(key)`` (stable sort of a list of mappings by ``key``; without a key, of scalars;
strings compare by code point).

Errors are :class:`~prefixlock.core.errors.SpecErrors` located at ``<template name>:<line>``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from types import TracebackType
from typing import Any

import attrs
import jinja2
import jinja2.exceptions
import jinja2.meta
import jinja2.nodes
import jinja2.sandbox

from ..core import canonical
from ..core.errors import Location, SpecError, SpecErrors

__all__ = ["CompiledTemplate", "compile_template"]

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


def _environment() -> jinja2.sandbox.SandboxedEnvironment:
    env = jinja2.sandbox.SandboxedEnvironment(
        undefined=jinja2.StrictUndefined,
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

    def render(self, variables: Mapping[str, Any]) -> str:
        """Render with ``variables``; any failure is a :class:`SpecErrors` at a line."""
        try:
            return self._template.render(dict(variables))
        except jinja2.UndefinedError as err:
            message = f"undefined value: {err.message}"
            tb = err.__traceback__
        except jinja2.exceptions.SecurityError as err:
            message = f"refused by the sandbox: {err.message}"
            tb = err.__traceback__
        except Exception as err:  # any failure inside the template is the author's
            message = f"template error: {_describe(err)}"
            tb = err.__traceback__
        raise SpecErrors(
            [SpecError(Location(self.name, _template_line(tb, self.name)), "", message)]
        )


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
) -> CompiledTemplate:
    """Parse, check and compile one template.

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
    used = _undeclared_variables(ast, source)
    bad = used - allowed
    if bad:
        plural = f"{template_kind} templates" if template_kind != "template" else "templates"
        may_use = ", ".join(sorted(allowed)) or "no variables"
        for node in ast.find_all(jinja2.nodes.Name):
            if node.ctx == "load" and node.name in bad:
                kind = forbidden_kind if node.name in forbidden else "unknown"
                message = (
                    f"{template_kind} template uses {kind} variable {node.name!r}"
                    f" ({plural} may use only: {may_use})"
                )
                errors.append(SpecError(Location(name, node.lineno), "", message))
    if errors:
        raise SpecErrors(errors)

    code = _ENV.compile(ast, name=name, filename=name)
    template = _ENV.template_class.from_code(_ENV, code, _ENV.make_globals(None), None)
    return CompiledTemplate(name=name, source=source, variables=used, template=template)


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
