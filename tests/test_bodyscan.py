"""Successive bodies compared and parsed by what changed (``core.fragments``,
``core.bodyscan``): every answer is the one the joined bytes and ``canonical.loads``
give, whatever the fragmentation."""

from __future__ import annotations

import hashlib
import itertools
import random
from typing import Any

import attrs
import pytest
from prefixlock.core import bodyscan, canonical
from prefixlock.core.bodyscan import HistoryScanner, Scan
from prefixlock.core.fragments import (
    Body,
    RunningDigest,
    common_body_prefix,
    common_prefix,
    shared_fragments,
)


def _naive_prefix(a: bytes, b: bytes) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _split(data: bytes, rng: random.Random) -> Body:
    cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(0, 6))))
    bounds = [0, *cuts, len(data)]
    return Body(tuple(data[a:b] for a, b in itertools.pairwise(bounds)), len(data))


def test_common_prefix_is_the_bytewise_one() -> None:
    rng = random.Random(7)
    for _ in range(300):
        a = bytes(rng.choice(b"ab") for _ in range(rng.randint(0, 40)))
        b = a[: rng.randint(0, len(a))] + bytes(rng.choice(b"ab") for _ in range(rng.randint(0, 9)))
        assert common_prefix(a, b) == _naive_prefix(a, b)
        start = rng.randint(0, len(a))
        assert common_prefix(a, b, start, start) == _naive_prefix(a[start:], b[start:])
        body_a, body_b = _split(a, rng) if a else Body.of(a), _split(b, rng) if b else Body.of(b)
        assert common_body_prefix(body_a, body_b) == _naive_prefix(a, b)
        assert body_a.tail(start) == a[start:]
        after = body_a.after(start)
        assert after.join() == a[start:] and after.size == len(a) - start
        assert after.parts[1:] == body_a.parts[len(body_a.parts) - len(after.parts) + 1 :]


def test_shared_fragments_compares_values_not_identity() -> None:
    x, y = b"xx", b"yy"
    assert shared_fragments((x, y, b"z"), (x, y, b"w")) == 2
    assert shared_fragments((x, y), (bytes(x), bytes(y), b"q")) == 2  # equal, not the same
    many = tuple(bytes([i % 256]) * 3 for i in range(50))
    assert shared_fragments(many, (*many[:20], b"?", *many[21:])) == 20
    assert shared_fragments((), many) == 0


def test_running_digest_is_the_sha256_of_each_joined_body() -> None:
    rng = random.Random(3)
    digest = RunningDigest()
    parts: list[bytes] = [b"{"]
    for step in range(60):
        if step % 17 == 16:  # something early changes: hashed from the start again
            parts[0] = b"{" + bytes([step])
        parts = parts[: max(1, len(parts) - rng.randint(0, 2))]
        parts += [bytes(rng.randrange(256) for _ in range(rng.randint(0, 5))) for _ in range(3)]
        body = Body(tuple(parts), sum(map(len, parts)))
        assert digest.hexdigest(body) == hashlib.sha256(body.join()).hexdigest()


def _body(messages: list[Any], **frame: Any) -> bytes:
    """``{"model", <frame>, "messages", "end"}`` in this order (a wire's fixed order)."""
    members = [("model", "m"), *frame.items(), ("messages", messages), ("end", 1)]
    return canonical.dumpb(canonical.Ordered(members))


def _scan_all(bodies: list[bytes], rng: random.Random | None = None) -> list[Scan | None]:
    scanner = HistoryScanner("messages")
    return [scanner.scan(_split(b, rng) if rng else Body.of(b)) for b in bodies]


def test_a_tail_append_parses_only_the_new_items() -> None:
    first = [{"role": "user", "content": "é" * 3}, {"role": "assistant", "content": "ok"}]
    grown = [*first, {"role": "user", "content": "ß more"}]
    changed = [first[0], {"role": "assistant", "content": "no"}]
    bodies = [_body(first), _body(grown), _body(changed), _body(changed, extra=[1, 2])]
    scans = _scan_all(bodies)
    assert all(scan is not None for scan in scans)
    one, two, three, four = scans
    assert one is not None and two is not None and three is not None and four is not None
    assert (one.common, one.count, list(one.items)) == (0, 2, first)
    # The last old item was followed by "]", now by ",": it is read again (a marker on
    # it may have moved), with everything after it.
    assert (two.common, two.count, list(two.items)) == (1, 3, grown[1:])
    assert two.head_same and two.trail_same and two.old_items() == first[1:]
    assert (three.common, three.count, list(three.items)) == (1, 2, changed[1:])
    assert three.old_items() == grown[1:]  # the previous body's items after the common one
    assert three.common_bytes == _naive_prefix(bodies[1], bodies[2])
    assert not four.head_same and four.common == 2 and four.items == ()  # only the head moved
    assert four.frame == {"model": "m", "extra": [1, 2], "end": 1}
    assert four.members == ("model", "extra", "messages", "end")
    assert four.last == changed[-1]


def test_scans_are_the_same_whatever_the_fragments() -> None:
    rng = random.Random(11)
    bodies = []
    messages: list[Any] = []
    for i in range(25):
        messages = messages[: max(0, len(messages) - rng.randint(0, 1))]
        messages.append({"role": "user", "content": f"{'ü' * (i % 3)}m{i}", "n": i / 4})
        bodies.append(_body(messages, tools=[{"name": f"t{i // 10}"}]))

    def seen(scan: Scan | None) -> tuple[Any, ...]:
        assert scan is not None
        old = scan.old_body.join() if scan.old_body is not None else None
        return (attrs.evolve(scan, old_body=None), old, scan.old_items())

    assert list(map(seen, _scan_all(bodies, rng))) == list(map(seen, _scan_all(bodies)))
    for scan, body in zip(_scan_all(bodies), bodies, strict=True):
        assert scan is not None
        value = canonical.loads(body)
        assert value["messages"][scan.common :] == list(scan.items)
        assert {k: v for k, v in value.items() if k != "messages"} == scan.frame


@pytest.mark.parametrize(
    "body",
    [
        b'{"model": "m", "messages": []}',  # whitespace
        b'{"model":"m","messages":[],"model":"n"}',  # a duplicate member
        b'{"model":"m","messages":[{"a":1,"a":2}]}',  # a duplicate key inside
        b'{"model":"m","messages":[NaN]}',
        b'{"model":"m"}',  # no history list
        b'{"messages":{}}',
        b"[1]",
        b'{"messages":[]} ',
    ],
)
def test_what_the_scanner_does_not_read_scans_as_none(body: bytes) -> None:
    scanner = HistoryScanner("messages")
    assert scanner.scan(Body.of(_body([1, 2]))) is not None
    assert scanner.scan(Body.of(body)) is None
    again = scanner.scan(Body.of(_body([1, 2])))  # read whole again
    assert again is not None and again.common == 0 and again.old_body is None


def test_a_long_rescan_holds_one_item_at_a_time() -> None:
    """When most of the history must be read again (a naive harness's system prompt
    changed, the first item), the scan keeps where each item is, not the items: they
    are decoded as they are read, so reading a long history costs one item's memory."""
    import tracemalloc

    items = [
        {"role": "user", "content": [{"text": f"w{i}.{j}"} for j in range(30)]} for i in range(600)
    ]
    first = _body([{"role": "system", "content": "a"}, *items])
    second = _body([{"role": "system", "content": "b"}, *items])
    whole = canonical.loads(second)["messages"]
    scanner = HistoryScanner("messages")
    assert scanner.scan(Body.of(first)) is not None
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        scan = scanner.scan(Body.of(second))
        assert scan is not None
        read = sum(1 for _ in scan.items)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert (scan.common, scan.count, read, len(scan.items)) == (0, 601, 601, 601)
    assert list(scan.items) == whole and scan.items[5] == whole[5] and scan.items[-1] == whole[-1]
    assert scan.items == tuple(whole) and scan.last == whole[-1]
    # Decoded, this history takes about 10x the body's bytes; the scan's own peak stays
    # within the body's tail as bytes, a window of it as text and the items' offsets
    # (1.7x here; 2.0x when the tail was also decoded whole).
    assert peak < len(second) * 1.85, (peak, len(second))


def test_a_changed_head_is_read_from_the_first_fragment_alone() -> None:
    """A provider's body is its frame opening (the whole head), one fragment per item,
    the closing. When the head changes (a mode's tools), the scan reads the head from
    the first fragment and compares the histories fragment by fragment: it joins
    neither body, so its memory follows the head and the number of items (their
    offsets), not the bytes of the conversation."""
    import tracemalloc

    items = [canonical.dumpb({"role": "user", "content": f"w{i}" * 100}) for i in range(800)]
    fragments = [item if i == 0 else b"," + item for i, item in enumerate(items)]

    def body(tools: str) -> Body:
        opening = canonical.dumpb(canonical.Ordered([("model", "m"), ("tools", tools)]))
        parts = (opening[:-1] + b',"messages":[', *fragments, b'],"end":1}')
        return Body(parts, sum(map(len, parts)))

    first, second = body("a"), body("bb")
    expected = _scan_all([first.join(), second.join()])[1]
    scanner = HistoryScanner("messages")
    assert scanner.scan(first) is not None
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        scan = scanner.scan(second)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert scan is not None and expected is not None
    assert (scan.head_same, scan.common, scan.count) == (False, 800, 800)
    assert scan.frame == {"model": "m", "tools": "bb", "end": 1} == expected.frame
    assert list(scan.items) == list(expected.items) and scan.common == expected.common
    assert peak < second.size // 8, (peak, second.size)  # joining: over twice the size


@pytest.mark.parametrize("window", [1, 5, 16, 61])
def test_a_long_history_read_a_window_at_a_time_scans_as_one_text(
    window: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past LAZY_TEXT bytes the history is decoded a window at a time: items, numbers
    and multi-byte characters cut by a window's end are read again from the next one,
    and every scan is the one the whole text gives (items, offsets, frame, errors)."""
    rng = random.Random(window)
    bodies: list[bytes] = []
    messages: list[Any] = []
    for i in range(40):
        messages = messages[: max(0, len(messages) - rng.randint(0, 2))]
        text = "".join(rng.choice(["a", "é", "€", "😀", '"', "\\", " "]) for _ in range(i % 9))
        messages.append({"role": "user", "content": [{"text": text, "n": i * 1013, "f": i / 3}]})
        bodies.append(_body(messages, tools=[{"name": f"t{i // 8}"}], top=[i % 2, True]))
    broken = [*bodies[:5], bodies[5][:-3] + b"]}", b'{"model":"m","messages":[1,2', *bodies[5:]]

    def scans() -> list[tuple[Any, ...]]:
        out = []
        for sequence in (bodies, broken):
            for scan in _scan_all(sequence, random.Random(3)):
                if scan is None:
                    out.append(None)
                    continue
                old = scan.old_body.join() if scan.old_body is not None else None
                fields = attrs.evolve(scan, old_body=None, items=list(scan.items))
                out.append((fields, old, scan.old_items(), list(scan.items[1:3])))
        return out

    expected = scans()
    monkeypatch.setattr(bodyscan, "LAZY_TEXT", 0)
    monkeypatch.setattr(bodyscan, "_WINDOW", window)
    assert scans() == expected
    for scan, body in zip(_scan_all(bodies), bodies, strict=True):  # and as json.loads reads
        assert scan is not None
        assert list(scan.items) == canonical.loads(body)["messages"][scan.common :]
    assert None in expected  # the broken bodies are refused both ways
