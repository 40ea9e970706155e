"""docs/agent-loop.md's code blocks, executed as written (not a test module)."""

from __future__ import annotations

import re
from typing import Any

from conv_helpers import REPO

DOC = REPO / "docs" / "agent-loop.md"


def _code() -> dict[str, Any]:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    namespace: dict[str, Any] = {}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)
    return namespace


CODE = _code()


def run_turn(conv: Any, client: Any, event: Any, run_tool: Any, stream: bool = False) -> str:
    """The page's ``run_turn``."""
    answer: str = CODE["run_turn"](conv, client, event, run_tool, stream=stream)
    return answer
