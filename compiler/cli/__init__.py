"""The ``prefixlock`` command line: argument parsing, printing and exit codes only."""

from __future__ import annotations

from .commands import main

__all__ = ["main"]
