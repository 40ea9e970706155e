"""Golden files: each case's exact request bodies and its readable ``calls.md``, pinned.

A case is ``golden/<case>/scenario.yaml`` beside ``<provider>/0001.json`` ... (the exact
bytes every model call POSTs) and ``calls.md`` (the readable form). :func:`check_golden`
replays every case for every provider and compares byte for byte; a difference is one
:func:`finding`: a line naming the file (case, provider, call), the JSON path of the first
difference and its byte offset, then a short window of each side there (control
characters escaped), so that one edit of a spec prints a readable page, not every body
twice. :func:`report` is the whole-body form (``--full``): a unified diff of the
pretty-printed JSON (wire key order kept).
Each ``calls.md`` records the bundle digest it was built from (its root section);
:func:`stale_bundle` says when that is not the bundle the specs build, naming the lock.
:func:`update_golden` rewrites what differs (each provider folder swapped in whole, each
file written atomically) and removes stale bodies.

What lies in the golden folders but belongs to no case is a :class:`Stray` (``prefixlock
diff`` still compares every ``<case>/<provider>`` folder below ``golden/``): a folder of
cases' subfolder without a ``scenario.yaml``, a case's folder named like no provider, and
what an interrupted update left (staging folders ``.<provider>.replay-*`` and
``.<provider>.old-*``, a temporary ``.calls.md.*``). Checking reports each; updating
removes only the leftovers, its own making, and reports the rest. A golden case is
``<case>/scenario.yaml``: another scenario file is refused, as its golden files would
land beside it, over a neighbour's.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from .. import providers as registry
from ..core import canonical
from ..core.atomic import replace_file
from ..core.canonical import Ordered
from ..core.errors import UsageError
from ..core.files import check_inside, read_review_file
from ..core.jsonpath import json_path
from ..spec.build import locked_digest
from ..spec.bundle import Bundle
from .built import UPDATE, check_bundles, stale_lock
from .render import recorded_bundle, render_calls
from .replay import replay, serialize_calls, write_bodies
from .scenario import Scenario, golden_scenarios, load_scenario, scenario_files

__all__ = [
    "CALLS_MD",
    "CaseGolden",
    "GoldenReport",
    "Stray",
    "check_golden",
    "expected_case",
    "file_problems",
    "finding",
    "folder_problems",
    "pretty_body",
    "report",
    "stale_bundle",
    "update_golden",
]

CALLS_MD = "calls.md"
SCENARIO = "scenario.yaml"
GOLDEN = "golden"
#: Bytes shown on each side of the first difference by :func:`report`.
SNIPPET = 40
#: Bytes a :func:`finding` shows before the first difference, and from it on.
BEFORE = 32
AFTER = 48

#: What an interrupted update leaves in a case folder (:mod:`prefixlock.core.atomic`
#: names: tempfile's random part is made of a-z, 0-9 and _).
_LEFTOVER_FOLDER = re.compile(r"\.(?P<name>[^/]+)\.(?:replay|old)-[a-z0-9_]+")
_LEFTOVER_FILE = re.compile(r"\.calls\.md\.[a-z0-9_]+")
_LEFTOVER = "left over from an interrupted golden update"


@attrs.frozen
class Stray:
    """A path in the golden folders that belongs to no case, and what to do about it."""

    path: Path
    problem: str
    #: made by an interrupted update: ``golden --update`` removes it
    leftover: bool = False

    def remove(self) -> None:
        if self.path.is_dir() and not self.path.is_symlink():
            shutil.rmtree(self.path)
        else:
            self.path.unlink()


def _leftover(path: Path) -> bool:
    if path.is_symlink():
        return False
    if path.is_dir():
        match = _LEFTOVER_FOLDER.fullmatch(path.name)
        return match is not None and match["name"] in registry.NAMES
    return path.is_file() and _LEFTOVER_FILE.fullmatch(path.name) is not None


def case_strays(folder: Path, bundle_root: Path | None = None) -> list[Stray]:
    """What lies in case ``folder`` but is no part of it: a leftover of an interrupted
    update, or a folder named like no provider (but the one holding the scenario's own
    ``bundle_root``, if any)."""
    found: list[Stray] = []
    bundle = bundle_root.resolve() if bundle_root is not None else None
    inside = bundle is not None and bundle.is_relative_to(folder.resolve())
    for path in sorted(folder.iterdir()):
        if _leftover(path):
            advice = f"delete it, or run {UPDATE} (it removes it)"
            found.append(Stray(path, f"{path}: {_LEFTOVER}; {advice}", leftover=True))
        elif path.is_dir() and path.name not in registry.NAMES:
            here = path.resolve()
            if bundle is not None and (
                bundle.is_relative_to(here) or (inside and here.is_relative_to(bundle))
            ):
                continue  # the scenario's own bundle, or part of it
            names = ", ".join(registry.NAMES)
            problem = f"{path}: not a provider folder ({names}), so nothing checks it; delete it"
            found.append(Stray(path, problem))
    return found


def suite_strays(suite: Path) -> list[Stray]:
    """The subfolders of a folder of cases that hold no ``scenario.yaml``."""
    return [
        Stray(
            path,
            f"{path}: no {SCENARIO}, so no golden case checks it; restore"
            f" {path / SCENARIO}, or delete the folder",
        )
        for path in sorted(suite.iterdir())
        if path.is_dir() and not (path / SCENARIO).is_file()
    ]


@attrs.frozen(eq=False)
class CaseGolden:
    """What a case's golden files must hold: bodies per provider and ``calls.md``."""

    folder: Path
    bodies: dict[str, list[bytes]]
    page: bytes
    built: str = ""  # the digest of the bundle the replay used
    lock: str | None = None  # the digest the spec root's lock file records
    bundle_root: Path | None = None  # the folder holding the scenario's bundle

    def problems(self, *, full: bool = False) -> list[str]:
        """Each differing file's :func:`finding` (``full``: its whole-body :func:`report`)."""
        found: list[str] = []
        for name, bodies in self.bodies.items():
            found += folder_problems(self.folder / name, bodies, full=full)
        found += file_problems(self.folder / CALLS_MD, self.page, full=full)
        return [f"{self.folder.name}/{problem}" for problem in found]

    def changed_files(self) -> list[str]:
        """The files an update rewrites, adds or removes, relative to the case folder
        (``anthropic/0002.json``, ``calls.md``), in folder order."""
        found: list[str] = []
        for name, bodies in self.bodies.items():
            folder = self.folder / name
            expected = {f"{n:04d}.json": data for n, data in enumerate(bodies, 1)}
            present = {p.name for p in folder.iterdir()} if folder.is_dir() else set()
            for file in sorted(expected.keys() | present):
                path = folder / file
                if (
                    file not in expected
                    or not _present(path)
                    or read_review_file(path) != expected[file]
                ):
                    found.append(f"{name}/{file}")
        page = self.folder / CALLS_MD
        if not _present(page) or read_review_file(page) != self.page:
            found.append(CALLS_MD)
        return found

    def write(self) -> None:
        check_inside(self.folder)  # never through a case folder linked elsewhere
        write_bodies(self.bodies, self.folder)
        replace_file(self.folder / CALLS_MD, self.page)

    def stale_bundle(self) -> str | None:
        """Why the case's golden files were built from another bundle, if they were."""
        path = self.folder / CALLS_MD
        recorded = recorded_bundle(read_review_file(path)) if _present(path) else None
        return stale_bundle(str(self.folder), recorded, self.lock, self.built or None)


@attrs.frozen
class GoldenReport:
    """Per case, what differs (``check``) or what was rewritten (``update``)."""

    cases: tuple[str, ...]
    problems: tuple[str, ...]
    updated: tuple[str, ...] = ()
    #: cases whose ``calls.md`` records another bundle than their specs build
    bundles: tuple[str, ...] = ()
    #: what lies in the golden folders but belongs to no case (what to do, per path)
    strays: tuple[str, ...] = ()
    #: leftovers of an interrupted update that ``update`` removed
    removed: tuple[str, ...] = ()
    #: the cases' spec roots whose lock records another bundle than they build
    locks: tuple[str, ...] = ()
    #: per updated case (``update``), the files rewritten, added or removed
    changed: tuple[tuple[str, ...], ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems and not self.bundles and not self.strays and not self.locks


def stale_bundle(
    case: str, recorded: str | None, lock: str | None, built: str | None
) -> str | None:
    """Why ``case``'s golden files are stale against its spec root, or None.

    ``recorded`` is the bundle its ``calls.md`` names, ``built`` the bundle its specs
    build now (None: not buildable, compare with ``lock``, the lock file's). None also
    when nothing is known: a page from before the root section, no lock, no specs.
    A lock that alone is stale is ``build --check``'s finding, not this one.
    """
    target = built if built is not None else lock
    if recorded is None or target is None or recorded == target:
        return None
    if built is None or lock == built:
        return f"{case} was built from bundle {recorded}, the lock is {lock}; run {UPDATE}"
    records = f"the lock records {lock}" if lock is not None else "no lock"
    return (
        f"{case} was built from bundle {recorded}, the specs build {built} ({records});"
        f" run {UPDATE}"
    )


def expected_case(scenario_path: Path) -> CaseGolden:
    """Replay one case for every provider."""
    return _expected(load_scenario(scenario_path))


def _loaded(files: Sequence[Path]) -> list[Scenario]:
    """The cases' scenarios, after the build's template check of their bundles (a
    template error ``build`` rejects fails here too, even where no case renders it)."""
    bundles: dict[Path, Bundle] = {}  # the cases of one spec root share its bundle
    scenarios = [load_scenario(path, bundles=bundles) for path in files]
    check_bundles(scenario.bundle for scenario in scenarios)
    return scenarios


def _expected(scenario: Scenario) -> CaseGolden:
    scenario_path = scenario.path
    calls = replay(scenario)
    bodies = serialize_calls(calls, scenario.replayed(registry.NAMES))
    page = render_calls(scenario, calls, bodies).encode("utf-8")
    lock = locked_digest(scenario.bundle_root)
    return CaseGolden(
        scenario_path.parent, bodies, page, scenario.bundle.digest, lock, scenario.bundle_root
    )


def _cases(paths: Sequence[Path], root: Path) -> tuple[list[Path], list[Path]]:
    """The cases' scenario files, and the folders of cases to look for strays in (the
    golden folder, or each folder given that is no case itself).

    Raises :class:`UsageError` for no case, or a scenario file not named scenario.yaml.
    """
    if not paths:
        suite = Path(root) / GOLDEN
        files = golden_scenarios(root)
        if not files:
            raise UsageError(f"no scenarios: {suite}/*/{SCENARIO} is empty; pass PATH")
        return files, [suite]
    files = scenario_files(paths)
    loose = [
        f"{path}: a golden case is <case>/{SCENARIO}, its golden files beside it; move the"
        f" scenario to a folder of its own as {SCENARIO} (`prefixlock verify` and"
        " `prefixlock replay` take it as it is)"
        for path in files
        if path.name != SCENARIO
    ]
    if loose:
        raise UsageError("\n".join(loose))
    suites = [path for path in paths if path.is_dir() and not (path / SCENARIO).is_file()]
    return files, suites


def _strays(cases: Sequence[CaseGolden], suites: Sequence[Path]) -> list[Stray]:
    found = [stray for suite in suites for stray in suite_strays(suite)]
    for case in cases:
        found += case_strays(case.folder, case.bundle_root)
    return found


def check_golden(
    paths: Sequence[Path] = (), *, root: Path = Path("."), full: bool = False
) -> GoldenReport:
    """Compare every case's golden files with a fresh replay, and report what lies in
    the golden folders but belongs to no case; writes nothing. Each differing file is a
    bounded :func:`finding`; ``full``: a whole-body :func:`report`."""
    files, suites = _cases(paths, root)
    problems: list[str] = []
    bundles: list[str] = []
    cases = []
    for scenario in _loaded(files):
        case = _expected(scenario)
        stale = case.stale_bundle()
        bundles += [stale] if stale is not None else []
        problems += case.problems(full=full)
        cases.append(case)
    strays = tuple(stray.problem for stray in _strays(cases, suites))
    locks: list[str] = []
    for root in dict.fromkeys(case.bundle_root for case in cases if case.bundle_root):
        built = next(case.built for case in cases if case.bundle_root == root)
        stale = stale_lock(root, built)
        locks += [stale] if stale is not None else []
    return GoldenReport(
        tuple(str(p.parent) for p in files),
        tuple(problems),
        (),
        tuple(bundles),
        strays,
        locks=tuple(locks),
    )


def update_golden(paths: Sequence[Path] = (), *, root: Path = Path(".")) -> GoldenReport:
    """Rewrite the golden files of every case that differs from a fresh replay, and
    remove what an interrupted update left in the cases' folders; what else belongs to
    no case is kept and reported (``strays``).

    Every case is replayed before anything is written: a scenario error writes nothing.
    """
    files, suites = _cases(paths, root)
    expected = [_expected(scenario) for scenario in _loaded(files)]
    strays = _strays(expected, suites)
    removed = []
    for stray in strays:
        if stray.leftover:
            stray.remove()
            removed.append(str(stray.path))
    updated = []
    changed = []
    for case in expected:
        differ = case.changed_files()
        if differ:
            case.write()
            updated.append(str(case.folder))
            changed.append(tuple(differ))
    kept = tuple(stray.problem for stray in strays if not stray.leftover)
    return GoldenReport(
        tuple(str(c.folder) for c in expected),
        (),
        tuple(updated),
        (),
        kept,
        tuple(removed),
        changed=tuple(changed),
    )


# --- byte-exact comparison ------------------------------------------------------------


def first_difference(expected: bytes, actual: bytes) -> int | None:
    """The offset of the first differing byte (the shorter length if one is a prefix)."""
    for offset, (a, b) in enumerate(zip(expected, actual, strict=False)):
        if a != b:
            return offset
    if len(expected) != len(actual):
        return min(len(expected), len(actual))
    return None


_NOT_JSON = object()


def _parse(data: bytes) -> Any:
    try:
        return canonical.loads(data)
    except (ValueError, UnicodeDecodeError):
        return _NOT_JSON


def json_difference(a: Any, b: Any, parts: tuple[str | int, ...] = ()) -> str | None:
    """The JSON path of the first difference between two parsed values (key order counts)."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys_a, keys_b = list(a), list(b)
        for i in range(max(len(keys_a), len(keys_b))):
            if i >= len(keys_a) or i >= len(keys_b) or keys_a[i] != keys_b[i]:
                key = keys_a[i] if i < len(keys_a) else keys_b[i]
                return json_path((*parts, key))
            found = json_difference(a[keys_a[i]], b[keys_b[i]], (*parts, keys_a[i]))
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i in range(max(len(a), len(b))):
            if i >= len(a) or i >= len(b):
                return json_path((*parts, i))
            found = json_difference(a[i], b[i], (*parts, i))
            if found is not None:
                return found
        return None
    if type(a) is not type(b) or a != b:
        return json_path(parts)
    return None


def _ordered(value: Any) -> Any:
    """Parsed JSON with every object's key order kept by the canonical pretty printer."""
    if isinstance(value, dict):
        return Ordered((k, _ordered(v)) for k, v in value.items())
    if isinstance(value, list):
        return [_ordered(v) for v in value]
    return value


def pretty_body(data: bytes) -> str:
    """A request body indented for people, its wire key order kept."""
    return canonical.dumps_pretty(_ordered(canonical.loads(data)))


def _lines(data: bytes, parsed: Any) -> list[str]:
    if parsed is not _NOT_JSON:
        return canonical.dumps_pretty(_ordered(parsed)).splitlines()
    return data.decode("utf-8", errors="replace").splitlines()


#: What the window of a finding shows escaped: C0 and C1 controls, DEL, and the
#: bidirectional overrides that reorder what a reader sees.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escaped(text: str) -> str:
    return _CONTROL.sub(lambda m: _ESCAPES.get(m[0], f"\\u{ord(m[0]):04x}"), text)


def _text(data: bytes, start: int, end: int) -> str:
    """``data[start:end]`` as text, both ends moved off the middle of a UTF-8 character
    (a continuation byte is ``10xxxxxx``), control characters escaped."""
    start, end = max(0, start), min(len(data), end)
    while 0 < start < len(data) and data[start] & 0xC0 == 0x80:
        start -= 1
    while 0 < end < len(data) and data[end] & 0xC0 == 0x80:
        end -= 1
    return _escaped(data[start:end].decode("utf-8", errors="replace"))


def _window(data: bytes, offset: int) -> str:
    """The bytes around ``offset``: :data:`BEFORE` before it, :data:`AFTER` from it,
    with an ellipsis where the body goes on."""
    head = "\u2026" if offset > BEFORE else ""
    tail = "\u2026" if offset + AFTER < len(data) else ""
    return f"'{head}{_text(data, offset - BEFORE, offset + AFTER)}{tail}'"


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def finding(name: str, expected: bytes, actual: bytes) -> list[str]:
    """Why ``actual`` is not ``expected`` in three bounded lines (none if they are
    equal): where (``name``, the JSON path or, for text, the line, the byte offset and
    both sizes), then a short window of each side at the first differing byte."""
    offset = first_difference(expected, actual)
    if offset is None:
        return []
    a, b = _parse(expected), _parse(actual)
    if a is not _NOT_JSON and b is not _NOT_JSON:
        where = f"at {json_difference(a, b)}, byte {offset}"
    else:
        where = f"at line {_line_of(expected, offset)}, byte {offset}"
    return [
        f"{name}: differs {where} (golden {len(expected)} bytes, replayed {len(actual)})",
        f"  golden:   {_window(expected, offset)}",
        f"  replayed: {_window(actual, offset)}",
    ]


def report(name: str, expected: bytes, actual: bytes) -> str:
    """Why ``actual`` is not ``expected`` in full (empty if they are equal): the offset,
    the bytes around it, the JSON path and a unified diff of the whole pretty-printed
    bodies (``golden --check --full``; unbounded, as a body is)."""
    offset = first_difference(expected, actual)
    if offset is None:
        return ""
    lo = max(0, offset - SNIPPET)
    out = [
        f"{name}: first differing byte at offset {offset} "
        f"(golden {len(expected)} bytes, replayed {len(actual)} bytes)",
        f"  golden:   {expected[lo : offset + SNIPPET]!r}",
        f"  replayed: {actual[lo : offset + SNIPPET]!r}",
    ]
    a, b = _parse(expected), _parse(actual)
    if a is not _NOT_JSON and b is not _NOT_JSON:
        out.append(f"  JSON path: {json_difference(a, b)}")
    diff = difflib.unified_diff(
        _lines(expected, a), _lines(actual, b), "golden", "replayed", n=2, lineterm=""
    )
    out.extend(f"  {line}" for line in diff)
    return "\n".join(out)


def folder_problems(folder: Path, bodies: Sequence[bytes], *, full: bool = False) -> list[str]:
    """Problems of ``folder`` holding exactly ``0001.json`` ... for ``bodies``: per
    differing file its :func:`finding` (``full``: its :func:`report`). A file whose
    divergence shows the same windows as the previous one in the folder says so in
    its one line instead of repeating them."""
    expected_names = [f"{n:04d}.json" for n in range(1, len(bodies) + 1)]
    present = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    problems = [
        f"{folder.name}/{name}: stale golden file" for name in present if name not in expected_names
    ]
    previous: tuple[str, list[str]] | None = None  # the last file's name and windows
    for name, data in zip(expected_names, bodies, strict=True):
        path = folder / name
        if not _present(path):
            problems.append(f"{folder.name}/{name}: missing golden file")
            continue
        golden = read_review_file(path)
        if full:
            problem = report(f"{folder.name}/{name}", golden, data)
            if problem:
                problems.append(problem)
            continue
        lines = finding(f"{folder.name}/{name}", golden, data)
        if not lines:
            continue
        if previous is not None and previous[1] == lines[1:]:
            problems.append(f"{lines[0]}; the same bytes differ as in {previous[0]}")
        else:
            problems.append("\n".join(lines))
            previous = (name, lines[1:])
    return problems


def file_problems(path: Path, data: bytes, *, full: bool = False) -> list[str]:
    if not _present(path):
        return [f"{path.name}: missing golden file"]
    golden = read_review_file(path)
    if full:
        problem = report(path.name, golden, data)
    else:
        problem = "\n".join(finding(path.name, golden, data))
    return [problem] if problem else []


def _present(path: Path) -> bool:
    """Whether something is at ``path``: a link or a device is read (and refused by
    :func:`read_review_file`, naming it), never taken for a missing file."""
    return os.path.lexists(path)
