"""The dependency rules, checked by walking the imports of every module.

* ``compiler`` never imports ``providers`` (the CLI / replay edge may, listed below);
* each third-party library is imported by one module: yaml by the loader, jsonschema by
  the validator, jinja2 by the template environment;
* ``providers`` import from ``compiler`` only the provider-independent request model.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("compiler", "providers")

#: Third-party library -> the one module that may import it.
OWNERS = {
    "yaml": "compiler.loader",
    "jsonschema": "compiler.validate",
    "jinja2": "compiler.templates",
}

#: What ``providers`` may import from ``compiler``.
PROVIDER_API = frozenset(
    {"compiler.model", "compiler.messages", "compiler.canonical", "compiler.errors"}
)

#: Modules of ``compiler`` at the CLI / replay edge that wire providers in.
EDGE_MODULES: frozenset[str] = frozenset(
    {
        "compiler.replay",  # replays scenarios and serializes each call per provider
        # compares bodies through a provider's strip_cache_markers and names the
        # providers for the rest of `prefixlock diff` (diff, diff_sides, folderdiff)
        "compiler.comparison",
        "compiler.bench",  # times each provider's serialize against a naive re-encode
    }
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(source: str, module: str, *, is_package: bool = False) -> Iterator[tuple[int, str]]:
    """``(line, imported module)`` for every import; ``from a import b`` yields ``a.b``
    (b may be a module) and relative imports are resolved against ``module``."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"


def all_imports() -> Iterator[tuple[str, int, str]]:
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if "_example" in path.parts:
                continue
            name = module_name(path)
            source = path.read_text(encoding="utf-8")
            for line, imported in imports(source, name, is_package=path.name == "__init__.py"):
                yield name, line, imported


def top(name: str) -> str:
    return name.partition(".")[0]


def violations() -> list[str]:
    found: list[str] = []
    for module, line, imported in all_imports():
        where = f"{module}:{line}"
        owner = OWNERS.get(top(imported))
        if owner is not None and module != owner:
            found.append(f"{where} imports {imported} (only {owner} may)")
        to_provider = top(module) == "compiler" and top(imported) == "providers"
        if to_provider and module not in EDGE_MODULES:
            found.append(f"{where} imports {imported} (compiler never imports providers)")
        if top(module) == "providers" and top(imported) == "compiler":
            # ``from compiler import canonical`` yields both "compiler" and
            # "compiler.canonical"; the bare package name alone is harmless.
            allowed = imported == "compiler" or any(
                imported == api or imported.startswith(api + ".") for api in PROVIDER_API
            )
            if not allowed:
                found.append(
                    f"{where} imports {imported}"
                    f" (providers may import only {', '.join(sorted(PROVIDER_API))})"
                )
    return sorted(set(found))


def test_dependency_rules_hold() -> None:
    assert violations() == []


def test_the_walk_sees_every_module() -> None:
    modules = {module for module, _, _ in all_imports()}
    for expected in ("compiler.loader", "compiler.templates", "compiler.bundle", "compiler.cli"):
        assert expected in modules
    assert ("compiler.templates", "jinja2") in {(m, top(i)) for m, _, i in all_imports()}


@pytest.mark.parametrize(
    ("source", "module", "expected"),
    [
        ("import yaml", "compiler.x", ["yaml"]),
        ("from jinja2 import nodes", "compiler.x", ["jinja2", "jinja2.nodes"]),
        ("from . import canonical", "compiler.x", ["compiler", "compiler.canonical"]),
        ("from .. import model", "compiler.sub.x", ["compiler", "compiler.model"]),
        ("if True:\n    import jsonschema.validators", "compiler.x", ["jsonschema.validators"]),
    ],
)
def test_imports_are_resolved(source: str, module: str, expected: list[str]) -> None:
    assert [name for _, name in imports(source, module)] == expected
