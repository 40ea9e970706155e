"""Do JSON Schemas and YAML ``$schema`` first lines resolve to local files, as an editor would?

An editor (the YAML language server) reads ``# yaml-language-server: $schema=PATH`` on a
YAML file's first line, resolves PATH against the YAML file, and resolves each ``$ref`` of
that schema against the schema file's own location. Nothing here may need the network.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit
from urllib.request import url2pathname

from jsonschema import Draft202012Validator
from prefixlock.spec.loader import load_yaml_file
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

HEADER = re.compile(r"# yaml-language-server: \$schema=(?P<path>\S+)")


def walk(value: Any, where: str = "#") -> Iterator[tuple[str, Any]]:
    """Every node of a JSON value with its JSON pointer."""
    yield where, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from walk(item, f"{where}/{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from walk(item, f"{where}/{index}")


def _pointer_target(document: Any, fragment: str) -> Any:
    """The node a JSON pointer fragment names, or ``None``."""
    target = document
    for raw in fragment.split("/")[1:] if fragment else []:
        part = unquote(raw).replace("~1", "/").replace("~0", "~")
        if isinstance(target, dict) and part in target:
            target = target[part]
        elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
            target = target[int(part)]
        else:
            return None
    return target


def ref_problems(folder: Path) -> list[str]:
    """What keeps ``folder/*.schema.json`` from resolving every ``$ref`` on their own.

    A ``$ref`` must name a sibling file (or none: the same file) and a JSON pointer that
    exists in it; no schema may have an ``$id`` (it would move the base away from the file).
    """
    problems = []
    files = sorted(folder.glob("*.schema.json"))
    if not files:
        return [f"{folder}: no *.schema.json files"]
    for path in files:
        parsed = json.loads(path.read_text(encoding="utf-8"))
        for where, node in walk(parsed):
            if not isinstance(node, dict):
                continue
            if "$id" in node:
                problems.append(f"{path.name}{where}: has an $id {node['$id']!r}")
            ref = node.get("$ref")
            if not isinstance(ref, str):
                continue
            file, _, fragment = ref.partition("#")
            if "http" in ref or ":" in file or "/" in file or "\\" in file:
                problems.append(f"{path.name}{where}: $ref {ref!r} is not a sibling file")
                continue
            target_file = folder / file if file else path
            if not target_file.is_file():
                problems.append(f"{path.name}{where}: $ref {ref!r}: no file {target_file.name}")
                continue
            document = json.loads(target_file.read_text(encoding="utf-8"))
            if not isinstance(_pointer_target(document, fragment), dict | bool):
                problems.append(f"{path.name}{where}: $ref {ref!r}: no schema at #{fragment}")
    return problems


def header_schema(yaml_file: Path) -> Path | None:
    """The schema file a YAML file's first line points at (resolved against the file)."""
    first = yaml_file.read_text(encoding="utf-8").partition("\n")[0]
    match = HEADER.fullmatch(first)
    if match is None or "://" in match["path"] or Path(match["path"]).is_absolute():
        return None
    return (yaml_file.parent / match["path"]).resolve()


def _retrieve_file(uri: str) -> Resource[Any]:
    """Read ``file:`` URIs from disk; anything else (the network) is refused."""
    parts = urlsplit(uri)
    if parts.scheme != "file":
        raise AssertionError(f"would fetch {uri}")
    text = Path(url2pathname(parts.path)).read_text(encoding="utf-8")
    return Resource.from_contents(json.loads(text), default_specification=DRAFT202012)


def editor_errors(yaml_file: Path) -> list[str]:
    """Validate a YAML file like an editor: its header's schema, refs resolved from disk."""
    schema_file = header_schema(yaml_file)
    assert schema_file is not None and schema_file.is_file(), yaml_file
    root = {"$ref": schema_file.as_uri()}  # the schema's base URI is its file
    validator = Draft202012Validator(root, registry=Registry(retrieve=_retrieve_file))
    value = load_yaml_file(yaml_file).value
    return sorted(f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(value))
