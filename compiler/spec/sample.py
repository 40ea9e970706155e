"""Representative sample values built from the shipped JSON Schemas.

``build`` renders the context template and every mode's runtime template once with a
sample in which every declared variable is present (every property of every object,
one item per array, one item per value of an enum field in an array of objects, so a
template's branches on ``rule.kind`` all run). A misspelled attribute
(``{{ mode.remindr }}``) then fails the build at its template line instead of the first
turn that reaches it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from .validate import schema

__all__ = ["sample_context", "sample_turn"]

_STRING_FORMATS = {"date-time": "2026-01-02T03:04:05Z", "uri": "https://example.invalid/x"}


def _resolve(ref: str, here: str) -> tuple[Mapping[str, Any], str]:
    file, _, pointer = ref.partition("#")
    name = file.removesuffix(".schema.json") if file else here
    node: Any = schema(name)
    for part in pointer.strip("/").split("/") if pointer.strip("/") else ():
        node = node[part]
    return node, name


def _sample(node: Mapping[str, Any], here: str, depth: int = 0) -> Any:
    if depth > 12:
        return None
    if "$ref" in node:
        target, name = _resolve(node["$ref"], here)
        return _sample(target, name, depth + 1)
    if "const" in node:
        return copy.deepcopy(node["const"])
    if "enum" in node:
        return copy.deepcopy(node["enum"][0])
    for key in ("anyOf", "oneOf"):
        if key in node:
            return _sample(node[key][0], here, depth + 1)
    kind = node.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in node:
        return {
            key: _sample(value, here, depth + 1)
            for key, value in node.get("properties", {}).items()
        }
    if kind == "array":
        return _items(node.get("items", {}), here, depth)
    if kind == "string":
        return _STRING_FORMATS.get(node.get("format", ""), "sample")
    if kind == "integer":
        return 1
    if kind == "number":
        return 1.5
    if kind == "boolean":
        return True
    return None


def _items(items: Mapping[str, Any], here: str, depth: int) -> list[Any]:
    """One item; or one per value of an enum property of an object item."""
    first = _sample(items, here, depth + 1)
    target, name = (items, here)
    while "$ref" in target:
        target, name = _resolve(target["$ref"], name)
    for key, prop in target.get("properties", {}).items():
        while "$ref" in prop:
            prop, _ = _resolve(prop["$ref"], name)
        if "enum" in prop and isinstance(first, dict):
            return [{**first, key: value} for value in prop["enum"]]
    return [first]


def sample_context() -> dict[str, Any]:
    """Every conversation-level variable, as the context template sees them."""
    value = _sample(schema("context"), "context")
    assert isinstance(value, dict)
    return value


def sample_turn(mode_name: str, reminder: str) -> dict[str, Any]:
    """Every turn-level variable of a runtime template, for one mode."""
    request = _sample(schema("agent_run_request"), "agent_run_request")
    assert isinstance(request, dict)
    return {
        "query": "sample query",
        "selected_context": request.get("selected_context", []),
        "open_files": request.get("open_files", []),
        "action_context": {"sample": "value"},
        "timestamp": "2026-01-02T03:04:05Z",
        "mode": {"name": mode_name, "reminder": reminder},
    }
