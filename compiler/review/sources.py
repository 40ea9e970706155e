"""Where spec text comes from: attribute a changed body value to a ``file:line``.

:class:`SourceIndex` reads one spec root (and optionally scenario files) and answers
which line produced a piece of request text: instructions to ``<instructions
file>:<line of the first differing character>``, a tool to its entry in
``rules/tools.yaml``, other text to the template, rule or scenario line whose literal
text covers the differing character. Attribution is a hint for people; it never fails.

When the spec root of the old side is known too (:meth:`SourceIndex.with_changes`), the
answer is always a line that changed between the two roots (:func:`changed_lines`): the
line found as above if it changed, else the changed line that best explains the
differing text, else the first changed line of the file found, else the first changed
line. A line removed is blamed where it stood in the new file (the line now in its
place). So a new rule is blamed on its own line, never on an unchanged neighbour whose
name happens to sort at the same place.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ..core import canonical
from ..core.errors import InputError, Location, SpecErrors
from ..core.files import check_inside, read_review_file
from ..core.limits import MAX_SPEC_FILE_BYTES
from ..spec.loader import LoadedDocument, load_yaml_file, read_text_file
from .jsondiff import MISSING, Difference, first_differing_char, value_at

__all__ = [
    "INSTRUCTIONS_PATHS",
    "SPEC_FOLDERS",
    "TOOL_PATHS",
    "ChangedLine",
    "SourceIndex",
    "changed_lines",
]

#: Paths (``int`` = any index) where each wire format puts the instructions text.
INSTRUCTIONS_PATHS: Mapping[str, tuple[Any, ...]] = {
    "anthropic": ("system", int, "text"),
    "bedrock-anthropic": ("system", int, "text"),
    "bedrock-converse": ("system", int, "text"),
    "gemini": ("systemInstruction", "parts", int, "text"),
    "openai-chat": ("messages", 0, "content"),  # the developer message
    "openai-responses": ("instructions",),
}
#: Path of one tool definition, and where its name sits inside it.
TOOL_PATHS: Mapping[str, tuple[tuple[Any, ...], tuple[str, ...]]] = {
    "anthropic": (("tools", int), ("name",)),
    "bedrock-anthropic": (("tools", int), ("name",)),
    "bedrock-converse": (("toolConfig", "tools", int), ("toolSpec", "name")),
    "gemini": (("tools", int, "functionDeclarations", int), ("name",)),
    "openai-chat": (("tools", int), ("function", "name")),
    "openai-responses": (("tools", int), ("name",)),
}

#: A template's ``{% block NAME %}`` (a section of the request context) and its end.
_BLOCK = re.compile(r"\{%-?\s*block\s+(\w+)")
_ENDBLOCK = re.compile(r"\{%-?\s*endblock\b")
#: The folders of a spec root whose files :func:`changed_lines` compares.
SPEC_FOLDERS = ("prompt", "rules")
#: A spec file larger than this is not compared line by line (attribution is a hint).
_MAX_COMPARED = 4 << 20

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


def _fragments(raw: str) -> tuple[str, ...]:
    """The literal pieces of a line (template code removed) worth searching for."""
    pieces = _TEMPLATE_CODE.split(raw)
    return tuple(f.strip() for f in pieces if len(f.strip()) >= 4 and any(c.isalnum() for c in f))


@attrs.frozen
class ChangedLine:
    """A line that differs between two spec roots, located in the new one."""

    location: Location  # a removed line: the new file's line now in its place
    text: str  # the new line, or the removed old line
    removed: bool = False


def _spec_texts(root: Path) -> dict[str, str]:
    """``{posix path: text}`` of the regular UTF-8 files below a root's spec folders
    (a symbolic link is not followed: what it names may lie outside the repository)."""
    found: dict[str, str] = {}
    for folder in SPEC_FOLDERS:
        base = root / folder
        if not base.is_dir() or base.is_symlink():
            continue
        paths = sorted(p for p in base.rglob("*") if p.is_file() and not p.is_symlink())
        for path in paths:
            text = _read_text(path, root, _MAX_COMPARED)
            if text is not None:
                found[path.relative_to(root).as_posix()] = text
    return found


def _read_text(path: Path, root: Path | None, limit: int = MAX_SPEC_FILE_BYTES) -> str | None:
    """The UTF-8 text of a spec file read as the review tools read every repository file
    (:func:`~prefixlock.core.files.read_review_file`: inside the repository and
    ``root``, regular, bounded); None when it is refused or no text (attribution is a
    hint: a file refused contributes nothing, and the build says why)."""
    try:
        data = read_review_file(path, limit=limit)
        if root is not None:
            check_inside(path, root)
        return data.decode("utf-8")
    except (InputError, UnicodeDecodeError):
        return None


def changed_lines(
    old_root: Path, new_root: Path, display: Callable[[Path], str] = str
) -> tuple[ChangedLine, ...]:
    """The lines that differ between the spec files (``prompt/``, ``rules/``) of two
    roots, file by file in path order, each hunk's new lines before its removed ones;
    ``display`` names a file of ``new_root`` as reports show it."""
    old, new = _spec_texts(old_root), _spec_texts(new_root)
    out: list[ChangedLine] = []
    for name in sorted(old.keys() | new.keys()):
        a = old.get(name, "").split("\n") if name in old else []
        b = new.get(name, "").split("\n") if name in new else []
        if a == b:
            continue
        shown = display(new_root / name)
        matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                continue
            out += [ChangedLine(Location(shown, j + 1), b[j]) for j in range(j1, j2)]
            at = min(j1 + 1, max(len(b), 1))
            out += [ChangedLine(Location(shown, at), a[i], removed=True) for i in range(i1, i2)]
    return tuple(out)


def _probe(text: str, offset: int) -> tuple[str, int, str | None]:
    """(line, column, word) of ``text`` at ``offset``: what a source line is scored on."""
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    line = text[start : end if end >= 0 else len(text)]
    column = offset - start
    word_match = next((m for m in _WORD.finditer(line) if m.start() <= column <= m.end()), None)
    word = word_match.group() if word_match and len(word_match.group()) >= 3 else None
    return line, column, word


def _score(candidate: _Line, line: str, column: int, word: str | None) -> tuple[int, int]:
    """How well ``candidate`` explains the text ``line`` differing at ``column``: 3, a
    literal fragment of it covers the column (or the line is inside one); 2, it holds the
    word at the column; 1, one of its fragments is elsewhere on the line; 0, nothing."""
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
    return score


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
        #: lines changed since the old side's root (:meth:`with_changes`); None: unknown
        self.changes: tuple[ChangedLine, ...] | None = None
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
            self._add_file(path, self._display(path), template=False, extra=True)
        return self._lines

    def extended(self, extra: Sequence[Path]) -> SourceIndex:
        """A copy that also searches the files ``extra`` (a case's scenario file)."""
        out = SourceIndex(None)
        out.root, out.instructions, out.tools = self.root, self.instructions, self.tools
        out.models, out._lines = dict(self.models), list(self._lines)
        out._sections = self._sections
        out._pending = [*self._pending, *extra]
        out.changes = self.changes
        return out

    def with_changes(self, old_root: Path) -> SourceIndex:
        """A copy that blames only lines changed since ``old_root`` (the old side's spec
        root; see the module docstring)."""
        out = self.extended(())
        if self.root is not None and os.path.realpath(old_root) != os.path.realpath(self.root):
            out.changes = changed_lines(old_root, self.root, self._display)
        return out

    def _display(self, path: Path) -> str:
        relative = os.path.relpath(path)
        return str(path) if relative.startswith("..") else relative

    def _doc(self, name: str) -> LoadedDocument | None:
        assert self.root is not None
        try:
            return load_yaml_file(self.root / name, self._display(self.root / name), root=self.root)
        except (SpecErrors, InputError):  # a refused file: see _read_text
            return None

    def _load_root(self, root: Path) -> None:
        agent = self._doc("rules/agent.yaml")
        value = agent.value if agent is not None and isinstance(agent.value, dict) else {}
        if isinstance(value.get("instructions"), str):
            path = root / value["instructions"]
            try:
                text = read_text_file(path, self._display(path), root=root)
            except (SpecErrors, InputError):  # a refused file: see _read_text
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

    def _add_file(self, path: Path, display: str, *, template: bool, extra: bool = False) -> None:
        """``extra``: a scenario file (anywhere in the repository), not the root's."""
        text = _read_text(path, None if extra else self.root)
        if text is not None:
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
            if template:
                fragments = _fragments(raw)
            else:
                stripped = raw.strip()
                keep = len(stripped) >= 4 and any(c.isalnum() for c in stripped)
                fragments = (stripped,) if keep else ()
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
        line, column, word = _probe(text, offset)
        best: tuple[int, int] = (0, 0)
        found: Location | None = None
        for candidate in self.lines:
            score = _score(candidate, line, column, word)
            if score > best:
                best, found = score, candidate.location
        return best, found

    def attribute(
        self, provider: str, difference: Difference, new_body: Any, old_body: Any = None
    ) -> str | None:
        """``file:line`` of the spec that produced the text at ``difference``, if known;
        with :attr:`changes`, always a changed line (see the module docstring)."""
        found = self._attribute(provider, difference, new_body, old_body)
        if not self.changes:
            return found
        return self._blame(self.changes, found, provider, difference, new_body, old_body)

    def _blame(
        self,
        changes: Sequence[ChangedLine],
        found: str | None,
        provider: str,
        difference: Difference,
        new_body: Any,
        old_body: Any,
    ) -> str:
        """The changed line that explains ``difference`` (``found``: the line the
        unchanged search names)."""
        for change in changes:
            if found == _line_only(change.location):
                return found
        new_probes, old_probes = _probes(provider, difference, new_body, old_body)
        best: tuple[int, int] = (0, 0)
        pick: ChangedLine | None = None
        for change in changes:
            line = _Line(change.location, _fragments(change.text), change.text)
            for probe in old_probes if change.removed else new_probes:
                score = _score(line, *probe)
                if score > best:
                    best, pick = score, change
        if pick is None:
            file = found.rpartition(":")[0] if found is not None else None
            meant = [c for c in changes if c.text.strip()]
            pick = next((c for c in meant if c.location.file == file), None)
            pick = pick or (meant[0] if meant else changes[0])
        return _line_only(pick.location)

    def _attribute(
        self, provider: str, difference: Difference, new_body: Any, old_body: Any
    ) -> str | None:
        """The best line of the whole root, changed or not."""
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


#: A text to explain: (the line, the column where it differs, the word there).
Probe = tuple[str, int, str | None]


def _probes(
    provider: str, difference: Difference, new_body: Any, old_body: Any
) -> tuple[list[Probe], list[Probe]]:
    """What the new and the removed lines are scored on: each side's text at the first
    differing character (a value that is no string: its name, else its JSON), and on
    both sides the name of the tool it is in and, unless two texts differ, the key."""
    old, new = difference.old, difference.new
    at = first_differing_char(old, new) if isinstance(old, str) and isinstance(new, str) else 0
    sides: list[list[Probe]] = [[], []]
    for side, value in ((0, new), (1, old)):
        if value is MISSING:
            continue
        if isinstance(value, dict) and isinstance(value.get("name"), str):
            value = value["name"]
        text = value if isinstance(value, str) else canonical.dumps(value)
        sides[side].append(_probe(text, at if isinstance(value, str) else 0))
    both: list[Probe] = []
    key = next((part for part in reversed(difference.parts) if isinstance(part, str)), None)
    if key is not None and not (isinstance(old, str) and isinstance(new, str)):
        both.append(_probe(key, 0))  # a setting or a field added, removed or retyped
    tool = TOOL_PATHS.get(provider)
    if tool is not None and _matches(difference.parts, tool[0]):
        for body in (new_body, old_body):
            name = value_at(body, (*difference.parts[: len(tool[0])], *tool[1]))
            if isinstance(name, str):
                both.append(_probe(name, 0))
    return sides[0] + both, sides[1] + both


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
