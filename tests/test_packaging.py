"""Packaging: the folders of the design card install as one package, ``prefixlock``.

``compiler/`` is the package (``package-dir`` in pyproject.toml), ``compiler/providers``
and ``compiler/_example/*`` are symlinks to the top-level folders. The wheel itself is
built, listed and installed into a fresh virtualenv by ``.ci/wheel-check``.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

import prefixlock
import prefixlock.providers
from test_imports import OWNERS, source_files

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))

#: Import name -> distribution name, for the runtime dependencies.
DISTRIBUTIONS = {
    "yaml": "pyyaml",
    "jinja2": "jinja2",
    "jsonschema": "jsonschema",
    "referencing": "referencing",
    "attrs": "attrs",
    "httpx2": "httpx2",
}
#: Import name -> (extra, distribution) of the optional dependencies, imported lazily.
OPTIONAL = {"psycopg": ("postgres", "psycopg"), "botocore": ("bedrock", "botocore")}


def test_the_listed_packages_are_exactly_the_folders() -> None:
    listed = PYPROJECT["tool"]["setuptools"]["packages"]
    found = sorted(
        ".".join(("prefixlock", *init.parent.relative_to(REPO / "compiler").parts))
        for init in (REPO / "compiler").glob("**/__init__.py")
    )
    found += sorted(
        ".".join(("prefixlock", "providers", *init.parent.relative_to(REPO / "providers").parts))
        for init in (REPO / "providers").glob("**/__init__.py")
    )
    assert sorted(listed) == sorted(set(found))
    assert PYPROJECT["tool"]["setuptools"]["package-dir"] == {"prefixlock": "compiler"}


def test_the_symlinks_join_the_top_level_folders_into_the_package() -> None:
    links = {
        "compiler/providers": "providers",
        "compiler/_example/prompt": "prompt",
        "compiler/_example/rules": "rules",
        "compiler/_example/golden/identical-context/scenario.yaml": (
            "golden/identical-context/scenario.yaml"
        ),
        # bench's long-session economics (not a starter case: init copies golden/ only)
        "compiler/_example/bench/long-session/scenario.yaml": ("golden/long-session/scenario.yaml"),
    }
    for link, target in links.items():
        assert (REPO / link).is_symlink(), link
        assert (REPO / link).resolve() == REPO / target


def test_the_editable_install_runs_the_source_folders() -> None:
    # Edits are live: the imported modules are the checkout's files, not copies.
    assert Path(prefixlock.__file__).resolve() == REPO / "compiler" / "__init__.py"
    providers_init = Path(prefixlock.providers.__file__).resolve()
    assert providers_init == REPO / "providers" / "__init__.py"
    assert (REPO / "compiler" / "py.typed").is_file()


def test_every_imported_library_is_a_declared_dependency() -> None:
    declared = {
        requirement.split(">")[0].split("=")[0].split("[")[0].strip().lower()
        for requirement in PYPROJECT["project"]["dependencies"]
    }
    imported = set()
    stdlib = set(sys.stdlib_module_names)
    for _, path in source_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {alias.name.partition(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.partition(".")[0])
    third_party = sorted(imported - stdlib - {"__future__"})
    assert third_party == sorted({*DISTRIBUTIONS, *OPTIONAL})
    assert {DISTRIBUTIONS[name] for name in DISTRIBUTIONS} <= declared
    extras = PYPROJECT["project"]["optional-dependencies"]
    for name, (extra, distribution) in OPTIONAL.items():
        assert any(r.startswith(distribution) for r in extras[extra]), name


def test_mypy_checks_the_package_folder() -> None:
    assert PYPROJECT["tool"]["mypy"]["files"] == ["compiler"]
    assert PYPROJECT["tool"]["mypy"]["strict"] is True
    assert set(OWNERS) <= {*DISTRIBUTIONS, *OPTIONAL, *sys.stdlib_module_names}
