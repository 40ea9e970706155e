"""Bundle.load: a server loads the compiled build/ checked against prefixlock.lock."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from conv_helpers import CONTEXT_A, example_bundle, user
from prefixlock import BundleError, providers
from prefixlock.core.errors import InputError
from prefixlock.runtime.conversation import Conversation
from prefixlock.spec.build import write_outputs
from prefixlock.spec.bundle import Bundle
from prefixlock.store.contract import MemoryStore


@pytest.fixture
def deployed(tmp_path: Path) -> Path:
    """What CI ships: build/ and the lock beside it (no YAML, no Jinja)."""
    root = tmp_path / "spec"
    root.mkdir()
    write_outputs(example_bundle(), root, root / "build")
    deploy = tmp_path / "deploy"
    deploy.mkdir()
    shutil.copytree(root / "build", deploy / "build")
    shutil.copy(root / "prefixlock.lock", deploy / "prefixlock.lock")
    return deploy


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_the_loaded_bundle_is_the_built_one(deployed: Path) -> None:
    built = example_bundle()
    loaded = Bundle.load(deployed / "build")
    assert loaded.digest == built.digest
    assert loaded.manifest_bytes() == built.manifest_bytes()
    assert [(p.name, p.data) for p in loaded.parts] == [(p.name, p.data) for p in built.parts]
    assert (loaded.instructions, loaded.tools, loaded.settings, loaded.default_mode) == (
        built.instructions,
        built.tools,
        built.settings,
        built.default_mode,
    )
    # A conversation on the loaded bundle sends the same bytes as one on the built one.
    bodies = []
    for bundle in (built, loaded):
        conv = Conversation.open(MemoryStore(), bundle, "c")
        request = conv.handle(user("u1", context=CONTEXT_A, conversation="c", mode="ask"))
        bodies.append([providers.get(n).serialize(request) for n in providers.NAMES])
    assert bodies[0] == bodies[1]


def test_a_lock_elsewhere_is_named(deployed: Path, tmp_path: Path) -> None:
    moved = tmp_path / "etc" / "agent.lock"
    moved.parent.mkdir()
    os.replace(deployed / "prefixlock.lock", moved)
    assert Bundle.load(deployed / "build", lock=moved).digest == example_bundle().digest
    with pytest.raises(BundleError) as caught:
        Bundle.load(deployed / "build")
    assert str(caught.value) == (
        f"cannot load the bundle: the lock file {str(deployed / 'prefixlock.lock')!r} is "
        "missing (ship it with build/, or pass lock=)"
    )


def test_every_missing_or_changed_part_is_named_at_once(deployed: Path) -> None:
    build = deployed / "build"
    (build / "tools.json").unlink()
    runtime = build / "templates/prompt/cursor/ask/runtime.md.j2"
    old = runtime.read_bytes()
    new = old.replace(b"\n", b"\n ", 1)
    runtime.write_bytes(new)
    instructions = build / "instructions.md"
    same_size = b"X" + instructions.read_bytes()[1:]
    instructions.write_bytes(same_size)
    (build / "extra.txt").write_text("stray", encoding="utf-8")
    part = {p.name: p for p in example_bundle().parts}
    with pytest.raises(BundleError) as caught:
        Bundle.load(build)
    assert isinstance(caught.value, InputError)
    assert str(caught.value) == (
        f"the bundle in {str(build)!r} does not match "
        f"{str(deployed / 'prefixlock.lock')!r}:\n"
        f"  instructions.md differs: sha256 {_sha(same_size)}, the lock says "
        f"{part['instructions.md'].sha256}\n"
        f"  templates/prompt/cursor/ask/runtime.md.j2 differs: {len(new)} bytes, the lock "
        f"says {len(old)}\n"
        "  tools.json is missing\n"
        "  extra.txt is not part of the locked bundle"
    )


def test_a_manifest_of_another_build_is_refused(deployed: Path) -> None:
    (deployed / "build" / "manifest.json").write_bytes(b"{}\n")
    with pytest.raises(BundleError) as caught:
        Bundle.load(deployed / "build")
    assert str(caught.value).endswith(
        ":\n  manifest.json differs from the lock (build/ of another build?)"
    )


def test_a_lock_naming_a_path_outside_is_refused(deployed: Path) -> None:
    lock = deployed / "prefixlock.lock"
    lock.write_bytes(lock.read_bytes().replace(b'"name": "tools.json"', b'"name": "../tools.json"'))
    (deployed / "build" / "manifest.json").write_bytes(lock.read_bytes())
    with pytest.raises(BundleError) as caught:
        Bundle.load(deployed / "build")
    assert str(caught.value).splitlines()[1:] == [
        "  '../tools.json': not a part name (the lock names a path outside build/)",
        "  tools.json is not part of the locked bundle",
    ]


def test_a_symlinked_part_is_refused(deployed: Path, tmp_path: Path) -> None:
    build = deployed / "build"
    outside = tmp_path / "tools.json"
    os.replace(build / "tools.json", outside)
    (build / "tools.json").symlink_to(outside)
    with pytest.raises(BundleError) as caught:
        Bundle.load(build)
    assert str(caught.value).splitlines()[1:] == [
        "  tools.json is not a regular file inside the folder"
    ]


def test_a_lock_whose_digest_the_parts_do_not_give_is_refused(deployed: Path) -> None:
    lock = deployed / "prefixlock.lock"
    digest = example_bundle().digest
    forged = "sha256:" + "0" * 64
    lock.write_bytes(lock.read_bytes().replace(digest.encode(), forged.encode()))
    (deployed / "build" / "manifest.json").write_bytes(lock.read_bytes())
    with pytest.raises(BundleError) as caught:
        Bundle.load(deployed / "build")
    assert str(caught.value).splitlines()[1:] == [
        f"  the parts lay out to digest {digest}, the lock says {forged}: a part this "
        "version of prefixlock does not read back, or a lock edited by hand (rebuild with "
        "this version)"
    ]


def test_not_a_folder_and_not_a_lock(deployed: Path) -> None:
    with pytest.raises(BundleError) as caught:
        Bundle.load(deployed / "nothing")
    assert str(caught.value) == (
        f"cannot load the bundle: {str(deployed / 'nothing')!r} is not a folder"
    )
    (deployed / "prefixlock.lock").write_bytes(b"[1]")
    with pytest.raises(BundleError) as caught:
        Bundle.load(deployed / "build")
    assert str(caught.value) == (
        f"{str(deployed / 'prefixlock.lock')!r} is not a lock file prefixlock can read"
    )
