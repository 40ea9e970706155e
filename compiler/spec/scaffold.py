"""``prefixlock init``: a new spec root from the bundled example, with its schemas and a
starter scenario under ``golden/``.

With ``name``, the agent is called that instead of the example's: its ``prompt/<name>/``
folder and the ``name:`` and prompt paths of ``rules/agent.yaml``. The example's
``rules/*.yaml`` headers are pointed at the schemas written beside them,
the new root is built and its lock file written; the folder appears complete or not at
all (it is assembled in a staging folder and renamed into place; an empty folder that
exists, such as the current one, is staged inside and its entries moved out).
"""

from __future__ import annotations

import os
import re
import shutil
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path

from ..core.atomic import check_replaceable, replace_file, staging_dir
from ..core.errors import UsageError
from ..core.resources import example_dir
from .build import build_bundle, find_example_root, write_lock
from .bundle import Bundle
from .validate import SCHEMA_NAMES, schema_text

__all__ = [
    "DEFAULT_AGENT",
    "GITATTRIBUTES",
    "GITIGNORE",
    "GOLDEN",
    "SCHEMAS_FOLDER",
    "agent_name_for",
    "init_project",
    "point_headers_at_schemas",
    "write_schemas",
]

#: The folder of scenarios (and their pinned bodies) that ``prefixlock verify`` replays.
GOLDEN = "golden"
#: Where ``init`` writes the schemas, and how a ``rules/*.yaml`` file reaches them.
SCHEMAS_FOLDER = "schemas"
#: An agent name, as ``agent.schema.json`` has it.
_AGENT_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
#: What :func:`agent_name_for` gives a folder name with no letter or digit in it.
DEFAULT_AGENT = "agent"
_HEADER = re.compile(rb"# yaml-language-server: \$schema=(?:\S*/)?(?P<kind>[a-z_]+)\.schema\.json")


def agent_name_for(folder: str) -> str:
    """An agent name made of a folder's name: ASCII-folded, lowercase, every run of other
    characters one ``-``, trimmed to 64 characters (``My Agent_2`` -> ``my-agent-2``);
    :data:`DEFAULT_AGENT` when nothing is left."""
    ascii_name = unicodedata.normalize("NFKD", folder).encode("ascii", "ignore").decode()
    name = re.sub(r"[^a-z0-9]+", "-", ascii_name.lower()).strip("-")
    name = name[:64].rstrip("-")
    return name if _AGENT_NAME.fullmatch(name) else DEFAULT_AGENT


def point_headers_at_schemas(folder: Path, *, up: int = 1) -> None:
    """Rewrite the ``$schema`` first line of each YAML file in ``folder`` to
    ``<up x ../>schemas/<kind>.schema.json``.

    Only a first line naming a shipped schema changes; every other byte is kept.
    """
    for path in sorted(folder.glob("*.yaml")):
        data = path.read_bytes()
        first, newline, rest = data.partition(b"\n")
        match = _HEADER.fullmatch(first)
        kind = match["kind"].decode() if match is not None else ""
        if kind not in SCHEMA_NAMES:
            continue
        schema = f"{'../' * up}{SCHEMAS_FOLDER}/{kind}.schema.json"
        header = f"# yaml-language-server: $schema={schema}"
        path.write_bytes(header.encode() + newline + rest)


def _starter_scenarios() -> list[Path]:
    """The scenarios a new project starts its ``golden/`` with (``prefixlock verify``
    replays them): ``<package>/_example/golden/*/scenario.yaml``."""
    return sorted((example_dir() / GOLDEN).glob("*/scenario.yaml"))


def write_schemas(out: Path, names: Sequence[str] | None = None) -> list[Path]:
    """Write every schema (or those ``names``) into ``out``, side by side: their relative
    ``$ref``s resolve there. Each file is written only over a regular file or at a new
    path (:mod:`prefixlock.core.atomic`), and every path is checked before any file is
    written: a symbolic link, a FIFO or a folder at one of them is an
    :class:`~prefixlock.core.errors.InputError` and nothing is written."""
    chosen = sorted(SCHEMA_NAMES if names is None else names)
    paths = [out / f"{name}.schema.json" for name in chosen]
    for path in paths:
        check_replaceable(path)
    for name, path in zip(chosen, paths, strict=True):
        replace_file(path, schema_text(name).encode("utf-8"))
    return paths


#: Written by ``init`` (and shipped in prefixlock's own repository): prefixlock pins
#: bytes, so the files it hashes or compares keep LF line endings on every checkout, even
#: with ``core.autocrlf``.
GITATTRIBUTES = """\
# prefixlock pins bytes: specs and the lock keep LF on every checkout (core.autocrlf too).
prompt/** text eol=lf
rules/** text eol=lf
prefixlock.lock text eol=lf
# Golden files are compared byte for byte: git must never convert their line endings.
golden/** -text
golden/**/calls.md -text
"""


#: Written by ``init``: what a spec root's repository never commits.
GITIGNORE = """\
# prefixlock build writes build/; the lock file and golden/ are committed.
/build/
# Python virtual environments and caches.
.venv/
venv/
__pycache__/
*.py[cod]
.pytest_cache/
.mypy_cache/
.ruff_cache/
"""


def _rename_agent(root: Path, old: str, new: str) -> None:
    """Call the scaffold's agent ``new``: move ``prompt/<old>/``, rewrite the ``name:``
    line and the ``prompt/<old>/`` paths of ``rules/agent.yaml``, and the name the
    instructions introduce the agent by (``You are <Old>,``)."""
    (root / "prompt" / old).rename(root / "prompt" / new)
    agent = root / "rules" / "agent.yaml"
    text = agent.read_text(encoding="utf-8")
    text = re.sub(rf"(?m)^name: {re.escape(old)}$", f"name: {new}", text, count=1)
    agent.write_text(text.replace(f"prompt/{old}/", f"prompt/{new}/"), encoding="utf-8")
    instructions = root / "prompt" / new / "instructions.md"
    text = instructions.read_text(encoding="utf-8")
    # Only the introduction: "cursor" elsewhere (a cursor position) is not the name.
    text = text.replace(f"You are {old.capitalize()},", f"You are {new},", 1)
    instructions.write_text(text, encoding="utf-8")


def init_project(
    target: Path,
    *,
    name: str | None = None,
    populate: Callable[[Path], object] | None = None,
) -> Bundle:
    """Create the spec root ``target`` (absent or empty) from the bundled example and
    return its bundle; raises :class:`~prefixlock.core.errors.UsageError` if ``target``
    exists and is not empty.

    ``populate(root)`` runs on the complete new root before it is moved into place (the
    CLI writes the starter case's golden bodies with it); if it fails, nothing appears.
    """
    if name is not None and not _AGENT_NAME.fullmatch(name):
        raise UsageError(
            f"--name {name!r}: an agent name is lowercase letters, digits and '-', starting"
            " with a letter or digit (at most 64 characters)"
        )
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise UsageError(
            f"refusing to init {str(target)!r}: it exists and is not empty; give a new or an"
            " empty folder"
        )
    example = find_example_root()
    # An empty folder that exists (the current one: ``init .``) is filled in place, so a
    # shell standing in it sees the files and the folder keeps its mode and owner: the
    # project is staged inside it and its entries are moved out at the end. A new folder
    # is staged next to it and moved in whole.
    in_place = target.exists()
    if not in_place:
        target.parent.mkdir(parents=True, exist_ok=True)
    parent = target if in_place else target.parent
    staging = staging_dir(parent, ".init-" if in_place else f".{target.name}.init-")
    try:
        ignore = shutil.ignore_patterns(".*", "__pycache__", "*.pyc")
        for folder in ("prompt", "rules"):
            shutil.copytree(example / folder, staging / folder, ignore=ignore)
        for scenario in _starter_scenarios():
            case = staging / GOLDEN / scenario.parent.name
            case.mkdir(parents=True)
            shutil.copyfile(scenario, case / scenario.name)
            point_headers_at_schemas(case, up=2)
        write_schemas(staging / SCHEMAS_FOLDER)
        point_headers_at_schemas(staging / "rules")
        if name is not None:
            example_name = build_bundle(example).agent
            if name != example_name:
                _rename_agent(staging, example_name, name)
        bundle = build_bundle(staging)
        write_lock(bundle, staging)
        (staging / ".gitattributes").write_bytes(GITATTRIBUTES.encode("utf-8"))
        (staging / ".gitignore").write_bytes(GITIGNORE.encode("utf-8"))
        if populate is not None:
            populate(staging)
        if in_place:
            _move_entries(staging, target)
            staging.rmdir()
        else:
            os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return bundle


def _move_entries(staging: Path, target: Path) -> None:
    """Move every entry of ``staging`` into ``target`` (renames within one folder); if
    one fails, the entries moved so far go back, so ``target`` is left empty."""
    moved: list[Path] = []
    try:
        for entry in sorted(staging.iterdir()):
            os.replace(entry, target / entry.name)
            moved.append(entry)
    except BaseException:
        for entry in moved:
            os.replace(target / entry.name, entry)
        raise
