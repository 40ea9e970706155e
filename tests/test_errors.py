"""Typed errors: every error class is drawn in the tree of ``prefixlock.core.errors``, and
nothing raises the bare base class."""

from __future__ import annotations

import ast
import inspect

import pytest
from prefixlock.core import errors
from test_imports import source_files

TREE = errors.__doc__ or ""


def _error_classes() -> list[type[errors.PrefixlockError]]:
    return [
        value
        for _, value in inspect.getmembers(errors, inspect.isclass)
        if issubclass(value, errors.PrefixlockError) and value.__module__ == errors.__name__
    ]


def test_every_error_class_is_in_the_tree() -> None:
    classes = _error_classes()
    assert errors.PrefixlockError in classes
    for cls in classes:
        line = next((line for line in TREE.splitlines() if f" {cls.__name__} " in f"{line} "), "")
        assert line, f"{cls.__name__} is not drawn in the errors docstring"


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda c: c.__name__)
def test_the_tree_draws_each_class_under_its_base(cls: type[errors.PrefixlockError]) -> None:
    lines = TREE.splitlines()
    index = next(i for i, line in enumerate(lines) if f" {cls.__name__} " in f"{line} ")
    if cls is errors.PrefixlockError:
        return
    column = lines[index].index(cls.__name__)
    # the nearest line above that starts one level (four columns) further left
    parent = next(
        line[column - 4 :].split()[0]
        for line in reversed(lines[:index])
        if len(line) > column - 4 and line[column - 4 : column - 3].isalpha()
    )
    assert cls.__bases__[0].__name__ == parent


def test_no_error_class_outside_the_errors_module() -> None:
    found = []
    for module, path in source_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(base, ast.Name) and base.id.endswith("Error") for base in node.bases
            ):
                found.append(f"{module}.{node.name}")
    allowed = {f"prefixlock.core.errors.{cls.__name__}" for cls in _error_classes()}
    assert sorted(set(found) - allowed) == []


def test_nothing_raises_the_bare_base_class() -> None:
    found = []
    for module, path in source_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Raise)
                and isinstance(node.exc, ast.Call)
                and isinstance(node.exc.func, ast.Name)
                and node.exc.func.id == "PrefixlockError"
            ):
                found.append(f"{module}:{node.lineno}")
    assert found == []
