"""Output files are written only over regular files or at new paths (issue 43 #7).

``report`` and ``export --out`` renamed their temporary file over whatever was at the
path: a character device, a FIFO or a symbolic link became a regular file (as root,
``prefixlock report /dev/null`` replaced ``/dev/null``). Every output file goes through
:mod:`prefixlock.core.atomic`, which refuses them first.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from conv_helpers import REPO, example_bundle, user
from prefixlock.cli.commands import main
from prefixlock.core.atomic import check_replaceable, replace_file
from prefixlock.core.errors import InputError
from prefixlock.runtime.conversation import Conversation
from prefixlock.store.sqlite import SQLiteStore

CASE = REPO / "golden" / "automatic-compaction"
ONLY = "only a regular file or a new path is replaced"


def _symlink(path: Path) -> str:
    target = path.parent / "elsewhere.txt"
    target.write_text("keep me\n", encoding="utf-8")
    path.symlink_to(target)
    return "a symbolic link"


def _dangling(path: Path) -> str:
    path.symlink_to(path.parent / "nowhere" / "x")
    return "a symbolic link"


def _fifo(path: Path) -> str:
    os.mkfifo(path)
    return "a FIFO"


def _folder(path: Path) -> str:
    path.mkdir()
    return "a folder"


def _device(path: Path) -> str:
    try:  # the null device's numbers: a copy of /dev/null, harmless to replace
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("creating a device node needs CAP_MKNOD")
    return "a character device"


MAKERS: dict[str, Callable[[Path], str]] = {
    "symlink": _symlink,
    "dangling-symlink": _dangling,
    "fifo": _fifo,
    "folder": _folder,
    "char-device": _device,
}


def _kind_bits(path: Path) -> int:
    return stat.S_IFMT(os.lstat(path).st_mode)


@pytest.mark.parametrize("maker", MAKERS)
def test_replace_file_refuses_anything_but_a_regular_file(tmp_path: Path, maker: str) -> None:
    path = tmp_path / "out"
    kind = MAKERS[maker](path)
    before = _kind_bits(path)
    with pytest.raises(InputError) as err:
        replace_file(path, b"data")
    assert str(err.value) == f"{path}: refusing to write over {kind}: {ONLY}"
    assert _kind_bits(path) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    if maker == "symlink":
        assert (tmp_path / "elsewhere.txt").read_text(encoding="utf-8") == "keep me\n"


def test_a_regular_file_or_a_new_path_is_written(tmp_path: Path) -> None:
    check_replaceable(tmp_path / "new")
    replace_file(tmp_path / "new", b"one")
    replace_file(tmp_path / "new", b"two")
    assert (tmp_path / "new").read_bytes() == b"two"


@pytest.mark.parametrize("maker", MAKERS)
def test_report_refuses_to_replace_a_special_path(
    tmp_path: Path, maker: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "report.html"
    kind = MAKERS[maker](path)
    before = _kind_bits(path)
    assert main(["report", str(path), str(CASE)]) == 2
    assert capsys.readouterr().err == (
        f"prefixlock report: {path}: refusing to write over {kind}: {ONLY}\n"
    )
    assert _kind_bits(path) == before


@pytest.mark.parametrize("maker", MAKERS)
def test_export_refuses_to_replace_a_special_path(
    tmp_path: Path, maker: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "state.db"
    with SQLiteStore(db) as store:
        Conversation.open(store, example_bundle(), "conv-1").handle(user("u1"))
    path = tmp_path / "conv.jsonl"
    kind = MAKERS[maker](path)
    before = _kind_bits(path)
    assert main(["export", str(db), "conv-1", "--out", str(path)]) == 2
    assert capsys.readouterr().err == (
        f"prefixlock export: {path}: refusing to write over {kind}: {ONLY}\n"
    )
    assert _kind_bits(path) == before


@pytest.mark.parametrize("maker", MAKERS)
def test_schema_out_refuses_to_write_over_a_special_path(
    tmp_path: Path, maker: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``schema --out DIR`` wrote each schema with ``write_bytes``, through a symbolic
    link at ``DIR/KIND.schema.json`` (and into a FIFO): it writes through the output
    helper, and checks every file before it writes any (nothing half-written)."""
    out_dir = tmp_path / "schemas"
    out_dir.mkdir()
    path = out_dir / "tools.schema.json"
    kind = MAKERS[maker](path)
    before = _kind_bits(path)
    names = sorted(p.name for p in out_dir.iterdir())
    assert main(["schema", "--out", str(out_dir)]) == 2
    assert capsys.readouterr().err == (
        f"prefixlock schema: {path}: refusing to write over {kind}: {ONLY}\n"
    )
    assert _kind_bits(path) == before
    assert sorted(p.name for p in out_dir.iterdir()) == names
    if maker == "symlink":
        assert (out_dir / "elsewhere.txt").read_text(encoding="utf-8") == "keep me\n"
