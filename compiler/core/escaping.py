"""Text on its way to a terminal, a CI log, a workflow command or a pull-request
comment, escaped for that format here and nowhere else (issue 43).

Names that come from a repository (case folders, provider folders, spec paths, revision
names) reach every output; one with a newline in it made ``verify``, ``golden --update``
and ``diff`` print a line of its choosing, and a CI log runs a line starting with
``::`` as a workflow command (``::error``, ``::add-mask``, ``::stop-commands``). What a
format needs:

* **terminal and CI log** (every line ``out``/``err`` print): :func:`terminal` escapes
  control characters, the line separators U+2028/U+2029 and the bidirectional overrides
  as ``\\uXXXX``; :func:`log_lines` then escapes the first character of any line that a
  runner would take for a command (``::`` or the older ``##[``, after blanks), so a name
  with a newline can break a line but never start a command;
* **workflow commands** (``diff --format github``): :func:`workflow_data` and
  :func:`workflow_property`, as the runner unescapes them (``%``, CR, LF; in a property
  also ``:`` and ``,``);
* **markdown** (``diff --format markdown``, a pull-request comment): :func:`markdown_text`
  for table cells and prose (HTML as entities, so ``<!--``, ``</details>`` and tags are
  text; ``@`` as an entity, so no one is mentioned; ``[``, ``]``, ``|``, backticks and
  backslashes escaped, so no link such as ``[x](javascript:...)``, code span or cell
  is made; line breaks and controls escaped), and
  :func:`markdown_code` / :func:`markdown_fence` for code, whose fence outgrows any
  backtick run inside.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = [
    "log_lines",
    "markdown_code",
    "markdown_fence",
    "markdown_text",
    "terminal",
    "workflow_data",
    "workflow_property",
]

#: What must never reach a terminal raw: C0 controls but tab and newline, DEL, C1
#: controls (ESC and CSI start escape sequences), the line and paragraph separators and
#: the bidirectional overrides that reorder what a reader sees.
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
#: A line a CI runner would read as a workflow command: ``::name`` (and the older
#: ``##[name]``), after leading blanks.
_COMMAND = re.compile(r"^([ \t]*)(::|##\[)", re.MULTILINE)


def _escape(char: str) -> str:
    return f"\\u{ord(char):04x}"


def terminal(text: str) -> str:
    """``text`` with every unsafe character as a ``\\uXXXX`` escape (valid inside a JSON
    string too, so canonical JSON output keeps its meaning); tab and newline stay."""
    return _UNSAFE.sub(lambda m: _escape(m[0]), text)


def log_lines(text: str) -> str:
    """``text`` (one or more lines) with no line a CI runner would run as a workflow
    command: the first character of such a line becomes a ``\\uXXXX`` escape."""
    return _COMMAND.sub(lambda m: m[1] + _escape(m[2][0]) + m[2][1:], text)


def workflow_data(text: str) -> str:
    """A workflow command's message, escaped as the runner expects."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def workflow_property(text: str) -> str:
    """A workflow command's property value (``file=``, ``title=``)."""
    return workflow_data(text).replace(":", "%3A").replace(",", "%2C")


#: Markdown and HTML: entities for what HTML reads (and ``@``, which mentions), a
#: backslash before what makes code, links and table cells (emphasis is harmless).
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "@": "&#64;"}
_MARKUP = frozenset("\\`[]|")
#: A line break inside a cell or a bullet would end it: escaped like a control.
_BREAKS = re.compile("[\n\r\u0085\u2028\u2029]")


def markdown_text(text: str) -> str:
    """``text`` as literal markdown inline text: a table cell or part of a bullet."""
    out = []
    for char in text:
        if _BREAKS.match(char) or _UNSAFE.match(char):
            out.append(_escape(char))
        elif char in _HTML:
            out.append(_HTML[char])
        elif char in _MARKUP:
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)


def markdown_code(text: str) -> str:
    """``text`` as an inline code span (in a table cell too: ``|`` escaped, as GFM wants
    even inside code; a line break escaped)."""
    body = terminal(_BREAKS.sub(lambda m: _escape(m[0]), text)).replace("|", "\\|")
    longest = max((len(m) for m in re.findall(r"`+", body)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if body.startswith("`") or body.endswith("`") else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def markdown_fence(lines: Sequence[str], info: str = "text") -> list[str]:
    """``lines`` as a fenced code block whose fence is longer than any backtick run
    inside (so no line closes it); controls and separators escaped."""
    shown = [terminal(_BREAKS.sub(lambda m: _escape(m[0]), line)) for line in lines]
    longest = max((len(m) for line in shown for m in re.findall(r"`+", line)), default=2)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}{info}", *shown, fence]
