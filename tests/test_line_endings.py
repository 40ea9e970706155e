"""Line endings and byte order marks are named as such, never as corruption (issue 14)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conv_helpers import CONV, example_bundle, user
from prefixlock.core.errors import CheckpointError
from prefixlock.runtime.conversation import Conversation
from prefixlock.spec.build import LOCK_FILE, build_bundle, find_example_root
from prefixlock.spec.outputs import check_outputs, write_lock
from prefixlock.spec.scaffold import GITATTRIBUTES, init_project
from prefixlock.store.contract import MemoryStore
from prefixlock.store.jsonl import export_jsonl, read_jsonl

REPO = Path(__file__).resolve().parents[1]


def exported(tmp_path: Path) -> Path:
    store = MemoryStore()
    conv = Conversation.open(store, example_bundle(), CONV)
    conv.handle(user("u1"))
    conv.assistant("done")
    path = tmp_path / "conv.jsonl"
    export_jsonl(store, CONV, path)
    return path


def test_jsonl_with_crlf_is_named_crlf(tmp_path: Path) -> None:
    path = exported(tmp_path)
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    with pytest.raises(CheckpointError) as err:
        read_jsonl(path)
    assert str(err.value) == (
        f"{path}:1: line ends with CRLF (\\r\\n); a JSONL export uses LF only "
        "(converted by an editor or git core.autocrlf? convert it back to LF)"
    )


def test_jsonl_with_a_bom_is_named_bom(tmp_path: Path) -> None:
    path = exported(tmp_path)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    with pytest.raises(CheckpointError) as err:
        read_jsonl(path)
    assert str(err.value) == (
        f"{path}:1: starts with a UTF-8 byte order mark (BOM); a JSONL export has none "
        "(an editor added it? remove the first 3 bytes)"
    )


def test_lock_with_crlf_names_the_line_endings(tmp_path: Path) -> None:
    root = tmp_path / "spec"
    for folder in ("prompt", "rules"):
        shutil.copytree(REPO / folder, root / folder)
    bundle = build_bundle(root)
    write_lock(bundle, root)
    lock = root / LOCK_FILE
    lock.write_bytes(lock.read_bytes().replace(b"\n", b"\r\n"))
    assert check_outputs(bundle, root, None) == [
        f"{LOCK_FILE} differs: its line endings: CRLF (\\r\\n) where prefixlock writes LF "
        "(git core.autocrlf? .gitattributes `eol=lf` prevents it)"
    ]


def test_repository_and_init_ship_gitattributes_with_eol_lf(tmp_path: Path) -> None:
    assert (REPO / ".gitattributes").read_text(encoding="utf-8") == GITATTRIBUTES
    lines = GITATTRIBUTES.splitlines()
    for pattern in ("prompt/**", "rules/**", LOCK_FILE):
        assert f"{pattern} text eol=lf" in lines
    assert "golden/** -text" in lines  # stricter than eol=lf: no conversion at all
    assert find_example_root().is_dir()
    init_project(tmp_path / "agent")
    assert (tmp_path / "agent" / ".gitattributes").read_bytes() == GITATTRIBUTES.encode()
