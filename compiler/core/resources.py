"""Files shipped inside the package: the JSON Schemas and the bundled example spec root.

The top-level package name is read from this module's own name, so it is written in
``pyproject.toml`` only; in a checkout ``compiler/_example/{prompt,rules}`` are symlinks to
the repository's ``prompt/`` and ``rules/``, in a wheel they are copies.
"""

from __future__ import annotations

import importlib.resources
import sys
from importlib.abc import Traversable
from pathlib import Path

__all__ = ["PACKAGE", "example_dir", "python_module_command", "schema_file"]

#: The installed top-level package (``prefixlock``).
PACKAGE = __name__.partition(".")[0]


def schema_file(file_name: str) -> Traversable:
    """A shipped JSON Schema file, by file name."""
    return importlib.resources.files(PACKAGE).joinpath("schemas", file_name)


def example_dir() -> Path:
    """Where the bundled example spec root would be: ``<package>/_example``."""
    init = sys.modules[PACKAGE].__file__
    assert init is not None
    return Path(init).resolve().parent / "_example"


def python_module_command() -> list[str]:
    """The command that runs this package's command line in a new interpreter."""
    return [sys.executable, "-m", PACKAGE]
