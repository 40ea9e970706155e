"""The dependency rules, checked by walking the imports of every module.

* every import of the package's own modules is relative, so the name ``prefixlock`` is
  written in ``pyproject.toml`` only;
* stages import one way (:data:`LAYERS`): ``core`` <- {``spec``, ``store``, ``cache``,
  ``providers``} <- ``runtime`` <- ``review`` <- ``bench`` <- ``cli`` (the benchmark
  verifies a golden case); ``http`` sits on ``providers`` beside ``runtime``, and no
  other stage imports it;
* each third-party or system library in :data:`OWNERS` is imported by one module.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "prefixlock"

#: Stage -> the stages it may import (besides itself).
LAYERS: dict[str, frozenset[str]] = {
    "core": frozenset(),
    "spec": frozenset({"core"}),
    "store": frozenset({"core"}),
    "cache": frozenset({"core"}),
    "providers": frozenset({"core"}),
    "runtime": frozenset({"core", "spec", "store", "cache", "providers"}),
    # the transport: above providers, beside runtime (which takes a client by protocol)
    "http": frozenset({"core", "providers"}),
    "review": frozenset({"core", "spec", "store", "cache", "providers", "runtime"}),
    "bench": frozenset({"core", "spec", "store", "cache", "providers", "runtime", "review"}),
    "cli": frozenset({"core", "spec", "store", "cache", "providers", "runtime", "review", "bench"}),
}

#: Library -> the one module that may import it.
OWNERS = {
    "yaml": "prefixlock.spec.loader",
    "jinja2": "prefixlock.spec.templates",
    "jsonschema": "prefixlock.spec.validate",
    "referencing": "prefixlock.spec.validate",
    "sqlite3": "prefixlock.store.sqlite",
    "psycopg": "prefixlock.store.postgres",
    "subprocess": "prefixlock.review.processes",
    "httpx2": "prefixlock.http.client",
    "botocore": "prefixlock.http.bedrock",
}


def source_files() -> Iterator[tuple[str, Path]]:
    """``(module name, path)`` of every module of the installed package ``prefixlock``:
    ``compiler/`` is the package, ``providers/`` its subpackage ``providers`` (in the
    checkout ``compiler/providers`` is a symlink to it)."""
    for path in sorted((REPO / "compiler").rglob("*.py")):
        relative = path.relative_to(REPO / "compiler")
        if relative.parts[0] == "providers":
            continue  # the symlink; walked below under its real path
        yield _name(("", *relative.parts)), path
    for path in sorted((REPO / "providers").rglob("*.py")):
        yield _name(("", "providers", *path.relative_to(REPO / "providers").parts)), path


def _name(parts: tuple[str, ...]) -> str:
    names = [PACKAGE, *parts[1:]]
    names[-1] = names[-1].removesuffix(".py")
    if names[-1] == "__init__":
        names.pop()
    return ".".join(names)


def imports(
    source: str, module: str, *, is_package: bool = False
) -> Iterator[tuple[int, str, int]]:
    """``(line, imported module, level)`` for every import; ``from a import b`` yields
    ``a.b`` too (b may be a module); relative imports are resolved against ``module``."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, 0
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            yield node.lineno, base, node.level
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}", node.level


def all_imports() -> Iterator[tuple[str, int, str, int]]:
    for name, path in source_files():
        source = path.read_text(encoding="utf-8")
        for line, imported, level in imports(source, name, is_package=path.name == "__init__.py"):
            yield name, line, imported, level


def stage(module: str) -> str | None:
    """``prefixlock.spec.loader`` -> ``spec``; the package's own ``__init__``/``__main__``
    belong to no stage (they may import every stage)."""
    parts = module.split(".")
    if len(parts) < 2 or parts[1] in ("__main__",):
        return None
    return parts[1] if parts[1] in LAYERS else None


def violations(walk: Iterable[tuple[str, int, str, int]] | None = None) -> list[str]:
    found: list[str] = []
    for module, line, imported, level in all_imports() if walk is None else walk:
        where = f"{module}:{line}"
        head = imported.partition(".")[0]
        if level == 0 and head in (PACKAGE, "compiler", "providers"):
            found.append(f"{where} imports {imported} absolutely (use a relative import)")
            continue
        owner = OWNERS.get(head)
        if owner is not None and module != owner:
            found.append(f"{where} imports {imported} (only {owner} may)")
        if head != PACKAGE:
            continue
        mine, theirs = stage(module), stage(imported)
        if theirs is None:
            if imported != PACKAGE and mine is not None:
                found.append(f"{where} imports {imported}, outside every stage")
            continue
        if mine is not None and theirs != mine and theirs not in LAYERS[mine]:
            found.append(
                f"{where} imports {imported} ({mine} may import only: "
                f"{', '.join(sorted(LAYERS[mine])) or 'nothing'})"
            )
    return sorted(set(found))


def test_dependency_rules_hold() -> None:
    assert violations() == []


def test_the_walk_sees_every_stage_and_owner() -> None:
    seen = list(all_imports())
    modules = {module for module, _, _, _ in seen}
    assert {stage(m) for m in modules} >= set(LAYERS)
    assert "prefixlock.providers.anthropic" in modules
    libraries = {(m, i.partition(".")[0]) for m, _, i, _ in seen}
    for library, owner in OWNERS.items():
        assert (owner, library) in libraries, f"{owner} no longer imports {library}"


def test_layer_table_runs_one_way() -> None:
    for mine, allowed in LAYERS.items():
        for other in allowed:
            assert mine not in LAYERS[other], f"{mine} and {other} import each other"


@pytest.mark.parametrize(
    ("source", "module", "expected"),
    [
        ("import yaml", "prefixlock.spec.x", ["yaml"]),
        ("from jinja2 import nodes", "prefixlock.spec.x", ["jinja2", "jinja2.nodes"]),
        (
            "from . import canonical",
            "prefixlock.core.x",
            ["prefixlock.core", "prefixlock.core.canonical"],
        ),
        (
            "from ..core import model",
            "prefixlock.spec.x",
            ["prefixlock.core", "prefixlock.core.model"],
        ),
        ("if True:\n    import jsonschema.validators", "prefixlock.x", ["jsonschema.validators"]),
    ],
)
def test_imports_are_resolved(source: str, module: str, expected: list[str]) -> None:
    assert [name for _, name, _ in imports(source, module)] == expected


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        ("prefixlock.core.x", "from ..runtime import history", "core may import only: nothing"),
        ("prefixlock.spec.x", "from ..store import sqlite", "spec may import only: core"),
        ("prefixlock.providers.x", "from ..runtime import conversation", "providers may import"),
        ("prefixlock.runtime.x", "from ..review import verify", "runtime may import only"),
        ("prefixlock.review.x", "import sqlite3", "only prefixlock.store.sqlite may"),
        ("prefixlock.review.x", "from prefixlock.core import canonical", "absolutely"),
        ("prefixlock.bench.x", "import providers", "absolutely"),
    ],
)
def test_a_wrong_import_is_reported(module: str, source: str, expected: str) -> None:
    walk = [(module, line, name, level) for line, name, level in imports(source, module)]
    found = violations(walk)
    assert found and expected in found[0], found
