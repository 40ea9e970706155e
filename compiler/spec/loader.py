"""Load spec files: YAML with positions, and strict UTF-8 text.

This is the only module that imports :mod:`yaml`. It composes YAML into nodes (which
keep their marks) and builds plain JSON values itself, so that every value keeps the
``file:line:col`` it came from, addressed by its JSON path (``$.rules[2].kind``).

What a YAML spec file may hold:

* exactly one document; an empty file is the value ``None`` (the schema then says what
  was expected);
* JSON-compatible values only: mappings with **string** keys, sequences, strings,
  integers, finite floats, booleans and null. Scalars resolve by the **YAML 1.2 core
  schema** (what editors' YAML language servers use): ``yes``/``no``/``on``/``off`` and
  dates stay strings, ``0o17`` and ``0x1F`` are integers, ``.inf``/``.nan`` are refused;
* the core tags ``!!str !!int !!float !!bool !!null !!map !!seq`` and nothing else;
* anchors, aliases and merge keys (``<<: *base``), with the expansion of aliases bounded
  by :data:`ALIAS_NODE_BUDGET` nodes so that a "billion laughs" file is refused quickly
  and with bounded memory;
* no duplicate keys; nesting at most :data:`MAX_DEPTH` levels.

Every problem of a file is collected and raised together as one sorted
:class:`~prefixlock.core.errors.SpecErrors`; a YAML syntax error stops parsing, so it is
reported alone. Lines and columns are 1-based; columns count code points.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import attrs
import yaml
from yaml.error import Mark, MarkedYAMLError
from yaml.events import AliasEvent, StreamEndEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.reader import ReaderError

from ..core.canonical import MAX_INT
from ..core.errors import InputError, Location, SpecError, SpecErrors
from ..core.files import read_regular_file, read_review_file
from ..core.jsonpath import json_path, parent_path
from ..core.limits import MAX_SPEC_FILE_BYTES

__all__ = [
    "ALIAS_NODE_BUDGET",
    "MAX_DEPTH",
    "DocumentErrors",
    "LoadedDocument",
    "load_yaml_bytes",
    "load_yaml_file",
    "load_yaml_text",
    "read_text_file",
]

#: At most this many values may be produced by expanding aliases in one file.
ALIAS_NODE_BUDGET = 10_000

#: Collections may nest at most this deep (also after alias expansion).
MAX_DEPTH = 100
#: Flow levels the scanner reads before it refuses a file at once (see
#: ``_Loader.fetch_flow_collection_start``): its work per token grows with the open
#: levels, so this bounds it; below it, the composer reports nesting past MAX_DEPTH
#: with the file's other errors.
_SCANNER_FLOW_LIMIT = 2 * MAX_DEPTH
#: Longer integer text is refused unread (a 64-bit integer needs at most 22 digits).
_MAX_INT_TEXT = 100

_BOM = b"\xef\xbb\xbf"

_TAG = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT = _TAG + "str", _TAG + "int", _TAG + "float"
_BOOL, _NULL, _MERGE = _TAG + "bool", _TAG + "null", _TAG + "merge"
_MAP, _SEQ = _TAG + "map", _TAG + "seq"


# --------------------------------------------------------------------------- documents


#: Bits of each field of a packed position (:class:`_Positions`).
_FIELD = 32
_FIELD_MASK = (1 << _FIELD) - 1
_NODE_MASK = (1 << 2 * _FIELD) - 1


def _pack(mark: Mark | _Mark) -> int:
    """A mark's 1-based line and column as one int: ``line | column << 32``."""
    return (mark.line + 1) | (mark.column + 1) << _FIELD


class _Positions:
    """Where every node and mapping key of a file starts, one int per JSON path: the
    node's line and column in the low 64 bits, its key's (a mapping member's) in the
    high ones, 0 where there is none. A long file has tens of thousands of paths; a
    :class:`Location` each, for the node and for the key, would be most of its load's
    memory. :attr:`nodes` and :attr:`keys` read it as ``path -> Location``."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.packed: dict[str, int] = {}

    # Made on demand: views kept here would hold this object in a cycle, and a loaded
    # document would outlive its last reference until the next full collection.
    @property
    def nodes(self) -> _PositionView:
        return _PositionView(self, key=False)

    @property
    def keys(self) -> _PositionView:
        return _PositionView(self, key=True)

    def node(self, path: str, packed: int) -> None:
        self.packed[path] = self.packed.get(path, 0) & ~_NODE_MASK | packed

    def key(self, path: str, packed: int) -> None:
        self.packed[path] = self.packed.get(path, 0) & _NODE_MASK | packed << 2 * _FIELD

    def location(self, packed: int) -> Location:
        return Location(self.file, packed & _FIELD_MASK, packed >> _FIELD & _FIELD_MASK)


class _PositionView(Mapping[str, Location]):
    """``path -> Location`` of the nodes or the keys of :class:`_Positions`."""

    def __init__(self, positions: _Positions, *, key: bool) -> None:
        self._positions, self._shift = positions, 2 * _FIELD if key else 0

    def _at(self, path: str) -> int:
        return self._positions.packed.get(path, 0) >> self._shift & _NODE_MASK

    def __getitem__(self, path: str) -> Location:
        packed = self._at(path)
        if not packed:
            raise KeyError(path)
        return self._positions.location(packed)

    def get(self, path: str, default: Any = None) -> Any:
        packed = self._at(path)
        return self._positions.location(packed) if packed else default

    def __contains__(self, path: object) -> bool:
        return isinstance(path, str) and bool(self._at(path))

    def __iter__(self) -> Iterator[str]:
        shift = self._shift
        return (
            path for path, packed in self._positions.packed.items() if packed >> shift & _NODE_MASK
        )

    def __len__(self) -> int:
        return sum(1 for _ in self)


@attrs.frozen
class LoadedDocument:
    """A parsed spec file: its plain JSON value and where every node of it starts."""

    #: display name (the spec-root-relative path as given)
    file: str
    #: plain Python: dict / list / str / int / float / bool / None
    value: Any
    #: JSON path -> where that node starts, e.g. ``"$"``, ``"$.rules[2].kind"``
    locations: Mapping[str, Location]
    #: JSON path of a mapping member -> where its key starts (for "unknown key" errors)
    key_locations: Mapping[str, Location] = attrs.field(factory=dict)

    def location(self, path: str) -> Location:
        """The node's location, else its nearest ancestor's, else ``file:1:1``."""
        while True:
            found = self.locations.get(path)
            if found is not None:
                return found
            parent = parent_path(path)
            if parent is None:
                return Location(self.file, 1, 1)
            path = parent

    def key_location(self, path: str) -> Location:
        """Where the key of the member at ``path`` starts, else :meth:`location`."""
        found = self.key_locations.get(path)
        return found if found is not None else self.location(path)


class DocumentErrors(SpecErrors):
    """The problems of a file that still parsed (a duplicate or non-string key, a value
    with no JSON form, nesting too deep...), with what was read of it: :attr:`document`
    (the first of duplicate keys; a refused key's member left out) may be validated,
    so that its schema errors are reported with these. A value refused at a path of
    :attr:`refused` is a ``None`` placeholder: a problem reported at or under it would
    be a consequence, not a second mistake."""

    def __init__(
        self, errors: Sequence[SpecError], document: LoadedDocument, refused: Collection[str]
    ) -> None:
        super().__init__(errors)
        self.document = document
        self.refused = frozenset(refused)

    def covers(self, path: str) -> bool:
        """Whether ``path`` is a refused value's, or inside one."""
        return any(path == r or (path.startswith(r) and path[len(r)] in ".[") for r in self.refused)


# --------------------------------------------------------------------------- public API


def load_yaml_text(text: str, file: str) -> LoadedDocument:
    """Parse one YAML document; raises :class:`SpecErrors` naming every problem: a
    :class:`DocumentErrors` unless the text does not parse (a syntax error, alone)."""
    if text.startswith("\ufeff"):
        raise SpecErrors([_bom_error(file)])
    loader, builder, root = _composed(text, file, stream=True)
    if loader.aliases or loader.merges:
        # An alias may build a node again and a merge key's members come first: the
        # items built early could differ; such files are loaded again, whole.
        loader, builder, root = _composed(text, file, stream=False)
    builder.errors[:0] = loader.errors
    value = builder.build_document(root)
    doc = LoadedDocument(file, value, builder.positions.nodes, builder.positions.keys)
    if builder.errors:
        raise DocumentErrors(_dedupe(builder.errors), doc, builder.refused)
    return doc


def _composed(text: str, file: str, *, stream: bool) -> tuple[_Loader, _Builder, Node | None]:
    """The loader, the builder and the root node of ``text``; ``stream``: the items of
    sequences are built as soon as each is composed (:meth:`_Loader.settle`)."""
    try:
        loader = _Loader(text, file)
    except ReaderError as err:
        line, column = _line_col(text, int(err.position))
        message = f"character U+{int(err.character):04X} is not allowed in YAML"
        raise SpecErrors([SpecError(Location(file, line, column), "", message)]) from None
    builder = _Builder(file, [], loader.anchored)
    if stream:
        loader.builder = builder
    try:
        root = _compose(loader)
    except _TooDeep as err:
        assert err.problem is not None and err.problem_mark is not None
        raise SpecErrors([SpecError(_where(file, err.problem_mark), "$", err.problem)]) from None
    except MarkedYAMLError as err:
        raise SpecErrors([_syntax_error(err, file)]) from None
    finally:
        loader.dispose()
    return loader, builder, root


def load_yaml_bytes(data: bytes, file: str) -> LoadedDocument:
    """Check that ``data`` is UTF-8 without a BOM, then :func:`load_yaml_text`."""
    return load_yaml_text(_decode(data, file), file)


def load_yaml_file(
    path: Path, file: str | None = None, *, root: Path | None = None
) -> LoadedDocument:
    """Read and load a YAML file; ``file`` is its display name (default: the path).
    The file is read as :func:`read_text_file` reads one."""
    name = path.as_posix() if file is None else file
    return load_yaml_bytes(_read_bytes(path, name, root), name)


def read_text_file(path: Path, file: str | None = None, *, root: Path | None = None) -> str:
    """Read a template or instruction file byte for byte.

    It must be a regular file of at most :data:`~prefixlock.core.limits.MAX_SPEC_FILE_BYTES`
    (a FIFO is refused without waiting for a writer), inside ``root`` when one is given
    (a symbolic link that resolves outside it is refused), UTF-8 without a BOM, with
    ``\\n`` line endings; otherwise raises :class:`SpecErrors` naming the file, and the
    line and column of each kind of problem in its text.
    """
    name = path.as_posix() if file is None else file
    text = _decode(_read_bytes(path, name, root), name)
    first_cr = text.find("\r")
    if first_cr >= 0:
        line, column = _line_col(text, first_cr)
        count = text.count("\r")
        message = (
            "carriage return (\\r) found: line endings must be \\n "
            f"({count} carriage return{'s' if count != 1 else ''} in this file)"
        )
        raise SpecErrors([SpecError(Location(name, line, column), "", message)])
    return text


# --------------------------------------------------------------------------- bytes and text


def _read_bytes(path: Path, file: str, root: Path | None) -> bytes:
    """The bytes of a spec file: regular, bounded, inside ``root`` if given (the one
    read of :mod:`prefixlock.core.files`), else a :class:`SpecErrors` located at it."""
    try:
        if root is None:
            return read_regular_file(path, limit=MAX_SPEC_FILE_BYTES, what=_SPEC_FILE, name=file)
        return read_review_file(
            path, root=root, limit=MAX_SPEC_FILE_BYTES, what=_SPEC_FILE, name=file
        )
    except InputError as err:
        # the location names the file: the message says the rest
        message = str(err)
        if message.startswith(f"cannot read {file}: "):
            message = "cannot read file: " + message.removeprefix(f"cannot read {file}: ")
        message = message.removeprefix(f"{file}: ").removeprefix(f"{path}: ")
        raise SpecErrors([SpecError(Location(file), "", message)]) from None


_SPEC_FILE = "a spec file"


def _bom_error(file: str) -> SpecError:
    return SpecError(
        Location(file, 1, 1),
        "",
        "file starts with a UTF-8 byte order mark (BOM); "
        "spec files are UTF-8 without a BOM (save it without one)",
    )


def _decode(data: bytes, file: str) -> str:
    """Strict UTF-8 without a BOM, else :class:`SpecErrors` (BOM and first bad byte)."""
    errors: list[SpecError] = []
    start = 0
    if data.startswith(_BOM):
        errors.append(_bom_error(file))
        start = len(_BOM)
    try:
        text = data[start:].decode("utf-8")
    except UnicodeDecodeError as err:
        offset = start + err.start
        line_start = data.rfind(b"\n", start, offset) + 1 or start
        line = data.count(b"\n", 0, offset) + 1
        column = len(data[line_start:offset].decode("utf-8", errors="replace")) + 1
        errors.append(
            SpecError(
                Location(file, line, column),
                "",
                f"invalid UTF-8: byte 0x{data[offset]:02x} at byte offset {offset} "
                "cannot be decoded (files must be UTF-8)",
            )
        )
        text = ""
    if errors:
        raise SpecErrors(errors)
    return text


def _line_col(text: str, index: int) -> tuple[int, int]:
    line_start = text.rfind("\n", 0, index) + 1
    return text.count("\n", 0, index) + 1, index - line_start + 1


def _where(file: str, mark: Mark | _Mark | None) -> Location:
    if mark is None:
        return Location(file, 1, 1)
    return Location(file, mark.line + 1, mark.column + 1)


def _syntax_error(err: MarkedYAMLError, file: str) -> SpecError:
    problem = err.problem or err.context or "invalid YAML"
    message = f"YAML syntax error: {problem}"
    if err.problem and err.context:
        context = err.context
        if err.context_mark is not None:
            mark = err.context_mark
            context += f" at line {mark.line + 1}, column {mark.column + 1}"
        message += f" ({context})"
    return SpecError(_where(file, err.problem_mark or err.context_mark), "$", message)


def _dedupe(errors: list[SpecError]) -> list[SpecError]:
    """One error per (location, message): an alias repeats its target's problems."""
    seen: dict[tuple[Location, str], SpecError] = {}
    for error in sorted(errors):
        seen.setdefault((error.location, error.message), error)
    return list(seen.values())


# --------------------------------------------------------------------------- composition


class _Mark:
    """Where a token starts or ends: the line and column (0-based) of PyYAML's ``Mark``,
    all that is read of one. PyYAML's also holds the file name, offset and buffer
    position as attributes of its own; a node keeps two marks, and a long scenario
    file has hundreds of thousands of them (the bulk of its load's memory)."""

    __slots__ = ("column", "line")
    name = "<unicode string>"

    def __init__(self, line: int, column: int) -> None:
        self.line = line
        self.column = column

    def get_snippet(self) -> None:
        return None

    def __str__(self) -> str:
        return f'  in "{self.name}", line {self.line + 1}, column {self.column + 1}'


class _TooDeep(Exception):
    """Flow collections nested past :data:`_SCANNER_FLOW_LIMIT`, found by the scanner
    (not a ``MarkedYAMLError``: no error class lives outside ``core.errors``; it carries
    the two fields the loader reads)."""

    def __init__(self, problem: str, problem_mark: _Mark) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = problem_mark


class _Skipped(Node):
    """A collection nested too deep, skipped unbuilt (its error is the loader's)."""

    def __init__(self, start_mark: Mark, end_mark: Mark) -> None:
        super().__init__(_NULL, "", start_mark, end_mark)


class _AliasNode(Node):
    """An alias occurrence; PyYAML would hand back the anchored node and lose this mark."""

    def __init__(self, anchor: str, target: Node, start_mark: Mark, end_mark: Mark) -> None:
        super().__init__(target.tag, target, start_mark, end_mark)
        self.anchor = anchor
        self.target = target


class _UndefinedAlias(Node):
    """An alias whose anchor is not defined (before it); the builder reports it."""

    def __init__(self, anchor: str, start_mark: Mark, end_mark: Mark) -> None:
        super().__init__(_NULL, "", start_mark, end_mark)
        self.anchor = anchor


class _Built(Node):
    """A sequence item built as soon as it was composed (:meth:`_Loader.settle`): its
    value (and its locations and errors, in the builder) instead of its nodes."""

    def __init__(self, node: Node, value: Any) -> None:
        super().__init__(node.tag, value, node.start_mark, node.end_mark)


_N = TypeVar("_N", SequenceNode, MappingNode)

#: The path part of the root collection on :attr:`_Loader.trail`.
_ROOT = ""


class _CoreResolver(yaml.resolver.BaseResolver):
    """The YAML 1.2 core schema, plus the merge key ``<<``."""


for _tag, _regexp, _first in (
    (_NULL, r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    (_BOOL, r"^(?:true|True|TRUE|false|False|FALSE)$", list("tTfF")),
    (_INT, r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", list("-+0123456789")),
    (
        _FLOAT,
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        list("-+0123456789."),
    ),
    (_MERGE, r"^(?:<<)$", ["<"]),
):
    _CoreResolver.add_implicit_resolver(_tag, re.compile(_regexp), _first)


class _Loader(
    yaml.reader.Reader,
    yaml.scanner.Scanner,
    yaml.parser.Parser,
    yaml.composer.Composer,
    _CoreResolver,
):
    """PyYAML's reader, scanner, parser and composer; no constructor: we build values.

    Pure Python on purpose, not libyaml: error messages must not depend on whether the
    C extension happens to be installed.
    """

    def __init__(self, text: str, file: str) -> None:
        yaml.reader.Reader.__init__(self, text)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        _CoreResolver.__init__(self)
        self.file = file
        self.depth = 0  # collections being composed
        self.block_depth = 0  # the block collections among them
        self.errors: list[SpecError] = []
        #: ``id`` of every collection node with an anchor: an alias builds it again.
        self.anchored: set[int] = set()
        #: Whether the document has an alias, a merge key (then streaming is undone).
        self.aliases = self.merges = False
        #: Streaming: builds each sequence item once composed (None: build at the end).
        self.builder: _Builder | None = None
        #: Per collection being composed: its path part (the root's :data:`_ROOT`), or
        #: None when the builder would not reach it by that path (a key, a duplicate or
        #: non-string key's value, a tag other than !!map and !!seq).
        self.trail: list[str | int | None] = []
        self.unplain = 0  # the Nones on the trail
        #: Per mapping being composed: the string keys so far (None after one that the
        #: builder would rewrite: surrogate escapes).
        self.keys: list[set[str] | None] = []
        self.part: str | int | None = None  # the next collection's, from compose_node
        #: Where each open flow collection starts (see fetch_flow_collection_start).
        self.flow_marks: list[_Mark] = []

    def fetch_flow_collection_start(self, token_class: Any) -> None:
        """PyYAML's, refusing a flow collection nested past :data:`MAX_DEPTH` at once.

        The scanner reads flow collections ahead of the composer and checks every open
        level's possible simple key for every token, so ``[[[[...`` costs time
        quadratic in its depth (a 32 KB file took 24 s) before the composer could say
        it is too deep. The scanner lets flow collections reach
        :data:`_SCANNER_FLOW_LIMIT` levels, so that a file nested a little too deep still
        reaches the composer, which skips what is too deep and reports it beside every
        other error of the file; past that limit the file is refused at once with that
        error alone. Either way the error names the same collection, the one that opens
        level ``MAX_DEPTH + 1`` counting the enclosing block collections (those the
        composer has entered, an indentless sequence too).
        """
        if self.flow_level >= _SCANNER_FLOW_LIMIT:
            marks = [*self.flow_marks, self.get_mark()]
            # The block collections around it are the ones being composed (the
            # composer has entered every one: it waits in or before the outermost open
            # flow collection). The scanner's own indentation stack would miss an
            # indentless sequence (``a:\n- [[[``): it opens no indentation level.
            at = marks[max(0, MAX_DEPTH - self.block_depth)]
            raise _TooDeep(f"nesting deeper than {MAX_DEPTH} levels", at)
        self.flow_marks.append(self.get_mark())
        super().fetch_flow_collection_start(token_class)

    def fetch_flow_collection_end(self, token_class: Any) -> None:
        if self.flow_marks:
            self.flow_marks.pop()
        super().fetch_flow_collection_end(token_class)

    def get_mark(self) -> _Mark:  # type: ignore[override]  # the fields errors read
        """The reader's position as a :class:`_Mark`."""
        return _Mark(self.line, self.column)

    def next_event(self) -> Any:
        return self.get_event()  # type: ignore[no-untyped-call]

    def peek_next_event(self) -> Any:
        return self.peek_event()  # type: ignore[no-untyped-call]

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        """PyYAML's ``compose_node``, keeping alias marks and bounding the nesting depth."""
        if self.check_event(AliasEvent):
            event = self.next_event()
            anchor = str(event.anchor)
            self.aliases = True
            if anchor not in self.anchors:
                return _UndefinedAlias(anchor, event.start_mark, event.end_mark)
            return _AliasNode(anchor, self.anchors[anchor], event.start_mark, event.end_mark)
        event = self.peek_next_event()
        anchor = event.anchor
        if anchor is not None and anchor in self.anchors:
            first = self.anchors[anchor].start_mark
            self.errors.append(
                SpecError(
                    _where(self.file, event.start_mark),
                    "$",
                    f"duplicate anchor &{anchor} (first defined at line {first.line + 1})",
                )
            )
        if self.check_event(yaml.events.ScalarEvent):
            return self.compose_scalar_node(anchor)
        if self.depth >= MAX_DEPTH:
            self.errors.append(
                SpecError(
                    _where(self.file, event.start_mark),
                    "$",
                    f"nesting deeper than {MAX_DEPTH} levels",
                )
            )
            return self.skip()
        block = not event.flow_style
        self.depth += 1
        self.block_depth += block
        self.part = self.part_of(parent, index)
        try:
            node: Node
            if self.check_event(yaml.events.SequenceStartEvent):
                node = self.compose_sequence_node(anchor)
            else:
                node = self.compose_mapping_node(anchor)
        finally:
            self.depth -= 1
            self.block_depth -= block
        if anchor is not None:
            self.anchored.add(id(node))
        return node

    def skip(self) -> _Skipped:
        """The events of the collection starting next, consumed unbuilt (without
        recursion: a bounded nesting keeps the composer's stack bounded)."""
        start = self.next_event()
        level = 1
        while level:
            event = self.next_event()
            if isinstance(event, yaml.events.CollectionStartEvent):
                level += 1
            elif isinstance(event, yaml.events.CollectionEndEvent):
                level -= 1
        return _Skipped(start.start_mark, event.end_mark)

    def part_of(self, parent: Node | None, index: Any) -> str | int | None:
        """The path part of the collection composed next (see :attr:`trail`): an item's
        index, a member's key when it is a string the mapping has not had yet."""
        if parent is None:
            return _ROOT
        if isinstance(index, int):
            return index
        if not isinstance(index, ScalarNode) or index.tag != _STR:
            return None
        key, seen = str(index.value), self.keys[-1]
        if seen is None or key in seen or not _encodes(key):
            return None
        return key

    def opened(self, node: Node) -> None:
        """``node``'s children are composed next: its part goes on the trail."""
        part = self.part if node.tag in (_MAP, _SEQ) else None
        self.trail.append(part)
        self.unplain += part is None

    def closed(self) -> None:
        self.unplain -= self.trail.pop() is None

    def settle(self, item: Node, index: int) -> Node:
        """Streaming: an item of the sequence being composed, as the builder builds it
        when it gets there (a :class:`_Built` node), once the path to it is plain; the
        tree then holds values where it held the item's nodes."""
        builder = self.builder
        if builder is None or self.unplain or not isinstance(item, MappingNode | SequenceNode):
            return item
        if self.aliases or self.merges:
            # The file is composed again, whole (load_yaml_text): building now would
            # expand the alias here, outside the builder's handling of its budget.
            return item
        parts = tuple(p for p in self.trail[1:] if p is not None)
        builder.depth = self.depth
        try:
            return _Built(item, builder.build(item, (*parts, index)))
        finally:
            builder.depth = 0

    def started(self, kind: type[_N], anchor: Any) -> _N:
        """A collection node from its start event, as PyYAML's composer makes it (the
        tag resolved, the anchor registered), opened (:meth:`opened`)."""
        start = self.next_event()
        tag = start.tag
        if tag is None or tag == "!":
            tag = self.resolve(kind, None, start.implicit)  # type: ignore[no-untyped-call]
        node = kind(tag, [], start.start_mark, None, flow_style=start.flow_style)
        if anchor is not None:
            self.anchors[anchor] = node
        self.opened(node)
        return node

    def compose_sequence_node(self, anchor: Any) -> SequenceNode:
        """PyYAML's, settling each item (:meth:`settle`)."""
        node = self.started(SequenceNode, anchor)
        items: list[Node] = node.value
        try:
            while not self.check_event(yaml.events.SequenceEndEvent):
                items.append(self.settle(self.compose_node(node, len(items)), len(items)))
        finally:
            self.closed()
        node.end_mark = self.next_event().end_mark
        return node

    def compose_mapping_node(self, anchor: Any) -> MappingNode:
        """PyYAML's, keeping the string keys so far (:meth:`part_of`)."""
        node = self.started(MappingNode, anchor)
        self.keys.append(set())
        try:
            while not self.check_event(yaml.events.MappingEndEvent):
                key = self.compose_node(node, None)
                value = self.compose_node(node, key)
                seen = self.keys[-1]
                if seen is not None and isinstance(key, ScalarNode) and key.tag == _STR:
                    text = str(key.value)
                    if _encodes(text):
                        seen.add(text)
                    else:
                        self.keys[-1] = None
                node.value.append((key, value))
        finally:
            self.keys.pop()
            self.closed()
        node.end_mark = self.next_event().end_mark
        return node

    def compose_scalar_node(self, anchor: Any) -> ScalarNode:
        """PyYAML's, except that the non-specific tag ``!`` means a string (YAML spec)."""
        event = self.next_event()
        if event.tag == "!":
            tag = _STR
        elif event.tag is None:
            tag = self.resolve(ScalarNode, event.value, event.implicit)  # type: ignore[no-untyped-call]
        else:
            tag = event.tag
        self.merges = self.merges or tag == _MERGE
        node = ScalarNode(tag, event.value, event.start_mark, event.end_mark, style=event.style)
        if anchor is not None:
            self.anchors[anchor] = node
        return node


def _compose(loader: _Loader) -> Node | None:
    """The single document's root node (``None`` for an empty file)."""
    loader.next_event()  # STREAM-START
    root: Node | None = None
    if not loader.check_event(StreamEndEvent):
        root = loader.compose_document()
    if not loader.check_event(StreamEndEvent):
        event = loader.peek_next_event()
        loader.errors.append(
            SpecError(
                _where(loader.file, event.start_mark),
                "$",
                "a second YAML document starts here; a spec file holds exactly one document",
            )
        )
    return root


# --------------------------------------------------------------------------- values


class _BudgetExceeded(Exception):
    pass


def _encodes(text: str) -> bool:
    """Whether ``text`` is UTF-8 as it is (no surrogates for :meth:`_Builder.string`)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _show_tag(tag: str) -> str:
    return "!!" + tag[len(_TAG) :] if tag.startswith(_TAG) else tag


class _Builder:
    """Builds plain values from nodes, recording locations and collecting errors."""

    def __init__(
        self, file: str, errors: list[SpecError], anchored: Collection[int] = frozenset()
    ) -> None:
        self.file = file
        self.errors = list(errors)
        #: Collections an alias may build again (see :meth:`consumable`), and how many of
        #: them are being built now.
        self.anchored = anchored
        self.kept = 0
        self.positions = _Positions(file)
        self.expanded = 0  # values produced while expanding aliases
        self.alias_depth = 0
        #: The packed position of the alias being built whose value, members and all, is
        #: located there (see :meth:`build_alias`); 0 outside one.
        self.at = 0
        self.outer_alias: _AliasNode | None = None
        self.active: set[int] = set()  # collections being built (recursive aliases)
        #: Paths whose value was refused (an error; ``None`` stands in for it).
        self.refused: set[str] = set()
        self.depth = 0
        #: Every string built so far, as itself: a long file repeats its keys, tool names
        #: and paths thousands of times, and a value keeps one object per text.
        self.strings: dict[str, str] = {}

    def place(self, path: str, node: Node) -> None:
        """Record where the value at ``path`` starts: ``node``, or the alias it is in."""
        self.positions.node(path, self.at or _pack(node.start_mark))

    def where(self, node: Node) -> Location:
        return _where(self.file, node.start_mark)

    def error(self, node: Node, parts: Sequence[str | int], message: str) -> None:
        self.errors.append(SpecError(self.where(node), json_path(parts), message))

    def build_document(self, root: Node | None) -> Any:
        if root is None:
            self.positions.node("$", _pack(_Mark(0, 0)))
            return None
        try:
            return self.build(root, ())
        except _BudgetExceeded:
            alias = self.outer_alias
            assert alias is not None
            self.errors.append(
                SpecError(
                    self.where(alias),
                    "$",
                    f"expanding alias *{alias.anchor} exceeds the limit of {ALIAS_NODE_BUDGET} "
                    "values produced by aliases in one file (a 'billion laughs' document?)",
                )
            )
            self.refused.add("$")
            return None

    # -- nodes

    def build(self, node: Node, parts: tuple[str | int, ...], path: str | None = None) -> Any:
        """``node``'s value; ``path``: ``json_path(parts)``, when the caller has it.
        ``None`` where an error refuses it (the path is then :attr:`refused`)."""
        errors = len(self.errors)
        value = self.value(node, parts, path)
        if value is None and (len(self.errors) > errors or isinstance(node, _Skipped)):
            self.refused.add(json_path(parts) if path is None else path)
        return value

    def value(self, node: Node, parts: tuple[str | int, ...], path: str | None) -> Any:
        """:meth:`build` without the bookkeeping of refused values."""
        if isinstance(node, _Built):
            return node.value
        if isinstance(node, _AliasNode):
            return self.build_alias(node, parts)
        if isinstance(node, _UndefinedAlias):
            self.undefined(node, parts)
            return None
        if isinstance(node, _Skipped):
            self.place(json_path(parts) if path is None else path, node)
            return None
        if self.alias_depth:
            self.expanded += 1
            if self.expanded > ALIAS_NODE_BUDGET:
                raise _BudgetExceeded
        self.place(json_path(parts) if path is None else path, node)
        if isinstance(node, ScalarNode):
            return self.scalar(node, parts)
        if node.tag not in (_MAP, _SEQ):
            self.error(node, parts, f"unsupported tag {_show_tag(node.tag)} {self.tag_hint()}")
            return None
        kept = id(node) in self.anchored
        self.kept += kept
        try:
            with self.nested(node, parts) as ok:
                if not ok:
                    return None
                if isinstance(node, SequenceNode):
                    return self.sequence(node, parts)
                assert isinstance(node, MappingNode)
                return self.mapping(node, parts)
        finally:
            self.kept -= kept

    def consumable(self) -> bool:
        """Whether the collection being built may drop each child node once built: the
        node tree of a long file would otherwise stay whole until the last value is
        built (with the values, twice the memory). Never inside an anchored collection
        or an alias, which an alias may build again."""
        return not self.kept and not self.alias_depth

    def sequence(self, node: SequenceNode, parts: tuple[str | int, ...]) -> list[Any]:
        items: list[Any] = node.value
        consume = self.consumable()
        out = []
        for i, item in enumerate(items):
            out.append(self.build(item, (*parts, i)))
            if consume:
                items[i] = None
        return out

    @contextmanager
    def nested(self, node: Node, parts: tuple[str | int, ...]) -> Iterator[bool]:
        if self.depth >= MAX_DEPTH:
            self.error(node, parts, f"nesting deeper than {MAX_DEPTH} levels")
            yield False
            return
        self.depth += 1
        self.active.add(id(node))
        try:
            yield True
        finally:
            self.active.discard(id(node))
            self.depth -= 1

    def build_alias(
        self, alias: _AliasNode, parts: tuple[str | int, ...], *, merged: bool = False
    ) -> Any:
        """The value of ``alias``, located where the alias is, members and all (what an
        error there should point at); ``merged``: the source of a merge key, whose
        members are located in the anchor (explicit members overwrite them)."""
        if id(alias.target) in self.active:
            self.error(alias, parts, f"recursive alias *{alias.anchor} (it refers to itself)")
            return None
        if self.alias_depth == 0:
            self.outer_alias = alias
        self.alias_depth += 1
        outer = self.at
        if not merged and not outer:
            self.at = _pack(alias.start_mark)
        try:
            value = self.build(alias.target, parts)
        finally:
            self.alias_depth -= 1
            self.at = outer
        # The alias itself is where this value is used.
        self.positions.node(json_path(parts), outer or _pack(alias.start_mark))
        return value

    def undefined(self, node: _UndefinedAlias, parts: Sequence[str | int]) -> None:
        self.error(
            node, parts, f"undefined alias *{node.anchor} (no anchor &{node.anchor} before it)"
        )

    @staticmethod
    def tag_hint() -> str:
        return "(only JSON-compatible values: !!str, !!int, !!float, !!bool, !!null, !!map, !!seq)"

    def scalar(self, node: ScalarNode, parts: tuple[str | int, ...]) -> Any:
        text: str = node.value
        tag = node.tag
        if tag in (_STR, _MERGE):
            return self.string(node, parts, text)
        if tag == _NULL:
            if text in ("", "~", "null", "Null", "NULL"):
                return None
            self.error(node, parts, f"{text!r} is not a valid !!null")
            return None
        if tag == _BOOL:
            if text in ("true", "True", "TRUE", "false", "False", "FALSE"):
                return text.lower() == "true"
            self.error(node, parts, f"{text!r} is not a valid !!bool (use true or false)")
            return None
        if tag == _INT:
            return self.integer(node, parts, text)
        if tag == _FLOAT:
            return self.number(node, parts, text)
        self.error(node, parts, f"unsupported tag {_show_tag(tag)} {self.tag_hint()}")
        return None

    def string(self, node: Node, parts: tuple[str | int, ...], text: str) -> str | None:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            try:  # JSON-style escaped surrogate pairs ("\ud83d\ude00") form one character
                text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
            except UnicodeDecodeError as err:
                code = int.from_bytes(err.object[err.start : err.start + 2], "little")
                self.error(node, parts, f"string contains a lone surrogate U+{code:04X}")
                return None
        return self.strings.setdefault(text, text)

    def integer(self, node: Node, parts: tuple[str | int, ...], text: str) -> int | None:
        if len(text) > _MAX_INT_TEXT:
            # Checked before int(): Python refuses to convert more than 4300 digits.
            self.error(node, parts, f"integer of {len(text)} characters is beyond 64 bits")
            return None
        value: int
        if re.fullmatch(r"0o[0-7]+", text):
            value = int(text[2:], 8)
        elif re.fullmatch(r"0x[0-9a-fA-F]+", text):
            value = int(text[2:], 16)
        elif re.fullmatch(r"[-+]?[0-9]+", text):
            value = int(text, 10)
        else:
            self.error(node, parts, f"{text!r} is not a valid !!int")
            return None
        if not -MAX_INT <= value <= MAX_INT:
            self.error(node, parts, f"integer {text} is beyond 64 bits")
            return None
        return value

    def number(self, node: Node, parts: tuple[str | int, ...], text: str) -> float | None:
        if re.fullmatch(r"[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)", text):
            value = float("nan")
        elif _FLOAT_TEXT.fullmatch(text):
            value = float(text)
        else:
            self.error(node, parts, f"{text!r} is not a valid !!float")
            return None
        if value != value or value in (float("inf"), float("-inf")):
            self.error(node, parts, f"number {text} is not finite; JSON has no infinity or NaN")
            return None
        return value

    # -- mappings

    def key(self, node: Node, parts: tuple[str | int, ...]) -> str | None:
        """A mapping key: a string, else an error at the key."""
        if isinstance(node, _UndefinedAlias):
            self.undefined(node, parts)
            return None
        if isinstance(node, _Skipped):
            return None
        target = node.target if isinstance(node, _AliasNode) else node
        if isinstance(target, ScalarNode) and target.tag in (_STR, _MERGE):
            key = self.string(node, parts, target.value)
            return key
        if isinstance(target, ScalarNode):
            kind = _SCALAR_KINDS.get(target.tag, f"a {_show_tag(target.tag)} value")
            shown = f"{kind}: {target.value}" if target.value else kind
            self.error(
                node, parts, f"key must be a string, got {shown} (quote it to make it a string)"
            )
            return None
        kind = "an object" if isinstance(target, MappingNode) else "an array"
        self.error(node, parts, f"key must be a string, got {kind}")
        return None

    def mapping(self, node: MappingNode, parts: tuple[str | int, ...]) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        explicit: dict[str, Any] = {}
        first_line: dict[str, int] = {}
        merges = [(k, v) for k, v in node.value if _is_merge_key(k)]
        # Merged members first, so that explicit members overwrite their locations.
        here = json_path(parts)
        own = self.positions.packed[here]
        for key_node, value_node in merges:
            for source in self.merge_sources(key_node, value_node, parts):
                built = (
                    self.build_alias(source, parts, merged=True)
                    if isinstance(source, _AliasNode)
                    else self.build(source, parts)
                )
                if isinstance(built, dict):
                    for key, value in built.items():
                        merged.setdefault(key, value)
        self.positions.packed[here] = own
        members: list[Any] = node.value
        consume = self.consumable()
        for index, (key_node, value_node) in enumerate(members):
            if consume and not _is_merge_key(key_node):
                members[index] = None  # built below; the locals keep it until then
            if _is_merge_key(key_node):
                continue
            key = self.key(key_node, parts)
            if key is None:
                continue
            member = (*parts, key)
            if key in first_line:
                self.error(
                    key_node,
                    member,
                    f"duplicate key {key!r} (first defined at line {first_line[key]})",
                )
                continue
            first_line[key] = key_node.start_mark.line + 1
            path = json_path(member)
            self.positions.key(path, self.at or _pack(key_node.start_mark))
            explicit[key] = self.build(value_node, member, path)
        for key in explicit:
            merged.pop(key, None)
        return {**merged, **explicit}

    def merge_sources(
        self, key_node: Node, value_node: Node, parts: tuple[str | int, ...]
    ) -> list[Node]:
        """The mappings a merge key ``<<`` names, earliest (strongest) first."""
        target = value_node.target if isinstance(value_node, _AliasNode) else value_node
        if isinstance(target, MappingNode):
            return [value_node]
        if isinstance(target, SequenceNode) and not isinstance(value_node, _AliasNode):
            items: list[Node] = list(target.value)
            if all(
                isinstance(i.target if isinstance(i, _AliasNode) else i, MappingNode) for i in items
            ):
                return items
        self.error(key_node, parts, "merge key << expects a mapping or a list of mappings")
        return []


_FLOAT_TEXT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
_SCALAR_KINDS = {_NULL: "null", _BOOL: "a boolean", _INT: "an integer", _FLOAT: "a number"}


def _is_merge_key(node: Node) -> bool:
    return isinstance(node, ScalarNode) and node.tag == _MERGE
