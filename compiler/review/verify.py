"""``prefixlock verify``: replay scenarios and check every invariant, per provider.

Each scenario is replayed once in process (and its calls serialized for every chosen
provider), once with a restart before every step, and once by ``prefixlock replay`` in a
subprocess under another ``PYTHONHASHSEED``, ``TZ`` and ``LC_ALL``; the checks are those
of :mod:`prefixlock.review.invariants` (prefix, root, context, duplicate, retry, compaction) plus
**restart** and **hash seed**: both other replays must be byte-identical.

A failure names the scenario, provider, call, the first divergent JSON path with old and
new values, and the spec ``file:line`` that produced the text when it can be found
(:class:`prefixlock.review.sources.SourceIndex`). The table reports per scenario and provider:
calls, distinct request-context messages, prefix stability, the share of body bytes
equal to the previous body's prefix, and the simulated cached-token share and cost vs
no caching, and that cost as a multiple of the perfect-cache bound (every token written
once, read by every later call that sends it at the same place:
:class:`~prefixlock.cache.simulator.PerfectBound`)
(:mod:`prefixlock.cache.simulator`; cache entries expire by the scenario's
request timestamps, a call without one arriving with the call before; Gemini's explicit
cache of the root, the ``cachedContent`` option, is the one the deployment creates from
the call's request: :class:`RootCaches`), and that cost as a
multiple of a naive harness's for the same conversation (the current context in the
system prompt every call, tools in file order: :mod:`prefixlock.review.naive`). The golden suite
runs in a few seconds: the subprocess replays run in parallel with the in-process work.

Exit codes: 0 every invariant holds, 1 a failure, 2 a usage or input error.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from fractions import Fraction
from pathlib import Path
from typing import Any

import attrs

from .. import providers as registry
from ..cache.simulator import CacheReport, CacheTotals, CallCache, PerfectBound, Simulation
from ..cache.tokens import Tokenizer, get_tokenizer
from ..core.errors import UsageError
from ..core.fragments import Body, RunningDigest, common_body_prefix
from ..core.memory import release_freed_memory
from ..core.messages import CanonicalMessage, MessageKind
from ..core.model import MessageView, ModelRequest
from ..core.resources import python_module_command
from ..core.timestamps import seconds
from ..providers.gemini import Gemini
from ..runtime.context import section_digests
from ..spec.bundle import Bundle
from . import processes
from .built import check_bundles, stale_locks
from .invariants import BodyChecker, Failure, HistoryChecker, same_bytes
from .naive import NaiveHarness, full_contexts, tool_file_order
from .replay import (
    Call,
    call_request,
    forget_encodings,
    fragments_at,
    iter_replay,
    provider_names,
    replay_bodies,
    replay_digests,
    serialize_calls,
    sparse_restarts,
    wire_for,
)
from .scenario import (
    RetryStep,
    Scenario,
    ToolResultsStep,
    golden_scenarios,
    load_scenario,
    scenario_files,
)
from .sources import SourceIndex
from .steps import UserStep

__all__ = [
    "HEADER",
    "Listener",
    "Report",
    "RootCaches",
    "Row",
    "call_time",
    "name_caches",
    "row_line",
    "scenario_label",
    "simulate_calls",
    "table_line",
    "table_widths",
    "verify",
    "verify_scenario",
]

#: Environment of the hash-seed replay: another seed, time zone and locale.
OTHER_TZ = "Asia/Kathmandu"  # UTC+05:45: an offset no default shares
OTHER_LOCALE = "C"


@attrs.frozen
class Row:
    """One scenario x provider line of the table."""

    scenario: str  # the label: the case folder of a scenario.yaml, else the file stem
    name: str  # the scenario's own free-text name
    file: str
    provider: str
    calls: int
    context_messages: int
    prefix_stable: bool
    bytes_reused: float
    cached_share: float
    cost_ratio: float
    #: Simulated cost as a multiple of the perfect-cache bound (:class:`PerfectBound`).
    cost_vs_bound: float
    #: Simulated cost as a multiple of the naive harness's (:mod:`.naive`).
    cost_vs_naive: float
    #: Each call a scenario's ``switch`` step sent to another model: ``call 2:
    #: anthropic/claude-sonnet-5-5 → anthropic/claude-opus-4-6: cache namespace reset``
    switches: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out = attrs.asdict(self)
        for key in ("bytes_reused", "cached_share", "cost_ratio", "cost_vs_bound", "cost_vs_naive"):
            out[key] = round(out[key], 4)
        return out


@attrs.frozen
class Report:
    rows: tuple[Row, ...]
    failures: tuple[Failure, ...]
    tokenizer: str
    #: the scenarios' spec roots whose lock records another bundle than they build
    stale_locks: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.failures and not self.stale_locks

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "tokenizer": self.tokenizer,
            "results": [row.to_json() for row in self.rows],
            "failures": [failure.to_json() for failure in self.failures],
            "stale_locks": list(self.stale_locks),
        }

    def table(self) -> str:
        labels = [row.scenario for row in self.rows]
        names = [row.provider for row in self.rows]
        widths = table_widths(labels, names)
        return "\n".join(table_line(cells, widths) for cells in (HEADER, *map(_cells, self.rows)))


#: The columns of the verify table.
HEADER = (
    "scenario",
    "provider",
    "calls",
    "contexts",
    "prefix-stable",
    "bytes reused",
    "cached tokens",
    "cost vs uncached",
    "vs perfect cache",
    "vs naive",
)


def _cells(row: Row) -> tuple[str, ...]:
    return (
        row.scenario,
        row.provider,
        str(row.calls),
        str(row.context_messages),
        "yes" if row.prefix_stable else "NO",
        f"{row.bytes_reused:.1%}",
        f"{row.cached_share:.1%}",
        f"{row.cost_ratio:.1%}",
        f"{row.cost_vs_bound:.2f}x",
        f"{row.cost_vs_naive:.2f}x",
    )


def table_widths(labels: Sequence[str], names: Sequence[str]) -> list[int]:
    """Column widths known before any row is done (so rows can be printed as they come):
    the names' from every scenario label and provider, the figures' from the header,
    which is wider than any figure of a plausible run."""
    widths = [len(title) for title in HEADER]
    widths[0] = max([widths[0], *map(len, labels)])
    widths[1] = max([widths[1], *map(len, names)])
    return widths


def table_line(cells: Sequence[str], widths: Sequence[int]) -> str:
    """One line of the table (the header or a row's cells): names left-aligned, figures
    right-aligned, two spaces apart, no trailing spaces."""
    names = [c.ljust(w) for c, w in zip(cells[:2], widths[:2], strict=True)]
    figures = [c.rjust(w) for c, w in zip(cells[2:], widths[2:], strict=True)]
    return "  ".join(names + figures).rstrip()


def row_line(row: Row, widths: Sequence[int]) -> str:
    """A row of the table."""
    return table_line(_cells(row), widths)


class Listener:
    """What :func:`verify` tells as it goes (the CLI streams its table from it); every
    method does nothing here."""

    def started(self, labels: Sequence[str], names: Sequence[str]) -> None:
        """Every scenario loaded: their labels, in order, and the providers."""

    def case_started(self, index: int, count: int, label: str) -> None:
        """Scenario ``index`` (0-based) of ``count`` is being verified."""

    def case_done(self, rows: Sequence[Row], failures: Sequence[Failure]) -> None:
        """A scenario's rows (one per provider) and failures."""


# --- scenarios -------------------------------------------------------------------------


def call_time(scenario: Scenario, call: Call) -> float | None:
    """The time of a model call in seconds since the epoch, for the cache simulator's
    expiry: its request's ``timestamp`` (RFC 3339, already checked when the scenario was
    loaded), or a tool-results batch's (the latest of its results'); None for a call
    without one (the simulator takes it to arrive with the previous call)."""
    step = scenario.steps[call.step]
    if isinstance(step, ToolResultsStep):
        return seconds(step.timestamp) if step.timestamp is not None else None
    request = getattr(step, "request", None)
    stamp = getattr(request, "timestamp", None)
    return seconds(stamp) if isinstance(stamp, str) else None


class RootCaches:
    """Provider ``name``'s explicit cache of the stable root that a request names (the
    Gemini settings option ``cachedContent``) -> the body the deployment creates it from
    (:meth:`Gemini.cached_content_body` of that request: its model, instructions, tools
    and ``toolConfig``); empty for another provider or without the option. The body of
    the latest root is kept (one root serves a whole conversation)."""

    def __init__(self, name: str) -> None:
        wire = registry.get(name) if name == Gemini.name else None
        self._wire = wire if isinstance(wire, Gemini) else None
        self._root: tuple[Any, ...] | None = None
        self._caches: dict[str, Mapping[str, Any]] = {}

    def __call__(self, request: ModelRequest) -> Mapping[str, Mapping[str, Any]]:
        if self._wire is None:
            return {}
        root = (request.instructions, request.tools, request.settings)
        if root != self._root:
            self._root, self._caches = root, {}
            try:
                option = request.settings_for(Gemini.name).options_value
            except KeyError:  # no gemini settings: serializing the call fails instead
                option = {}
            cache = option.get(Gemini.CACHED_CONTENT)
            if isinstance(cache, str):
                self._caches[cache] = self._wire.cached_content_body(request)
        return self._caches


def name_caches(simulation: Simulation, caches: Mapping[str, Mapping[str, Any]]) -> None:
    """Give ``simulation`` the bodies of the explicit caches the next call names
    (:class:`RootCaches`; :meth:`Simulation.name_cache`)."""
    for cache, body in caches.items():
        simulation.name_cache(cache, body)


def simulate_calls(
    scenario: Scenario,
    calls: Sequence[Call],
    name: str,
    bodies: Sequence[bytes],
    model: str | None = None,
    times: Sequence[float | None] | None = None,
) -> CacheReport:
    """Every call's simulated cache use, as verify prices the calls: each body with its
    call's time (:func:`call_time`, or ``times``' where given: a transcript's stamps), so
    an entry expires between turns as the provider would let it, and Gemini's explicit
    cache of the root (``cachedContent``) as the deployment creates it from the call's
    request (:class:`RootCaches`); after a provider switch, in a simulation of the
    provider the call went to. For the pages that draw the calls (``prefixlock report``)
    and ``verify --observed``, beside the table verify makes. ``model``: the configured
    model of ``name``."""
    if times is None:
        times = [call_time(scenario, call) for call in calls]
    simulation = Simulation(name, model=model)
    roots = RootCaches(name)
    # after a provider switch the bodies are another provider's: its own simulation
    lanes = {name: (simulation, roots)}
    out: list[CallCache] = []
    for call, body, at in zip(calls, bodies, times, strict=True):
        wire = call.wire(name)
        if wire not in lanes:
            lanes[wire] = (Simulation(wire, model=call.target(name)), RootCaches(wire))
        lane, lane_roots = lanes[wire]
        if call.models or call.route is not None:  # after a switch: its own namespace
            lane.model = call.target(name)
        elif lane.model != model:
            lane.model = model
        name_caches(lane, lane_roots(call.request))
        priced = lane.add(body, at)
        out.append(attrs.evolve(priced, index=len(out) + 1))
    report = simulation.report()
    return attrs.evolve(report, calls=tuple(out))


def scenario_label(path: Path) -> str:
    """``golden/midnight/scenario.yaml`` -> ``midnight``; ``x/crash.yaml`` -> ``crash``."""
    return path.parent.name if path.name == "scenario.yaml" and path.parent.name else path.stem


def _other_environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONHASHSEED"] = "2" if env.get("PYTHONHASHSEED") == "1" else "1"
    env["TZ"] = OTHER_TZ
    env["LC_ALL"] = OTHER_LOCALE
    env["LANG"] = OTHER_LOCALE
    return env


def _describe_environment() -> str:
    env = _other_environment()
    return " ".join(f"{key}={env[key]}" for key in ("PYTHONHASHSEED", "TZ", "LC_ALL"))


def _replay_elsewhere(path: Path, out: Path, *, digests: bool = True) -> tuple[int, str]:
    """``prefixlock replay`` of ``path`` in a subprocess under another seed, TZ and locale:
    the digest of every body into the file ``out`` (``digests``), else the bodies into
    the folder ``out``."""
    command = [
        *python_module_command(),
        "replay",
        str(path.resolve()),
        "--provider",
        "all",
        "--digests" if digests else "--out",
        str(out),
    ]
    done = processes.run(command, env=_other_environment())
    return done.returncode, done.stderr.decode("utf-8", "replace").strip()


def _read_bodies(folder: Path) -> list[bytes]:
    files = sorted(folder.glob("[0-9][0-9][0-9][0-9].json"))
    return [f.read_bytes() for f in files]


def _read_digests(path: Path) -> dict[str, _DigestCheck]:
    """Provider name -> a check of the digests in the file ``replay --digests`` wrote
    (the hex lists themselves are not kept: 10,000 strings at 2,000 calls)."""
    value = json.loads(path.read_text(encoding="utf-8"))
    return {str(k): _DigestCheck([str(d) for d in v]) for k, v in value.items()}


class _Elsewhere:
    """The hash-seed replay of one scenario: a check of its bodies' digests per
    provider, and its bodies on demand (a second subprocess run, only when a digest
    differs, to name the failure)."""

    def __init__(self, path: Path, digests: Mapping[str, _DigestCheck], folder: Path) -> None:
        self.path = path
        self.digests = digests
        self.folder = folder

    def bodies(self, name: str) -> list[bytes]:
        target = self.folder / "bodies"
        if not target.exists():
            code, stderr = _replay_elsewhere(self.path, target, digests=False)
            if code != 0:
                raise UsageError(f"the subprocess replay failed ({code}): {stderr}")
        return _read_bodies(target / name)


class _DigestCheck:
    """Whether the body digests made call by call (:meth:`add`) are exactly the list
    another replay made, keeping neither list: each list is one SHA-256 of its digests
    in order (every digest 64 lower-case hex digits, so the joined text splits one way
    only) and a count. Equal hashes of different lists would be a SHA-256 collision."""

    def __init__(self, expected: Sequence[str]) -> None:
        self._count = len(expected)
        self._seen = 0
        #: False once a digest is not 64 lower-case hex digits (in either list)
        self.well_formed = all(_DIGEST_HEX.fullmatch(digest) for digest in expected)
        self._expected = _joined_hash(expected) if self.well_formed else b""
        self._made = hashlib.sha256()

    def add(self, digest: str) -> None:
        self._seen += 1
        if self.well_formed:
            if _DIGEST_HEX.fullmatch(digest):
                self._made.update(digest.encode("ascii"))
            else:
                self.well_formed = False

    @property
    def equal(self) -> bool:
        """Every digest equal, and as many."""
        return (
            self.well_formed and self._seen == self._count and self._made.digest() == self._expected
        )


def _joined_hash(digests: Sequence[str]) -> bytes:
    state = hashlib.sha256()
    for digest in digests:
        state.update(digest.encode("ascii"))
    return state.digest()


#: A SHA-256 digest as ``replay --digests`` writes it.
_DIGEST_HEX = re.compile(r"[0-9a-f]{64}")


#: Frames a provider keeps in a pass of verify: the current mode's, the naive harness's
#: current one, and two more. A mode used again after its frame was dropped makes the
#: frame again, and its chain starts from the fragment cache (one slower call, the same
#: bytes); each frame kept holds its encoded head, the parsed tool schemas and, for the
#: naive harness, its whole system prompt (about 90 KB at 2,000 calls).
_PASS_FRAMES = 4


@attrs.frozen
class _Pass:
    """What one provider's pass over a scenario's calls reads (:func:`_provider_pass`)."""

    scenario: Scenario
    label: str
    sources: SourceIndex
    name: str
    retried: set[str]  # the events retried later
    originals: Sequence[int | None]  # per call: a retry's original call number
    tools: tuple[str, ...]  # the tool order of the naive harness
    counter: Tokenizer
    contexts: Mapping[str, str]  # the naive harness's whole context per context message


@attrs.define
class _Passed:
    """What one provider's pass found: its invariant failures, its bodies' bytes in all
    and those equal to the body before's prefix, the simulated cache totals, the
    perfect-cache bound and the naive harness's cost."""

    failures: Sequence[Failure] = ()
    total: int = 0
    reused: int = 0
    simulated: CacheTotals = attrs.field(factory=CacheTotals)
    bound: PerfectBound = attrs.field(factory=PerfectBound)
    naive_cost: Fraction = Fraction(0)


def _provider_pass(job: _Pass, calls: Sequence[Call], digests: Sequence[_DigestCheck]) -> _Passed:
    """Serialize every call for one provider (a new instance) and check, hash and price
    each body as it is made (``digests``: the other replays' lists the bodies' digests
    must equal); no body outlives the next call."""
    scenario, name = job.scenario, job.name
    out = _Passed()
    if not calls:
        return out
    provider = registry.get(name)
    provider.frame_limit = _PASS_FRAMES
    checker = BodyChecker(job.label, name, sources=job.sources)
    # Per provider the calls go to (the replay's own; after a provider switch another):
    # its cache simulations (each wire reads its own bodies) and Gemini root caches.
    lanes: dict[str, _Lane] = {}
    running = RunningDigest()
    previous: Body | None = None
    namespace = calls[0].namespace(name)
    for call, retry_of in zip(calls, job.originals, strict=True):
        wire = call.wire(name)
        lane = lanes.get(wire)
        if lane is None:
            lane = lanes[wire] = _Lane(wire, call.target(name), job)
        if call.namespace(name) != namespace:  # a new cache namespace: a new prefix
            namespace = call.namespace(name)
            checker.new_namespace(wire)
        lane.simulation.model = lane.naive.model = call.target(name)
        if retry_of is not None and calls[retry_of - 1].namespace(name) != namespace:
            # a retry after a switch goes to the new model or provider: other bytes
            checker.moved.add(call.index)
        elif retry_of is not None:
            checker.retries[call.index] = retry_of
        elif call.event in job.retried:
            checker.keep.add(call.index)
        at = call_time(scenario, call)
        # The body as the provider's fragments: compared, hashed and priced by what
        # changed since the body before, never joined unless a check fails.
        body = fragments_at(scenario, call, provider).as_body()
        checker.add(body, call.request.epoch)
        digest = running.hexdigest(body)
        for check in digests:
            check.add(digest)
        out.total += body.size
        if previous is not None:
            out.reused += common_body_prefix(previous, body)
        previous = body
        name_caches(lane.simulation, lane.roots(call.request))
        priced = lane.simulation.add_fragments(body, at)
        out.bound.add(priced)
        out.simulated = out.simulated.plus(priced)
        # The same provider instance: the naive history's messages are mostly the
        # same fragments (the instance's cache holds them once).
        request = lane.harness.request(call_request(call, name))
        name_caches(lane.naive, lane.naive_roots(request))
        wire_provider = wire_for(call, provider)
        out.naive_cost += lane.naive.add_fragments(
            wire_provider.fragments(request).as_body(), at
        ).cost
    out.failures = checker.failures
    return out


class _Lane:
    """One provider's simulations in a verify pass: the calls that go to it (the
    replay's own provider, or the one a provider switch sent the calls to)."""

    def __init__(self, wire: str, model: str, job: _Pass) -> None:
        counter = job.counter
        self.simulation = Simulation(wire, model=model, tokenizer=counter, keep_calls=False)
        self.naive = Simulation(wire, model=model, tokenizer=counter, keep_calls=False)
        self.roots, self.naive_roots = RootCaches(wire), RootCaches(wire)
        # the naive harness's history holds the parts as this provider takes them
        self.harness = NaiveHarness(job.tools, job.contexts)


def verify_scenario(
    scenario: Scenario,
    names: Sequence[str],
    *,
    elsewhere: Mapping[str, Sequence[bytes]] | _Elsewhere | None = None,
    tokenizer: str = "estimate",
) -> tuple[list[Row], list[Failure]]:
    """Rows and failures of one loaded scenario. ``elsewhere``: the bodies of the
    hash-seed replay (checked when given).

    Streaming: the scenario is replayed once and its calls kept (they share the
    replay's messages); then each provider in turn serializes every call, each body
    checked against the one before (:class:`HistoryChecker`, :class:`BodyChecker`) and
    fed to the cache simulations as it is made, so one provider's fragments are alive
    at a time; of the bodies only digests are kept (and the bodies of retried calls).
    The replay with restarts (before every step up to
    :data:`~prefixlock.review.replay.RESTART_EVERY_STEP` steps, then on a geometric
    schedule) and the hash-seed replay are compared by digest; when one differs, the
    bodies are made again to name the first difference.
    """
    sources = SourceIndex(scenario.bundle_root, extra=[scenario.path])
    label = scenario_label(scenario.path)
    retried = {step.event for step in scenario.steps if isinstance(step, RetryStep)}
    restarted = {
        name: _DigestCheck(found)
        for name, found in replay_digests(scenario, names, restart=sparse_restarts()).items()
    }
    seeded = {
        name: elsewhere.digests.get(name, _DigestCheck([]))
        for name in names
        if isinstance(elsewhere, _Elsewhere)
    }
    user_requests = [s.request for s in scenario.steps if isinstance(s, UserStep)]
    expected = (
        {r.event_id: section_digests(scenario.bundle, r) for r in user_requests}
        if scenario.bundle.sections
        else None
    )
    history = HistoryChecker(label, sources, retried, expected)
    contexts: set[str] = set()
    read: Sequence[CanonicalMessage] = ()  # the messages whose context ids are in `contexts`
    events: dict[str, int] = {}  # event -> the number of its first (original) call
    steps: dict[int, int] = {}  # call number -> the index of the step that made it
    made: list[Call] = []
    originals: list[int | None] = []  # per call: a retry's original call, else None
    for call in iter_replay(scenario):
        made.append(call)
        steps[call.index] = call.step
        if call.kind == "retry":
            originals.append(events.get(call.event))
        else:
            originals.append(None)
            events.setdefault(call.event, call.index)
        history.add(call)
        messages = call.request.messages
        extends = isinstance(read, MessageView) and read.shared_with(messages) == len(read)
        contexts.update(
            messages[i].id
            for i in range(len(read) if extends else 0, len(messages))
            if messages[i].kind is MessageKind.REQUEST_CONTEXT
        )
        read = messages
    forget_encodings(made)
    switches = {name: _switches(made, name) for name in names}
    failures = history.failures
    del history, events, read  # the passes read none of them: not kept while they run
    calls = len(made)
    counter = get_tokenizer(tokenizer)
    tools = tool_file_order(scenario.bundle_root)
    whole_contexts = full_contexts(scenario.bundle, user_requests)
    # One provider after the other, each from instances of its own: one provider's
    # fragments (and simulations) are alive at a time.
    passes = {}
    for name in names:
        release_freed_memory()
        passes[name] = _provider_pass(
            _Pass(
                scenario, label, sources, name, retried, originals, tools, counter, whole_contexts
            ),
            made,
            [restarted[name], *([seeded[name]] if seeded else [])],
        )
    del made
    slow: dict[str, list[bytes]] | None = None
    rows = []
    for name in names:
        done = passes[name]
        found = list(done.failures)
        if not restarted[name].equal:
            slow = slow or replay_bodies(scenario, names)
            again = serialize_calls(list(iter_replay(scenario, restart=sparse_restarts())), [name])[
                name
            ]
            found += same_bytes(
                label,
                name,
                "restart",
                "replay with a restart before every step",
                slow[name],
                again,
                sources,
            )
        if elsewhere is not None:
            what = f"replay in a subprocess under {_describe_environment()}"
            if isinstance(elsewhere, _Elsewhere):
                if not seeded[name].equal:
                    slow = slow or replay_bodies(scenario, names)
                    found += same_bytes(
                        label, name, "hash seed", what, slow[name], elsewhere.bodies(name), sources
                    )
            else:
                slow = slow or replay_bodies(scenario, names)
                found += same_bytes(
                    label, name, "hash seed", what, slow[name], elsewhere.get(name, []), sources
                )
        failures += found
        total, simulated, naive_cost = done.total, done.simulated, done.naive_cost
        rows.append(
            Row(
                scenario=label,
                name=scenario.name,
                file=scenario.file,
                provider=name,
                calls=calls,
                context_messages=len(contexts),
                prefix_stable=not any(f.check == "prefix" for f in found),
                bytes_reused=done.reused / total if total else 0.0,
                cached_share=simulated.cached_share,
                cost_ratio=simulated.cost_ratio,
                cost_vs_bound=done.bound.ratio(simulated.cost),
                cost_vs_naive=float(simulated.cost / naive_cost) if naive_cost else 1.0,
                switches=switches[name],
            )
        )
    return rows, [_located(failure, scenario, steps) for failure in failures]


def _switches(calls: Sequence[Call], name: str) -> tuple[str, ...]:
    """Where the replay that started on ``name`` sent ``calls`` to another model or
    provider (a ``switch`` step): each a cache reset, the new (provider, model)
    namespace holding nothing of the old one's."""
    out = []
    for before, call in itertools.pairwise(calls):
        if call.namespace(name) != before.namespace(name):
            old, new = "/".join(before.namespace(name)), "/".join(call.namespace(name))
            out.append(f"call {call.index}: {old} → {new}: cache namespace reset")
    return tuple(out)


def _located(failure: Failure, scenario: Scenario, steps: Mapping[int, int]) -> Failure:
    """``failure`` naming the step that made its call and the bundle it ran against."""
    step = steps.get(failure.call) if failure.call is not None else None
    return attrs.evolve(
        failure,
        step=failure.step if step is None else scenario.step_location(step),
        bundle=scenario.bundle_note,
    )


def _model(calls: Sequence[Call], provider: str) -> str | None:
    if not calls:
        return None
    try:
        return calls[0].request.settings_for(provider).model
    except KeyError:
        return None


def verify(
    paths: Sequence[Path],
    providers: Sequence[str] = ("all",),
    *,
    hash_seed: bool = True,
    tokenizer: str = "estimate",
    listener: Listener | None = None,
) -> Report:
    """Verify scenario files (or folders of them; none: the golden suite); ``listener``
    hears of each scenario as it starts and ends.

    Raises :class:`PrefixlockError` (:class:`SpecErrors` for a bad scenario) for input
    errors; invariant failures are in the report.
    """
    names = provider_names(providers)
    get_tokenizer(tokenizer)  # refuse an unknown or missing tokenizer before any work
    files = scenario_files(paths) if paths else golden_scenarios()
    if not files:
        raise UsageError("no scenarios: golden/*/scenario.yaml is empty; pass PATH")
    bundles: dict[Path, Bundle] = {}  # the scenarios of one spec root share its bundle
    scenarios = [load_scenario(path, bundles=bundles) for path in files]
    check_bundles(s.bundle for s in scenarios)
    tell = listener if listener is not None else Listener()
    tell.started([scenario_label(s.path) for s in scenarios], names)
    rows: list[Row] = []
    failures: list[Failure] = []
    with (
        tempfile.TemporaryDirectory(prefix="prefixlock-verify-") as tmp,
        ThreadPoolExecutor(max_workers=max(1, min(len(files), os.cpu_count() or 1))) as pool,
    ):
        jobs: list[Future[tuple[int, str]] | None] = [
            pool.submit(_replay_elsewhere, path, Path(tmp) / str(i)) if hash_seed else None
            for i, path in enumerate(files)
        ]
        for i, (scenario, job) in enumerate(zip(scenarios, jobs, strict=True)):
            tell.case_started(i, len(scenarios), scenario_label(scenario.path))
            elsewhere: _Elsewhere | None = None
            failed: list[Failure] = []
            if job is not None:
                code, stderr = job.result()
                if code != 0:
                    failed.append(
                        Failure(
                            scenario.file,
                            "hash seed",
                            f"the subprocess replay failed ({code}): {stderr}",
                            bundle=scenario.bundle_note,
                        )
                    )
                else:
                    elsewhere = _Elsewhere(
                        scenario.path,
                        _read_digests(Path(tmp) / str(i)),
                        Path(tmp) / f"{i}-bodies",
                    )
            found_rows, found = verify_scenario(
                scenario, scenario.replayed(names), elsewhere=elsewhere, tokenizer=tokenizer
            )
            failed += found
            tell.case_done(found_rows, failed)
            rows += found_rows
            failures += failed
    locks = stale_locks((s.bundle_root, s.bundle) for s in scenarios)
    return Report(tuple(rows), tuple(failures), get_tokenizer(tokenizer).name, tuple(locks))
