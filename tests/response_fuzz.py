"""A seeded response fuzzer for the six readers (test-only; issue 43, finding 4).

Each mutation takes one recorded fixture of a provider -- a whole JSON response or a
stream (SSE, or Bedrock's event-stream frames; a ``chunk`` frame's ``bytes`` blob is
decoded, so that mutations reach the Anthropic event inside it as well as the blob
itself) -- changes one thing, and reads it:

* in a JSON value (a whole body, or one event of a stream): a member deleted or renamed,
  a value replaced by one of another type or by a near miss (``""``, ``" "``, a string
  that is not base64, a number beyond 64 bits, a ``type`` another block has), a list
  item dropped or repeated;
* in a stream: an event dropped, repeated or swapped with the next, the stream cut; a
  frame's ``:event-type`` replaced (the framed wires).

Then it judges what the reader did:

``typed``
    refused with a :class:`ResponseError` (nothing to record);
``accepted``
    an output that a conversation records and whose next request serializes and passes
    the SDK judge (``tests/sdk_judge.py``) and the service rules; or an output with no
    part to record (a blocked prompt: ``record()`` refuses it with its documented
    :class:`HistoryError`, nothing is stored);
``poisoned``
    an output that ``record()`` refuses, or that is recorded and then makes the next
    request fail to serialize or be refused by the judge: what the readers must never
    return;
``crashed``
    any other exception, from the reader or from ``record()``.

``altered`` (of the accepted): a stream whose events were dropped, repeated, swapped or
cut, read into an output other than the unchanged stream's -- a change that no check of
a wire without sequence numbers can see (docs/providers.md, "Stream integrity").

``python tests/response_fuzz.py [MUTATIONS] [SEED]`` prints the counts per provider.
"""

from __future__ import annotations

import base64
import copy
import functools
import json
import os
import random
import sys
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
from conv_helpers import example_bundle, user
from prefixlock import Conversation, ToolResult, providers
from prefixlock.core.errors import HistoryError, PrefixlockError, ResponseError
from prefixlock.core.output import ModelOutput
from prefixlock.providers.readers import reader
from prefixlock.providers.readers.eventstream import encode_frame
from prefixlock.spec.bundle import Bundle
from prefixlock.store.contract import MemoryStore
from sdk_judge import assert_valid

DATA = Path(__file__).parent / "data" / "responses"
#: Every wire the package ships: a new one needs its fixtures here to pass.
PROVIDERS = providers.NAMES
#: The wires whose streams are AWS event-stream frames (the rest: SSE).
FRAMED = frozenset({"bedrock-anthropic", "bedrock-converse"})
OUTCOMES = ("typed", "accepted", "poisoned", "crashed")

#: (event name or None, data text) of an SSE stream; (event type, payload) of Bedrock's.
Event = tuple[str | None, Any]


# -- inputs ---------------------------------------------------------------------------


def sse_events(data: bytes) -> list[Event]:
    """The events of a fixture stream (``\\n`` lines); data parsed where it is JSON."""
    events: list[Event] = []
    for block in data.decode("utf-8").split("\n\n"):
        name, lines = None, []
        for line in block.split("\n"):
            field, _, value = line.partition(": ")
            if field == "event":
                name = value
            elif field == "data":
                lines.append(value)
        if lines:
            text = "\n".join(lines)
            try:
                events.append((name, json.loads(text)))
            except ValueError:
                events.append((name, text))
    return events


def sse_bytes(events: list[Event]) -> bytes:
    out = []
    for name, data in events:
        head = f"event: {name}\n" if name is not None else ""
        text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
        out.append(f"{head}data: {text}\n\n")
    return "".join(out).encode("utf-8", "surrogatepass")


def open_blob(payload: Any) -> Any:
    """A frame payload with its ``bytes`` blob (base64 of JSON: a Bedrock ``chunk``'s
    Anthropic event) decoded, so that mutations reach the event inside."""
    if isinstance(payload, dict) and isinstance(payload.get("bytes"), str):
        return {**payload, "bytes": json.loads(base64.b64decode(payload["bytes"]))}
    return payload


def close_blob(payload: Any) -> Any:
    """``open_blob`` undone: a ``bytes`` member that is not a string (the decoded event,
    mutated or not) is sent as base64 of its JSON; a string (a mutation put it there) as
    it is. An unchanged event goes back to the bytes of its fixture (compact JSON)."""
    if isinstance(payload, dict) and "bytes" in payload and not isinstance(payload["bytes"], str):
        text = json.dumps(payload["bytes"], ensure_ascii=False, separators=(",", ":"))
        blob = base64.b64encode(text.encode("utf-8", "surrogatepass")).decode("ascii")
        return {**payload, "bytes": blob}
    return payload


def frames_bytes(events: list[Event]) -> bytes:
    headers = {":content-type": "application/json", ":message-type": "event"}
    return b"".join(
        encode_frame(
            {**headers, ":event-type": str(name)}, json.dumps(close_blob(payload)).encode()
        )
        for name, payload in events
    )


def stream_bytes(provider: str, events: list[Event]) -> bytes:
    return frames_bytes(events) if provider in FRAMED else sse_bytes(events)


@functools.cache
def inputs(provider: str) -> tuple[list[Any], list[list[Event]]]:
    """(whole JSON bodies, streams as event lists) of a provider's fixtures."""
    folder = DATA / provider
    wholes, streams = [], []
    for path in sorted(folder.iterdir()):
        if path.name.endswith(".stream.json"):
            stream = json.loads(path.read_text())
            streams.append([(e["event"], open_blob(e["payload"])) for e in stream])
        elif path.suffix == ".json":
            wholes.append(json.loads(path.read_text()))
        elif path.suffix == ".sse":
            streams.append(sse_events(path.read_bytes()))
    return wholes, streams


@functools.cache
def type_names(provider: str) -> tuple[str, ...]:
    """Every ``type`` value of the provider's fixtures, and a few made up."""
    found: set[str] = {"bogus", "text", "tool_use", "thinking"}
    wholes, streams = inputs(provider)

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "type" and isinstance(item, str):
                    found.add(item)
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(wholes)
    walk([data for stream in streams for _, data in stream])
    return tuple(sorted(found))


# -- mutations ------------------------------------------------------------------------

#: Values of another type or near misses, put in place of a value.
REPLACEMENTS: tuple[Any, ...] = (
    None,
    True,
    0,
    -1,
    2**70,
    1.5,
    "",
    " ",
    "\n\t",
    "x",
    "not base64!",
    "\u2028",
    [],
    [None],
    {},
    {"type": "bogus"},
)


def paths(value: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path below ``value`` (not the root itself)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*at, key)
            yield from paths(item, (*at, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield (*at, i)
            yield from paths(item, (*at, i))


def mutate_value(value: Any, rng: random.Random, provider: str) -> tuple[Any, str]:
    """``value`` (a copy) with one change, and what it was."""
    value = copy.deepcopy(value)
    found = list(paths(value))
    if not found:
        return rng.choice(REPLACEMENTS), "root replaced"
    path = rng.choice(found)
    parent = value
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    old = parent[last]
    where = "$" + "".join(f"[{p!r}]" for p in path)
    ops = ["replace", "replace", "delete"]
    if isinstance(parent, dict):
        ops.append("rename")
    if isinstance(parent, list):
        ops.append("repeat")
    if last == "type" and isinstance(old, str):
        ops += ["retype", "retype", "retype"]
    if isinstance(old, str):
        ops += ["blank", "suffix"]
    op = rng.choice(ops)
    if op == "replace":
        parent[last] = copy.deepcopy(rng.choice(REPLACEMENTS))
    elif op == "delete":
        del parent[last]
    elif op == "rename":
        parent[f"{last}_x"] = parent.pop(last)
    elif op == "repeat":
        parent.insert(last, copy.deepcopy(old))
    elif op == "retype":
        parent[last] = rng.choice(type_names(provider))
    elif op == "blank":
        parent[last] = rng.choice(["", " ", "  \n"])
    else:
        parent[last] = old + rng.choice(["!", "=", " ", "\u00e9", "A"])
    return value, f"{op} {where}"


def mutate_stream(
    events: list[Event], rng: random.Random, provider: str
) -> tuple[list[Event], str]:
    events = list(events)
    ops = ["event", "event", "event", "drop", "repeat", "swap", "cut"]
    if provider in FRAMED:
        ops.append("name")  # a frame's :event-type
    op = rng.choice(ops)
    i = rng.randrange(len(events))
    if op == "name":
        names = sorted({str(name) for name, _ in events} | {"bogus", "exception"})
        events[i] = (rng.choice(names), events[i][1])
        return events, f"event {i}: :event-type {events[i][0]!r}"
    if op == "event" and not isinstance(events[i][1], str):
        name, data = events[i]
        data, what = mutate_value(data, rng, provider)
        events[i] = (name, data)
        return events, f"event {i}: {what}"
    if op == "drop":
        del events[i]
    elif op == "repeat":
        events.insert(i, events[i])
    elif op == "swap" and i + 1 < len(events):
        events[i], events[i + 1] = events[i + 1], events[i]
    else:
        events = events[:i]
        op = "cut"
    return events, f"{op} event {i}"


# -- judging --------------------------------------------------------------------------


@functools.cache
def bundle(provider: str) -> Bundle:
    """The example bundle with the answering provider's settings alone: a reader knows
    its own wire, so a refusal by another configured provider (a call id Bedrock's
    pattern refuses in a Gemini output) is the conversation's admission at work, not a
    reader's miss."""
    whole = example_bundle()
    return attrs.evolve(whole, settings=tuple(s for s in whole.settings if s.provider == provider))


def chunks(data: bytes, rng: random.Random) -> Iterator[bytes]:
    i = 0
    while i < len(data):
        n = rng.randint(1, 400)
        yield data[i : i + n]
        i += n


def stream_output(
    provider: str, events: list[Event], pieces: list[bytes] | None = None
) -> ModelOutput:
    data = stream_bytes(provider, events)
    reading = reader(provider).stream_reader()
    for piece in [data] if pieces is None else pieces:
        reading.feed(piece)
    return reading.result()


@functools.cache
def original(provider: str, source: int) -> ModelOutput | None:
    """The output of stream ``source`` unchanged (None: it is refused, an error stream)."""
    try:
        return stream_output(provider, inputs(provider)[1][source])
    except ResponseError:
        return None


def read(
    provider: str, rng: random.Random
) -> tuple[Callable[[], ModelOutput], str, ModelOutput | None]:
    """One mutated input of ``provider``: a function that reads it, what it is, and, for a
    stream whose events were dropped, repeated, swapped or cut, the unchanged stream's
    output (an accepted output that differs from it is a change no check saw)."""
    wholes, streams = inputs(provider)
    if rng.random() < 0.5 and wholes:
        source = rng.randrange(len(wholes))
        value, what = mutate_value(wholes[source], rng, provider)
        body = json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
        return lambda: reader(provider).parse_response(body), f"whole {source}: {what}", None
    source = rng.randrange(len(streams))
    events, what = mutate_stream(streams[source], rng, provider)
    data = stream_bytes(provider, events)
    pieces = list(chunks(data, rng))
    unchanged = None if what.startswith("event") else original(provider, source)
    return (
        lambda: stream_output(provider, events, pieces),
        f"stream {source}: {what}",
        unchanged,
    )


def judge_output(provider: str, output: ModelOutput) -> str | None:
    """Why recording ``output`` poisons a conversation (None: it does not)."""
    wire = providers.get(provider)
    conv = Conversation.open(MemoryStore(), bundle(provider), "conv-1")
    conv.handle(user("u1"))
    try:
        conv.record(output)
    except HistoryError as err:
        if not output.parts or "only empty or whitespace-only text" in str(err):
            return None  # nothing to record: refused, as documented, nothing stored
        return f"record() refused it: {err}"
    except PrefixlockError as err:
        return f"record() refused it: {type(err).__name__}: {err}"
    results = [ToolResult(call.call_id, "ok") for call in output.tool_calls]
    try:
        request = conv.tool_results(results) if results else conv.handle(user("u2", "go on"))
        wire.serialize(request)
        assert_valid(provider, wire.body(request))
    except (PrefixlockError, AssertionError) as err:
        return f"the next request is refused: {type(err).__name__}: {err}"
    return None


def run_one(provider: str, rng: random.Random) -> tuple[str, str]:
    """(outcome, detail) of one mutation; the detail of an accepted stream whose events
    were dropped or repeated and whose output changed starts with ``altered``."""
    reading, what, unchanged = read(provider, rng)
    try:
        output = reading()
    except ResponseError:
        return "typed", what
    except Exception:  # what the fuzzer looks for
        return "crashed", f"{what}\n{traceback.format_exc(limit=-3)}"
    try:
        why = judge_output(provider, output)
    except Exception:  # a crash in record()
        return "crashed", f"{what} (in record)\n{traceback.format_exc(limit=-3)}"
    if why is not None:
        return "poisoned", f"{what}: {why}"
    if unchanged is not None and output != unchanged:
        return "accepted", f"altered: {what}"
    return "accepted", what


def fuzz(provider: str, mutations: int, seed: int = 0) -> tuple[Counter[str], list[str]]:
    """Counts of each outcome over ``mutations`` mutations, and the details of the
    poisoned and crashed ones."""
    rng = random.Random(f"{provider}:{seed}")
    counts: Counter[str] = Counter({outcome: 0 for outcome in OUTCOMES})
    bad: list[str] = []
    for _ in range(mutations):
        outcome, detail = run_one(provider, rng)
        counts[outcome] += 1
        counts["altered"] += detail.startswith("altered")
        if outcome in ("poisoned", "crashed"):
            bad.append(f"{outcome}: {detail}")
    return counts, bad


def main(argv: list[str]) -> None:
    mutations = int(argv[1]) if len(argv) > 1 else 2000
    seed = int(argv[2]) if len(argv) > 2 else 0
    columns = (*OUTCOMES, "altered")
    print(f"| provider | {' | '.join(columns)} |")
    print(f"| --- |{' --- |' * len(columns)}")
    for provider in PROVIDERS:
        counts, bad = fuzz(provider, mutations, seed)
        print(f"| {provider} | {' | '.join(str(counts[o]) for o in columns)} |", flush=True)
        for line in bad if os.environ.get("FUZZ_ALL") else bad[:5]:
            print("   ", line.replace("\n", "\n    "), file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv)
