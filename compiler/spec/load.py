"""Loading a compiled bundle (``build/`` and ``prefixlock.lock``) at a server's startup.

The build step (``prefixlock build`` in CI) writes every part of the bundle to the output
folder and the manifest, which lists each part's SHA-256 and size, to the lock file. A
server ships the output folder and the lock, not the YAML and Jinja, and loads them with
:meth:`Bundle.load <prefixlock.spec.bundle.Bundle.load>`:

1. every part the lock lists must be in the folder, a regular file inside it, with the
   locked size and SHA-256; a file the lock does not list, and a ``manifest.json`` that
   is not the lock, are refused too (a half-copied or mixed deploy);
2. the parts are read back into the bundle's values (templates compiled and checked as
   the build does), and the bundle is laid out again from them: its parts, digest and
   manifest must be the lock's, byte for byte. A part this version cannot read back (a
   build by another version of prefixlock) fails here, naming it.

Every problem found is reported at once in one :class:`BundleError`, one line each,
naming the part. Nothing is loaded unless all of it matches.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from ..core import canonical
from ..core.errors import BundleError, CanonicalJSONError, SpecErrors
from ..core.model import ProviderSettings, ToolSpec
from .build import _assemble, compile_spec_template  # a loaded bundle is built again
from .bundle import Bundle, Mode
from .outputs import LOCK_FILE, MANIFEST

__all__ = ["load_bundle"]

#: The parts this version reads back (``policy.json`` only when the spec sets one).
_KNOWN = (
    "context-defaults.json",
    "context-fields.json",
    "context-updates.json",
    "instructions.md",
    "modes.json",
    "policy.json",
    "settings.json",
    "tools.json",
)
_TEMPLATES = "templates/"


def load_bundle(build_dir: Path | str, lock: Path | str | None = None) -> Bundle:
    """The bundle in ``build_dir``, checked against the lock file ``lock`` (default: the
    ``prefixlock.lock`` beside ``build_dir``, where ``prefixlock build`` writes it)."""
    folder = Path(build_dir)
    lock_path = Path(lock) if lock is not None else folder.parent / LOCK_FILE
    if not folder.is_dir():
        raise BundleError(f"cannot load the bundle: {str(folder)!r} is not a folder")
    lock_bytes = _read_lock(lock_path)
    manifest = _manifest(lock_bytes, lock_path)
    parts, problems = _read_parts(folder, manifest["parts"], lock_bytes)
    if problems:
        raise _error(folder, lock_path, problems)
    try:
        bundle = _rebuild(manifest["agent"], parts)
    except (KeyError, TypeError, ValueError, CanonicalJSONError, SpecErrors) as err:
        raise _error(folder, lock_path, [f"a part cannot be read back: {err}"]) from None
    if bundle.manifest_bytes() != lock_bytes:
        raise _error(
            folder,
            lock_path,
            [
                f"the parts lay out to digest {bundle.digest}, the lock says "
                f"{manifest['digest']}: a part this version of prefixlock does not read "
                "back, or a lock edited by hand (rebuild with this version)"
            ],
        )
    return bundle


def _error(folder: Path, lock: Path, problems: list[str]) -> BundleError:
    lines = "\n".join(f"  {p}" for p in problems)
    return BundleError(f"the bundle in {str(folder)!r} does not match {str(lock)!r}:\n{lines}")


def _read_lock(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise BundleError(
            f"cannot load the bundle: the lock file {str(path)!r} is missing (ship it with "
            "build/, or pass lock=)"
        ) from None
    except OSError as err:
        raise BundleError(
            f"cannot load the bundle: cannot read the lock file {str(path)!r}: "
            f"{err.strerror or err}"
        ) from None


def _manifest(data: bytes, path: Path) -> Mapping[str, Any]:
    """The lock's manifest, its shape checked (a lock is written by prefixlock only)."""
    try:
        value = canonical.loads(data)
    except (ValueError, CanonicalJSONError) as err:
        raise BundleError(f"{str(path)!r} is not a lock file: {err}") from None
    ok = (
        isinstance(value, dict)
        and isinstance(value.get("agent"), str)
        and isinstance(value.get("digest"), str)
        and isinstance(value.get("parts"), list)
        and all(
            isinstance(p, dict)
            and isinstance(p.get("name"), str)
            and isinstance(p.get("sha256"), str)
            and type(p.get("size")) is int
            for p in value["parts"]
        )
    )
    if not ok:
        raise BundleError(f"{str(path)!r} is not a lock file prefixlock can read")
    assert isinstance(value, dict)
    return value


def _inside(folder: Path, name: str) -> Path | None:
    """``folder/name`` when ``name`` is a plain relative path that stays inside."""
    pure = PurePosixPath(name)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts or "\\" in name:
        return None
    return folder.joinpath(*pure.parts)


def _read_parts(
    folder: Path, listed: list[dict[str, Any]], lock_bytes: bytes
) -> tuple[dict[str, bytes], list[str]]:
    """Each listed part's bytes, checked against its size and digest; the problems."""
    parts: dict[str, bytes] = {}
    problems: list[str] = []
    root = folder.resolve()
    for entry in listed:
        name, size, digest = entry["name"], entry["size"], entry["sha256"]
        path = _inside(folder, name)
        if path is None or name == MANIFEST:
            problems.append(f"{name!r}: not a part name (the lock names a path outside build/)")
            continue
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            problems.append(f"{name} is missing")
            continue
        except OSError as err:
            problems.append(f"{name} cannot be read: {err.strerror or err}")
            continue
        if not stat.S_ISREG(info.st_mode) or not path.resolve().is_relative_to(root):
            problems.append(f"{name} is not a regular file inside the folder")
            continue
        if info.st_size != size:
            problems.append(f"{name} differs: {info.st_size} bytes, the lock says {size}")
            continue
        data = path.read_bytes()
        actual = hashlib.sha256(data).hexdigest()
        if actual != digest:
            problems.append(f"{name} differs: sha256 {actual}, the lock says {digest}")
            continue
        parts[name] = data
    names = {entry["name"] for entry in listed}
    for path in sorted(folder.rglob("*")):
        name = path.relative_to(folder).as_posix()
        if path.is_dir() and not path.is_symlink():
            continue
        if name == MANIFEST:
            if path.is_symlink() or path.read_bytes() != lock_bytes:
                problems.append(f"{MANIFEST} differs from the lock (build/ of another build?)")
        elif name not in names:
            problems.append(f"{name} is not part of the locked bundle")
    return parts, problems


def _json(parts: Mapping[str, bytes], name: str) -> Any:
    return canonical.loads(parts[name])


def _rebuild(agent: str, parts: Mapping[str, bytes]) -> Bundle:
    """The bundle the parts were laid out from."""
    unknown = sorted(n for n in parts if n not in _KNOWN and not n.startswith(_TEMPLATES))
    if unknown:
        raise ValueError(f"{', '.join(unknown)}: not a part this version of prefixlock reads")
    fields = _json(parts, "context-fields.json") if "context-fields.json" in parts else None
    updates = _json(parts, "context-updates.json") if "context-updates.json" in parts else None
    modes_value = _json(parts, "modes.json")
    runtime_parts = {m["template"] for m in modes_value["modes"]}
    context_parts = sorted(n for n in parts if n.startswith(_TEMPLATES) and n not in runtime_parts)
    if len(context_parts) != 1:
        raise ValueError(f"expected one request-context template part, found {context_parts}")
    templates = {
        name: compile_spec_template(
            name[len(_TEMPLATES) :],
            parts[name].decode("utf-8"),
            runtime=name in runtime_parts,
            declared=frozenset(fields or ()),
            sections=updates is not None,
        )
        for name in sorted(n for n in parts if n.startswith(_TEMPLATES))
    }
    modes = tuple(
        Mode(name=m["name"], reminder=m["reminder"], runtime=templates[m["template"]])
        for m in modes_value["modes"]
    )
    tools = tuple(
        ToolSpec(t["name"], t["description"], canonical.dumps(t["parameters"]))
        for t in _json(parts, "tools.json")
    )
    settings = tuple(
        ProviderSettings(s["provider"], s["model"], s["max_tokens"], canonical.dumps(s["options"]))
        for s in _json(parts, "settings.json")
    )
    policy = _json(parts, "policy.json") if "policy.json" in parts else None
    return _assemble(
        agent=agent,
        instructions=parts["instructions.md"].decode("utf-8"),
        tools=tools,
        settings=settings,
        context_template=templates[context_parts[0]],
        modes=modes,
        default_mode=modes_value["default_mode"],
        defaults=_json(parts, "context-defaults.json"),
        user_content="keep" if policy is None else policy["secrets"]["user_content"],
        context_fields=fields,
        context_updates="whole" if updates is None else updates["context_updates"],
    )
