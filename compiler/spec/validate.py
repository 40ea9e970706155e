"""Validate spec values against the JSON Schemas that ship with prefixlock.

This is the only module that imports :mod:`jsonschema` (and :mod:`referencing`). The
schemas live in ``compiler/schemas/<name>.schema.json`` (draft 2020-12); shared
definitions (rule, skill, subagent, MCP server and tool, environment, Git) live once, in
``context.schema.json`` ``$defs``, and the others reference them by relative URI
(``"context.schema.json#/$defs/rules"``). The schemas have no ``$id``: a reference resolves
against the file's own location, so an editor finds the sibling file on disk wherever the
schemas are copied (``prefixlock schema``, ``prefixlock init``). Here an offline
:class:`referencing.Registry` holds exactly these files under those same relative URIs:
nothing is fetched.

Every schema violation becomes a :class:`~prefixlock.core.errors.SpecError` with its JSON path,
its ``file:line:col`` and a message saying what was expected::

    $.rules[0]: unknown key 'glob' (expected one of: body, description, globs, kind, name)
    $.tools[2]: missing required key 'description'
    $.rules[2].kind: expected one of always, auto, agent, manual; got 'sometimes'
    $.tools[0].parameters: expected an object, got a string
    $.tools[1].name: expected a string matching ^[a-zA-Z0-9_-]{1,64}$, got 'read file'

A schema may explain a rule with ``errorMessage`` (appended in parentheses) or a pattern
with ``patternErrorMessage`` (said instead of the regular expression); editors using
the YAML/JSON language servers show the same texts.

Checks JSON Schema cannot express run here too: names unique within a list (tools,
rules, skills, subagents, MCP servers, the tools of a server), each tool's
``parameters`` valid against the draft 2020-12 metaschema, and an agent's
``default_mode`` naming one of its modes.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from ..core import canonical
from ..core.errors import Location, SpecError, SpecErrors
from ..core.jsonpath import json_path, type_name
from ..core.names import closest, hint
from ..core.resources import schema_file
from ..core.secrets import quoted
from .loader import LoadedDocument

__all__ = [
    "SCHEMA_NAMES",
    "check_document",
    "context_field_problems",
    "schema",
    "schema_text",
    "validate_document",
    "validate_value",
]

#: Every schema that ships with prefixlock, sorted.
SCHEMA_NAMES: tuple[str, ...] = (
    "agent",
    "agent_run_request",
    "context",
    "mcp",
    "providers",
    "rules",
    "scenario",
    "skills",
    "subagents",
    "tools",
    "usage",
)

_Parts = tuple[str | int, ...]

# Lists whose members' ``name`` must be unique: (path pattern, what a member is).
# ``*`` stands for every index of a list.
_CONTEXT_LISTS: tuple[tuple[_Parts, str], ...] = (
    (("rules",), "rule"),
    (("skills",), "skill"),
    (("subagents",), "subagent"),
    (("mcp", "servers"), "MCP server"),
    (("mcp", "servers", "*", "tools"), "MCP tool"),
)
_UNIQUE_NAMES: dict[str, tuple[tuple[_Parts, str], ...]] = {
    "tools": ((("tools",), "tool"),),
    "rules": ((("rules",), "rule"),),
    "skills": ((("skills",), "skill"),),
    "subagents": ((("subagents",), "subagent"),),
    "mcp": ((("servers",), "MCP server"), (("servers", "*", "tools"), "MCP tool")),
    "context": _CONTEXT_LISTS,
    "agent_run_request": tuple((("context", *parts), what) for parts, what in _CONTEXT_LISTS),
    "scenario": tuple(
        ((*where, *parts), what)
        for where in (("base", "context"), ("steps", "*", "user", "context"))
        for parts, what in _CONTEXT_LISTS
    ),
}

_TYPE_WORDS = {
    "object": "an object",
    "array": "an array",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "null": "null",
}

# Schema keywords whose members are names, not keywords (for telling a
# ``propertyNames`` keyword from a property that happens to be called so).
_NAMED_MEMBERS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)


# --------------------------------------------------------------------------- schemas


def _check_name(name: str) -> None:
    if name not in SCHEMA_NAMES:
        raise ValueError(f"unknown schema {name!r} (expected one of: {', '.join(SCHEMA_NAMES)})")


def _file_name(name: str) -> str:
    return f"{name}.schema.json"


@functools.cache
def _text(name: str) -> str:
    resource = schema_file(_file_name(name))
    return resource.read_text(encoding="utf-8")


@functools.cache
def _parsed(name: str) -> dict[str, Any]:
    value = canonical.loads(_text(name))
    assert isinstance(value, dict)
    return value


def schema_text(name: str) -> str:
    """The schema file's text, exactly as shipped."""
    _check_name(name)
    return _text(name)


def schema(name: str) -> dict[str, Any]:
    """The parsed schema (a fresh copy: callers may change it)."""
    _check_name(name)
    return copy.deepcopy(_parsed(name))


@functools.cache
def _registry() -> Registry[Any]:
    """Every shipped schema under its file name; there is no retrieval: nothing is fetched.

    A schema has no ``$id``, so a validator's base URI is empty and a reference such as
    ``context.schema.json#/$defs/rules`` resolves to the key ``context.schema.json``,
    exactly as it resolves to the sibling file for an editor. A reference to anything
    else raises :class:`referencing.exceptions.Unresolvable` (the registry cannot retrieve).
    """
    resources = []
    for name in SCHEMA_NAMES:
        parsed = _parsed(name)
        if "$id" in parsed:  # it would move the base URI away from the file's location
            raise ValueError(f"{_file_name(name)}: a shipped schema must not have an $id")
        resources.append((_file_name(name), DRAFT202012.create_resource(parsed)))
    return Registry().with_resources(resources)


@functools.cache
def _validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(_parsed(name), registry=_registry())


@functools.cache
def _meta_validator() -> Draft202012Validator:
    return Draft202012Validator(
        Draft202012Validator.META_SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER
    )


# --------------------------------------------------------------------------- validation


class _Locator:
    """Maps JSON paths to locations: a document's, else just the file name."""

    def __init__(self, doc: LoadedDocument | None, file: str) -> None:
        self.doc = doc
        self.file = file

    def node(self, path: str) -> Location:
        return self.doc.location(path) if self.doc is not None else Location(self.file)

    def key(self, path: str) -> Location:
        return self.doc.key_location(path) if self.doc is not None else Location(self.file)


@functools.lru_cache(maxsize=32)
def _declared_validator(name: str, fields_json: str) -> Draft202012Validator:
    """Schema ``name`` where the closed conversation-level ``context`` object also has the
    declared fields (``fields_json``: canonical JSON of name -> JSON Schema), wherever it
    is referenced (a request's ``context``, a scenario's steps): one validation finds
    every problem, and an unknown key's "did you mean" knows the declared names."""
    context = copy.deepcopy(_parsed("context"))
    context["properties"].update(canonical.loads(fields_json))
    registry = _registry().with_resource(
        _file_name("context"), DRAFT202012.create_resource(context)
    )
    return Draft202012Validator(context if name == "context" else _parsed(name), registry=registry)


def context_field_problems(field_schema: Any) -> list[str]:
    """Why ``field_schema`` cannot be a declared context field's JSON Schema (empty: it
    can): it must be a valid draft 2020-12 schema and refer to nothing outside itself."""
    problems = [
        _sentence(e.message)
        for e in sorted(_meta_validator().iter_errors(field_schema), key=lambda e: e.message)
    ]
    if _has_key(field_schema, ("$ref", "$id", "$dynamicRef")):
        problems.append("a declared field's schema must be self-contained (no $ref or $id)")
    return problems


def _has_key(value: Any, keys: tuple[str, ...]) -> bool:
    if isinstance(value, Mapping):
        return any(k in keys or _has_key(v, keys) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_key(v, keys) for v in value)
    return False


def validate_value(
    value: Any,
    schema_name: str,
    doc: LoadedDocument | None = None,
    file: str = "<request>",
    *,
    context_fields: Mapping[str, Any] | None = None,
) -> list[SpecError]:
    """Every problem of ``value`` against schema ``schema_name``, sorted.

    Locations come from ``doc`` when given (its file), else they name ``file`` only.
    ``context_fields``: the spec's declared context fields, name -> JSON Schema, accepted
    in the conversation-level context (``context`` schema) beside the built-in ones.
    """
    _check_name(schema_name)
    locate = _Locator(doc, doc.file if doc is not None else file)
    errors: set[SpecError] = set()
    validator = _validator(schema_name)
    if context_fields:
        validator = _declared_validator(schema_name, canonical.dumps(dict(context_fields)))
    for error in validator.iter_errors(value):
        errors.update(_convert(error, (), locate, ""))
    errors.update(_unique_names(value, schema_name, locate))
    if schema_name == "tools":
        errors.update(_tool_parameters(value, locate))
    if schema_name == "agent":
        errors.update(_default_mode(value, locate))
    return sorted(errors)


def validate_document(
    doc: LoadedDocument, schema_name: str, *, context_fields: Mapping[str, Any] | None = None
) -> list[SpecError]:
    """:func:`validate_value` of a loaded document, located in it."""
    return validate_value(doc.value, schema_name, doc, context_fields=context_fields)


def check_document(doc: LoadedDocument, schema_name: str) -> None:
    """Raise :class:`SpecErrors` if the document does not match its schema."""
    errors = validate_document(doc, schema_name)
    if errors:
        raise SpecErrors(errors)


# --------------------------------------------------------------------------- messages


def _show(value: Any) -> str:
    """A value in a message: strings quoted (shortened), containers by their type."""
    if isinstance(value, str):
        return quoted(value, 60)  # secrets redacted: an error is printed and logged
    if value is None or isinstance(value, bool | int | float):
        return json.dumps(value)
    return type_name(value)


def _bare(value: Any) -> str:
    """An enum member in a list: strings as they are, others as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def _sentence(text: str) -> str:
    """``"Rules of kind 'auto' need globs."`` -> ``"rules of kind 'auto' need globs"``."""
    text = text.strip().rstrip(".")
    return text[:1].lower() + text[1:]


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _via_property_names(error: ValidationError) -> bool:
    """Whether the error is about a key (``propertyNames``) rather than a value."""
    previous: object = None
    for part in error.schema_path:
        if part == "propertyNames" and previous not in _NAMED_MEMBERS:
            return True
        previous = None if previous in _NAMED_MEMBERS else part
    return False


def _convert(
    error: ValidationError, prefix: _Parts, locate: _Locator, lead: str
) -> Iterator[SpecError]:
    """The SpecErrors of one jsonschema error (``prefix``: where the instance sits)."""
    parts: _Parts = (*prefix, *error.absolute_path)
    path = json_path(parts)
    keyword = error.validator
    instance: Any = error.instance
    required: Any = error.validator_value
    subschema = error.schema if isinstance(error.schema, Mapping) else {}
    reason = subschema.get("errorMessage")
    suffix = f" ({_sentence(reason)})" if isinstance(reason, str) else ""

    if keyword in ("anyOf", "oneOf") and error.context:
        best = best_match(error.context)
        if best is not None and not best.context:
            yield from _convert(best, prefix, locate, lead)
            return
    if _via_property_names(error) and isinstance(instance, str):
        message = _describe(error, subschema)
        key_path = json_path((*parts, instance))
        yield SpecError(locate.key(key_path), path, f"{lead}invalid key {instance!r}: {message}")
        return
    if keyword == "additionalProperties" and isinstance(instance, Mapping):
        properties = subschema.get("properties", {})
        patterns = subschema.get("patternProperties", {})
        for key in sorted(instance):
            if key in properties or any(re.search(p, key) for p in patterns):
                continue
            why = (
                f" ({hint(key, sorted(properties))})"
                if properties
                else " (no keys are allowed here)"
            )
            yield SpecError(
                locate.key(json_path((*parts, key))), path, f"{lead}unknown key {key!r}{why}"
            )
        return
    if keyword == "required" and isinstance(instance, Mapping):
        for key in required:
            if key not in instance:
                message = f"{lead}missing required key {key!r}{suffix}"
                yield SpecError(locate.node(path), path, message)
        return
    if keyword in ("not", None) and parts and isinstance(parts[-1], str):
        parent = json_path(parts[:-1])
        message = f"{lead}key {parts[-1]!r} is not allowed{suffix}"
        yield SpecError(locate.key(path), parent, message)
        return
    yield SpecError(locate.node(path), path, f"{lead}{_describe(error, subschema)}{suffix}")


def _describe(error: ValidationError, subschema: Mapping[str, Any]) -> str:
    """What was expected, and what was found, for one keyword."""
    keyword = error.validator
    expected: Any = error.validator_value
    instance: Any = error.instance
    got = _show(instance)
    if keyword == "type":
        types = [expected] if isinstance(expected, str) else list(expected)
        words = " or ".join(_TYPE_WORDS.get(t, t) for t in types)
        return f"expected {words}, got {type_name(instance)}"
    if keyword == "enum":
        listed = f"expected one of {', '.join(_bare(v) for v in expected)}; got {got}"
        names = [v for v in expected if isinstance(v, str)]
        close = closest(instance, names) if isinstance(instance, str) else None
        return listed if close is None else f"{listed} (did you mean {close!r}?)"
    if keyword == "const":
        return f"expected {_show(expected)}, got {got}"
    if keyword == "pattern":
        explained = subschema.get("patternErrorMessage")
        if isinstance(explained, str):
            return f"expected {_sentence(explained)}, got {got}"
        return f"expected a string matching {expected}, got {got}"
    if keyword == "minLength":
        if expected == 1:
            return "expected a non-empty string"
        return f"expected at least {_count(expected, 'character')}, got {len(instance)}"
    if keyword == "maxLength":
        return f"expected at most {_count(expected, 'character')}, got {len(instance)}"
    if keyword == "minItems":
        if expected == 1:
            return "expected a non-empty array"
        return f"expected at least {_count(expected, 'item')}, got {len(instance)}"
    if keyword == "maxItems":
        return f"expected at most {_count(expected, 'item')}, got {len(instance)}"
    if keyword == "minProperties":
        if expected == 1:
            return "expected a non-empty object"
        return f"expected at least {_count(expected, 'key')}, got {len(instance)}"
    if keyword == "maxProperties":
        return f"expected at most {_count(expected, 'key')}, got {len(instance)}"
    if keyword == "minimum":
        return f"expected a number >= {expected}, got {got}"
    if keyword == "maximum":
        return f"expected a number <= {expected}, got {got}"
    if keyword == "exclusiveMinimum":
        return f"expected a number > {expected}, got {got}"
    if keyword == "exclusiveMaximum":
        return f"expected a number < {expected}, got {got}"
    if keyword == "multipleOf":
        return f"expected a multiple of {expected}, got {got}"
    if keyword == "uniqueItems" and isinstance(instance, Sequence):
        seen: list[Any] = []
        for item in instance:
            if item in seen:
                return f"expected unique items; {_show(item)} appears more than once"
            seen.append(item)
        return "expected unique items"
    if keyword in ("anyOf", "oneOf"):
        if keyword == "oneOf" and not error.context:
            return f"expected exactly one of the allowed forms, got {got} matching several"
        return f"expected one of the allowed forms, got {got}"
    if keyword in ("not", None):
        return "this value is not allowed here"
    return str(error.message)


# --------------------------------------------------------------------------- extra checks


def _lists(value: Any, pattern: _Parts, parts: _Parts = ()) -> Iterator[tuple[_Parts, list[Any]]]:
    """Every list at ``pattern`` inside ``value`` (``*``: each index of a list)."""
    if not pattern:
        if isinstance(value, list):
            yield parts, value
        return
    head, rest = pattern[0], pattern[1:]
    if head == "*":
        if isinstance(value, list):
            for index, item in enumerate(value):
                yield from _lists(item, rest, (*parts, index))
    elif isinstance(value, Mapping) and head in value:
        yield from _lists(value[head], rest, (*parts, head))


def _unique_names(value: Any, schema_name: str, locate: _Locator) -> Iterator[SpecError]:
    for pattern, what in _UNIQUE_NAMES.get(schema_name, ()):
        for parts, items in _lists(value, pattern):
            first: dict[str, str] = {}
            for index, item in enumerate(items):
                if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
                    continue
                name = item["name"]
                path = json_path((*parts, index, "name"))
                if name in first:
                    message = f"duplicate {what} name {name!r} (also at {first[name]})"
                    yield SpecError(locate.node(path), path, message)
                else:
                    first[name] = json_path((*parts, index))


def _tool_parameters(value: Any, locate: _Locator) -> Iterator[SpecError]:
    """Each tool's ``parameters`` must itself be a valid draft 2020-12 schema."""
    for parts, tools in _lists(value, ("tools",)):
        for index, tool in enumerate(tools):
            if not isinstance(tool, Mapping) or not isinstance(tool.get("parameters"), Mapping):
                continue
            prefix = (*parts, index, "parameters")
            for error in _meta_validator().iter_errors(tool["parameters"]):
                yield from _convert(error, prefix, locate, "invalid JSON Schema: ")


def _default_mode(value: Any, locate: _Locator) -> Iterator[SpecError]:
    if not isinstance(value, Mapping):
        return
    modes, default = value.get("modes"), value.get("default_mode")
    if isinstance(modes, Mapping) and modes and isinstance(default, str) and default not in modes:
        path = json_path(("default_mode",))
        message = (
            f"default mode {default!r} is not one of the modes ({hint(default, sorted(modes))})"
        )
        yield SpecError(locate.node(path), path, message)
