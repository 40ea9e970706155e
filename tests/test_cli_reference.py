"""docs/cli.md names every command and every option the command line has."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

from conv_helpers import REPO
from prefixlock.cli.commands import _parser

REFERENCE = REPO / "docs" / "cli.md"


def _commands(
    prog: str, parser: argparse.ArgumentParser
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{prog} {name}", sub
                yield from _commands(f"{prog} {name}", sub)


def _sections(text: str) -> dict[str, str]:
    """Heading `prefixlock ...` -> the text up to the next heading."""
    parts = re.split(r"^#{2,} `([^`]+)`$", text, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def test_every_command_and_option_is_in_the_reference() -> None:
    sections = _sections(REFERENCE.read_text(encoding="utf-8"))
    commands = dict(_commands("prefixlock", _parser()))
    assert len(commands) >= 16
    missing = []
    for prog, parser in commands.items():
        section = sections.get(prog)
        if section is None:
            missing.append(prog)
            continue
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            names = action.option_strings or [str(action.metavar or action.dest)]
            missing += [f"{prog} {name}" for name in names if f"`{name}" not in section]
    assert missing == [], f"add to docs/cli.md: {missing}"
    assert sorted(sections) == sorted(commands), "docs/cli.md names a command that is gone"
