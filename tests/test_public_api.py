"""The public API: one import name, ``__all__`` pinned, ``python -m prefixlock``."""

from __future__ import annotations

import subprocess
import sys
import typing
from importlib import metadata
from pathlib import Path

import prefixlock
import pytest
from prefixlock.cli.commands import COMMANDS, main

#: What an agent server and a build script use. Changing it is an API change.
PUBLIC = [
    "AgentRunRequest",
    "BuildError",
    "Bundle",
    "BundleError",
    "CacheSimulationError",
    "CanonicalMessage",
    "CheckpointError",
    "CheckpointRaceError",
    "ConflictError",
    "Conversation",
    "DurableStore",
    "HistoryError",
    "InputError",
    "LimitError",
    "Limits",
    "Location",
    "MemoryStore",
    "MessageKind",
    "ModelOutput",
    "ModelRequest",
    "PrefixlockError",
    "Provider",
    "RequestKind",
    "ResponseError",
    "Role",
    "SQLiteStore",
    "SerializationError",
    "SpecError",
    "SpecErrors",
    "Store",
    "ToolCall",
    "ToolResult",
    "Turn",
    "UnknownCallError",
    "UnknownNameError",
    "Usage",
    "UsageError",
    "WrongTypeError",
    "__version__",
    "build_bundle",
    "check_outputs",
    "find_example_root",
    "open_store",
    "providers",
    "write_lock",
    "write_outputs",
]


def test_all_is_pinned() -> None:
    assert sorted(prefixlock.__all__) == sorted(PUBLIC)


@pytest.mark.parametrize("name", PUBLIC)
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(prefixlock, name) is not None


def test_providers_are_a_subpackage_with_get() -> None:
    assert prefixlock.providers.__name__ == "prefixlock.providers"
    assert prefixlock.providers.get("anthropic").name == "anthropic"
    assert prefixlock.providers.NAMES == (
        "anthropic",
        "bedrock-anthropic",
        "bedrock-converse",
        "gemini",
        "openai-chat",
        "openai-responses",
    )


def test_every_error_class_is_a_prefixlock_error() -> None:
    for name in PUBLIC:
        value = getattr(prefixlock, name)
        if isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, prefixlock.PrefixlockError), name


def test_version_is_the_distribution_version() -> None:
    assert prefixlock.__version__ == metadata.version("prefixlock")


def test_python_dash_m_prefixlock_prints_the_version() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "prefixlock", "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        f"prefixlock {metadata.version('prefixlock')}\n",
        "",
    )


@pytest.mark.parametrize("name", ["compiler", "providers"])
def test_the_source_folder_names_are_not_importable(name: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", f"import {name}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.endswith(f"ModuleNotFoundError: No module named '{name}'\n")


def test_a_closed_output_pipe_ends_the_command_quietly(tmp_path: Path) -> None:
    # The reader closes its end before the command prints (`prefixlock verify | head -0`).
    process = subprocess.Popen(
        [sys.executable, "-m", "prefixlock", "schema", "--out", str(tmp_path / "s")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    stderr = process.stderr.read()
    assert (process.wait(), stderr) == (141, b"")


@pytest.mark.parametrize("command", [c.name for c in COMMANDS])
def test_every_help_lists_the_exit_codes(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert out.endswith(
        "Exit codes: 0 ok; 1 a finding (a check the command runs failed); 2 bad input or "
        "usage; 141 the output pipe closed."
    )


def test_open_store_returns_the_exported_store_type(tmp_path: Path) -> None:
    store = prefixlock.open_store(f"sqlite:///{tmp_path / 'c.db'}")
    assert isinstance(store, prefixlock.SQLiteStore)
    hints = typing.get_type_hints(prefixlock.open_store)
    assert hints["return"] is prefixlock.DurableStore  # the type it is declared to return


def test_limits_and_limit_error_are_the_ones_the_conversation_uses() -> None:
    from prefixlock.core.errors import LimitError
    from prefixlock.runtime.limits import Limits

    assert (prefixlock.Limits, prefixlock.LimitError) == (Limits, LimitError)
