"""``convert``: an agent's own session transcript as a scenario and its observed usage."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..review.convert import FORMATS, convert, write_converted
from .console import OK, Command, choice, out

__all__ = ["COMMANDS"]


def _convert_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "source",
        type=choice("transcript format", list(FORMATS)),
        metavar="FORMAT",
        help=f"the transcript's format: {', '.join(FORMATS)}",
    )
    parser.add_argument("transcript", type=Path, metavar="FILE.jsonl", help="the transcript")
    parser.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="S.yaml",
        help="the scenario to write; the observed usage goes beside it as S.usage.json",
    )
    parser.add_argument(
        "--tools",
        type=Path,
        metavar="MAP.yaml",
        help="tool map {tools: {SourceName: bundle_tool}, fallback: bundle_tool} over the "
        "format's defaults (docs/convert.md)",
    )


def _run_convert(args: argparse.Namespace) -> int:
    converted = convert(args.source, args.transcript, tools=args.tools)
    written = write_converted(converted, args.out)
    for line in converted.report_lines():
        out(line)
    for scenario, usage in zip(written[::2], written[1::2], strict=True):
        out(f"wrote {scenario} and {usage}")
    return OK


COMMANDS = (
    Command(
        "convert",
        "convert a Claude Code or Codex transcript into a scenario and its observed usage",
        _convert_arguments,
        _run_convert,
    ),
)
