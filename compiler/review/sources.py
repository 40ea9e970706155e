"""Where spec text comes from: attribute a changed body value to a ``file:line``.

:class:`SourceIndex` reads one spec root (and optionally scenario files) and answers
which line produced a piece of request text: instructions to ``<instructions
file>:<line of the first differing character>``, a tool to its entry in
``rules/tools.yaml``, other text to the template, rule or scenario line whose literal
text covers the differing character. Attribution is a hint for people; it never fails.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ..core.errors import Location, SpecErrors
from ..spec.loader import LoadedDocument, load_yaml_file, read_text_file
from .jsondiff import MISSING, Difference, first_differing_char, value_at

__all__ = ["INSTRUCTIONS_PATHS", "TOOL_PATHS", "SourceIndex"]

#: Paths (``int`` = any index) where each wire format puts the instructions text.
INSTRUCTIONS_PATHS: Mapping[str, tuple[Any, ...]] = {
    "anthropic": ("system", int, "text"),
    "bedrock-converse": ("system", int, "text"),
    "gemini": ("systemInstruction", "parts", int, "text"),
    "openai-chat": ("messages", 0, "content"),  # the developer message
    "openai-responses": ("instructions",),
}
#: Path of one tool definition, and where its name sits inside it.
TOOL_PATHS: Mapping[str, tuple[tuple[Any, ...], tuple[str, ...]]] = {
    "anthropic": (("tools", int), ("name",)),
    "bedrock-converse": (("toolConfig", "tools", int), ("toolSpec", "name")),
    "gemini": (("tools", int, "functionDeclarations", int), ("name",)),
    "openai-chat": (("tools", int), ("function", "name")),
    "openai-responses": (("tools", int), ("name",)),
}

#: A template's ``{% block NAME %}`` (a section of the request context) and its end.
_BLOCK = re.compile(r"\{%-?\s*block\s+(\w+)")
_ENDBLOCK = re.compile(r"\{%-?\s*endblock\b")
_TEMPLATE_CODE = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}|\{\{.*|\{%.*|\{#.*")
_WORD = re.compile(r"[\w:./@-]+")


def _matches(parts: Sequence[str | int], pattern: Sequence[Any]) -> bool:
    if len(parts) < len(pattern):
        return False
    for part, want in zip(parts, pattern, strict=False):
        if want is int:
            if not isinstance(part, int):
                return False
        elif part != want:
            return False
    return True


@attrs.frozen
class _Line:
    location: Location
    fragments: tuple[str, ...]
    raw: str


class SourceIndex:
    """Where spec text comes from, for one spec root (and optionally a scenario file).

    Built leniently: a file that is missing or does not parse simply contributes
    nothing (attribution is a hint, never a reason to fail).
    """

    def __init__(self, root: Path | None, extra: Sequence[Path] = ()) -> None:
        self.root = root
        self.instructions: tuple[str, str] | None = None  # (display name, text)
        self.tools: LoadedDocument | None = None
        self.models: dict[str, str] = {}
        self._lines: list[_Line] = []
        #: (file, line) -> the section block of a template that line is in
        self._sections: dict[tuple[str, int], str] = {}
        #: Files ``extra`` names, read at the first search: a long scenario file holds a
        #: line per value, and a search happens only to name a failure.
        self._pending: list[Path] = list(extra)
        if root is not None:
            self._load_root(root)

    @property
    def lines(self) -> list[_Line]:
        """Every indexed line (the ``extra`` files' read now if not yet)."""
        pending, self._pending = self._pending, []
        for path in pending:
            self._add_file(path, self._display(path), template=False)
        return self._lines

    def extended(self, extra: Sequence[Path]) -> SourceIndex:
        """A copy that also searches the files ``extra`` (a case's scenario file)."""
        out = SourceIndex(None)
        out.root, out.instructions, out.tools = self.root, self.instructions, self.tools
        out.models, out._lines = dict(self.models), list(self._lines)
        out._sections = self._sections
        out._pending = [*self._pending, *extra]
        return out

    def _display(self, path: Path) -> str:
        relative = os.path.relpath(path)
        return str(path) if relative.startswith("..") else relative

    def _doc(self, name: str) -> LoadedDocument | None:
        assert self.root is not None
        try:
            return load_yaml_file(self.root / name, self._display(self.root / name))
        except (SpecErrors, OSError):
            return None

    def _load_root(self, root: Path) -> None:
        agent = self._doc("rules/agent.yaml")
        value = agent.value if agent is not None and isinstance(agent.value, dict) else {}
        if isinstance(value.get("instructions"), str):
            path = root / value["instructions"]
            try:
                text = read_text_file(path, self._display(path))
            except (SpecErrors, OSError):
                text = None
            if text is not None:
                self.instructions = (self._display(path), text)
                self._add_text(self._display(path), text, template=False)
        templates = [value.get("context_template")]
        modes = value.get("modes")
        if isinstance(modes, dict):
            templates.extend(m.get("runtime") for m in modes.values() if isinstance(m, dict))
        for name in dict.fromkeys(t for t in templates if isinstance(t, str)):
            self._add_file(root / name, self._display(root / name), template=True)
        self.tools = self._doc("rules/tools.yaml")
        for name in ("rules", "skills", "subagents", "mcp"):
            self._add_file(
                root / f"rules/{name}.yaml",
                self._display(root / f"rules/{name}.yaml"),
                template=False,
            )
        providers = self._doc("rules/providers.yaml")
        table = providers.value.get("providers") if providers is not None else None
        if isinstance(table, dict):
            for name, item in table.items():
                if isinstance(item, dict) and isinstance(item.get("model"), str):
                    self.models[name] = item["model"]

    def _add_file(self, path: Path, display: str, *, template: bool) -> None:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return
        self._add_text(display, text, template=template)

    def _add_text(self, display: str, text: str, *, template: bool) -> None:
        section: str | None = None
        for number, raw in enumerate(text.split("\n"), start=1):
            block = _BLOCK.search(raw) if template else None
            section = block.group(1) if block is not None else section
            if section is not None:
                self._sections[(display, number)] = section
            if template and _ENDBLOCK.search(raw):
                section = None
            pieces = _TEMPLATE_CODE.split(raw) if template else [raw]
            fragments = tuple(
                f.strip() for f in pieces if len(f.strip()) >= 4 and any(c.isalnum() for c in f)
            )
            self._lines.append(_Line(Location(display, number), fragments, raw))

    # -- lookups -------------------------------------------------------------------------

    def tool_location(self, name: str, rest: Sequence[str | int]) -> Location | None:
        doc = self.tools
        tools = doc.value.get("tools") if doc is not None and isinstance(doc.value, dict) else None
        if doc is None or not isinstance(tools, list):
            return None
        for index, tool in enumerate(tools):
            if isinstance(tool, dict) and tool.get("name") == name:
                if "description" in rest:
                    return doc.location(f"$.tools[{index}].description")
                schema_keys = ("parameters", "input_schema", "inputSchema", "parametersJsonSchema")
                if any(key in rest for key in schema_keys):
                    return doc.location(f"$.tools[{index}].parameters")
                return doc.location(f"$.tools[{index}]")
        return None

    def find_text(self, text: str, offset: int) -> Location | None:
        """The source line that best explains ``text`` at ``offset`` (see :meth:`_search`)."""
        return self._search(text, offset)[1]

    def _search(self, text: str, offset: int) -> tuple[tuple[int, int], Location | None]:
        """(score, location) of the source line that best explains ``text`` at ``offset``.

        Best: a literal fragment of a template, rule or scenario line that covers the
        differing character; then a line holding the word at (or ending at) that
        character; then any line whose literal text appears on the changed line.
        """
        start = text.rfind("\n", 0, offset) + 1
        end = text.find("\n", offset)
        line = text[start : end if end >= 0 else len(text)]
        column = offset - start
        word_match = next((m for m in _WORD.finditer(line) if m.start() <= column <= m.end()), None)
        word = word_match.group() if word_match and len(word_match.group()) >= 3 else None
        best: tuple[int, int] = (0, 0)
        found: Location | None = None
        for candidate in self.lines:
            score = (0, 0)
            for fragment in candidate.fragments:
                at = line.find(fragment)
                if at >= 0:
                    covers = at <= column < at + len(fragment)
                    score = max(score, (3 if covers else 1, len(fragment)))
                elif len(line.strip()) >= 8 and line.strip() in fragment:
                    score = max(score, (3, len(line.strip())))
            if word is not None and score[0] < 2 and word in candidate.raw:
                score = (2, len(word))
            if score > best:
                best, found = score, candidate.location
        return best, found

    def attribute(
        self, provider: str, difference: Difference, new_body: Any, old_body: Any = None
    ) -> str | None:
        """``file:line`` of the spec that produced the text at ``difference``, if known."""
        parts = difference.parts
        old, new = difference.old, difference.new
        pattern = INSTRUCTIONS_PATHS.get(provider)
        at_instructions = (
            pattern is not None
            and len(parts) == len(pattern)
            and _matches(parts, pattern)
            and _is_instructions(provider, new_body if new is not MISSING else old_body)
        )
        texts = _changed_texts(old, new)
        if at_instructions and texts:
            exact = [t for t in texts if self.instructions and t[0] == self.instructions[1]]
            return self.instructions_location(*(exact or texts)[0])
        tool = TOOL_PATHS.get(provider)
        if tool is not None and _matches(parts, tool[0]):
            body = (
                new_body if value_at(new_body, parts[: len(tool[0])]) is not MISSING else old_body
            )
            name = value_at(body, (*parts[: len(tool[0])], *tool[1]))
            if isinstance(name, str):
                where = self.tool_location(name, parts[len(tool[0]) :])
                return None if where is None else _line_only(where)
            return None
        # The new text, else the old one if it explains better (in verify either side
        # may be the wrong one).
        best: tuple[tuple[int, int], Location | None] = ((0, 0), None)
        for text in texts:
            found = self._search(*text)
            if found[0] > best[0]:
                best = found
        if best[1] is None:
            return None
        # A line of a section block: name the section (``context_updates: sections``
        # sends and caches each section on its own).
        section = self._sections.get((best[1].file, best[1].line or 0))
        return _line_only(best[1]) + ("" if section is None else f" (section {section})")

    def instructions_location(self, text: str, offset: int) -> str | None:
        if self.instructions is None:
            return None
        name, source = self.instructions
        if text == source:
            return f"{name}:{text.count(chr(10), 0, offset) + 1}"
        where = self.find_text(text, offset)
        return _line_only(where) if where is not None else name


def _changed_texts(old: Any, new: Any) -> list[tuple[str, int]]:
    """The texts to attribute (new, then old) with their first differing character."""
    at = first_differing_char(old, new) if isinstance(old, str) and isinstance(new, str) else 0
    return [(text, at) for text in (new, old) if isinstance(text, str)]


def _line_only(location: Location) -> str:
    return f"{location.file}:{location.line}" if location.line > 0 else location.file


def _is_instructions(provider: str, body: Any) -> bool:
    """Chat's instructions are its first message only when that is the developer one."""
    if provider != "openai-chat":
        return True
    return bool(value_at(body, ("messages", 0, "role")) == "developer")
