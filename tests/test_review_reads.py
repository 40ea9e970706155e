"""Every file the review tools read goes through one read: inside the repository,
regular, bounded (issue 43 #2, the reads that bypassed it), and every file of a spec
tree is regular, bounded and inside the spec root (issue 43, the spec build's reads).

The lock was read with ``read_bytes``: a pull request committing ``prefixlock.lock`` as
a symbolic link to a credentials file had ``build --check --diff`` print that file
into the CI log, and ``check`` quote the ``digest`` it holds; ``diff``'s attribution
read spec files the same way, and the usage file of ``report --usage`` too.
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from prefixlock.cli.commands import main
from prefixlock.core.errors import InputError, SpecErrors
from prefixlock.review.observed import compare_observed
from prefixlock.review.sources import SourceIndex
from prefixlock.spec import loader
from prefixlock.spec.build import build_bundle

SECRET = "AWS_SECRET_ACCESS_KEY-wJalrXUtnFEMI"
OUTSIDE = "outside the repository"


@pytest.fixture(scope="module")
def _initialized(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ``prefixlock init`` for the module (it takes seconds); each test copies it."""
    root = tmp_path_factory.mktemp("init") / "agent"
    assert main(["init", str(root), "--name", "cursor"]) == 0
    return root


@pytest.fixture
def project(_initialized: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the initialized spec root at ``tmp_path/agent``, the current folder
    (as conftest's ``project``, made once per module)."""
    root = tmp_path / "agent"
    shutil.copytree(_initialized, root, symlinks=True)
    monkeypatch.chdir(root)
    return root


def _secret(tmp_path: Path) -> Path:
    """A JSON credentials file outside the project (``project`` is ``tmp_path/agent``)."""
    path = tmp_path / "credentials.json"
    path.write_text(f'{{"digest": "{SECRET}", "parts": []}}\n', encoding="utf-8")
    return path


def _refused(path: Path | str, target: Path, root: Path) -> str:
    return (
        f"{path}: refused: it resolves to {target.resolve()}, {OUTSIDE} {root.resolve()}"
        " (a symbolic link?)"
    )


@pytest.fixture
def linked_lock(project: Path, tmp_path: Path) -> Iterator[Path]:
    lock = project / "prefixlock.lock"
    lock.unlink()
    secret = _secret(tmp_path)
    lock.symlink_to(secret)
    yield secret


def test_build_check_diff_refuses_a_lock_linked_outside(
    project: Path, linked_lock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["build", "--check", "--diff"]) == 2
    captured = capsys.readouterr()
    assert captured.err == (
        f"prefixlock build: {_refused('prefixlock.lock', linked_lock, project)}\n"
    )
    assert SECRET not in captured.out + captured.err


def test_update_refuses_a_lock_linked_outside(
    project: Path, linked_lock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["update"]) == 2
    captured = capsys.readouterr()
    assert captured.err == (
        f"prefixlock update: {_refused('prefixlock.lock', linked_lock, project)}\n"
    )
    assert SECRET not in captured.out + captured.err
    assert (project / "prefixlock.lock").is_symlink()


def test_the_gates_lock_step_refuses_a_lock_linked_outside(
    project: Path, linked_lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``check``: the lock step is bad input, with the refusal (it quoted the digest)."""
    from prefixlock.review import gate

    bundle = build_bundle(project)
    step = gate._guarded("build --check", lambda: gate._lock_step(bundle, project))
    assert step == gate.Step(
        "build --check",
        gate.BAD_INPUT,
        "1 error in the input",
        (_refused(project / "prefixlock.lock", linked_lock, project),),
    )
    monkeypatch.setattr(gate, "_golden_step", lambda root, full: gate.Step("g", gate.OK, ""))
    monkeypatch.setattr(gate, "_verify_step", lambda files, seed: gate.Step("v", gate.OK, ""))
    report = gate.check_project(project)
    assert report.status == gate.BAD_INPUT
    assert SECRET not in "\n".join(report.table() + [f for s in report.steps for f in s.findings])


def test_a_usage_file_linked_outside_is_refused(project: Path, tmp_path: Path) -> None:
    secret = _secret(tmp_path)
    usage = project / "usage.json"
    usage.symlink_to(secret)
    scenario = next((project / "golden").glob("*/scenario.yaml"))
    with pytest.raises(InputError) as err:
        compare_observed(scenario, usage)
    assert str(err.value) == _refused(usage, secret, project)


def test_attribution_reads_no_spec_file_linked_outside(project: Path, tmp_path: Path) -> None:
    """``diff``'s source index: a rule file linked out of the repository contributes
    nothing (attribution is a hint; the build refuses the file with its error)."""
    secret = _secret(tmp_path)
    rules = project / "rules" / "rules.yaml"
    rules.unlink()
    rules.symlink_to(secret)
    index = SourceIndex(project)
    assert index.lines  # the other spec files are read
    assert not any(SECRET in line.raw for line in index.lines)
    assert not any(line.location.file.endswith("rules.yaml") for line in index.lines)


# -- the spec build's reads --------------------------------------------------------------


@pytest.fixture
def alarm() -> Iterator[None]:
    """A read that blocks (a FIFO opened without O_NONBLOCK) fails instead of hanging."""

    def fail(signum: int, frame: object) -> None:
        raise AssertionError("the read blocked")

    old = signal.signal(signal.SIGALRM, fail)
    signal.alarm(5)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def _errors(err: pytest.ExceptionInfo[SpecErrors]) -> list[str]:
    return [str(e) for e in err.value.errors]


def test_a_yaml_file_that_is_a_fifo_is_refused_without_blocking(
    tmp_path: Path, alarm: None
) -> None:
    fifo = tmp_path / "x.yaml"
    os.mkfifo(fifo)
    with pytest.raises(SpecErrors) as err:
        loader.load_yaml_file(fifo, "x.yaml")
    assert _errors(err) == ["x.yaml: refused: not a regular file (a FIFO)"]


def test_a_yaml_file_linked_to_a_device_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "x.yaml"
    link.symlink_to("/dev/zero")
    with pytest.raises(SpecErrors) as err:
        loader.load_yaml_file(link, "x.yaml")
    assert _errors(err) == ["x.yaml: refused: not a regular file (a character device)"]


def test_a_spec_file_over_the_limit_is_refused(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert loader.MAX_SPEC_FILE_BYTES == 16 * 1024 * 1024
    size = (project / "rules" / "tools.yaml").stat().st_size
    monkeypatch.setattr(loader, "MAX_SPEC_FILE_BYTES", size - 1)
    with pytest.raises(SpecErrors) as err:
        build_bundle(project)
    assert (
        f"rules/tools.yaml: refused: over the limit of {size - 1} bytes for a spec file"
        in _errors(err)
    )


def test_a_spec_file_read_with_a_root_is_held_inside_it(tmp_path: Path) -> None:
    """The build reads each file with its spec root: a link out of it is refused by the
    read itself (the build's own check names it first; this holds if that is skipped)."""
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "instructions.md"
    outside.write_text("secret\n", encoding="utf-8")
    (root / "instructions.md").symlink_to(outside)
    with pytest.raises(SpecErrors) as err:
        loader.read_text_file(root / "instructions.md", "instructions.md", root=root)
    assert _errors(err) == [
        f"instructions.md: refused: it resolves to {outside}, outside the repository {root}"
        " (a symbolic link?)"
    ]
    inside = root / "shared.md"
    inside.write_text("kept\n", encoding="utf-8")
    (root / "link.md").symlink_to(inside)  # a link inside the root is read
    assert loader.read_text_file(root / "link.md", "link.md", root=root) == "kept\n"
