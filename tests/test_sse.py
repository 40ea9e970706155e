"""The SSE decoder against the WHATWG event-stream rules it names
(https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation):
every line ending, at every split, at the end of the stream, and a leading BOM."""

from __future__ import annotations

import pytest
from prefixlock import ResponseError
from prefixlock.core.errors import LimitError, ResponseLimitError
from prefixlock.core.limits import MAX_RESPONSE_LINE_BYTES
from prefixlock.providers.readers.sse import MAX_LINE_BYTES, Event, SSEDecoder
from read_support import fixture, read_stream

STREAMS = [
    ("anthropic", "turn1.sse"),
    ("anthropic", "turn2.sse"),
    ("gemini", "turn2.sse"),
    ("openai-chat", "final.sse"),
    ("openai-responses", "tool_calls.sse"),
]


def decode(chunks: list[bytes]) -> list[Event]:
    decoder = SSEDecoder()
    events = [e for chunk in chunks for e in decoder.feed(chunk)]
    return events + decoder.close()


def test_a_cr_at_the_end_of_the_stream_ends_its_line() -> None:
    """ "a single U+000D CARRIAGE RETURN (CR) character not followed by a U+000A LINE
    FEED": at the end of the stream nothing follows it. Before, the last event of a
    CR-only stream was held back and the stream refused as truncated."""
    assert decode([b"data: x\r\r"]) == [Event("message", "x")]
    assert decode([b"data: x\r", b"\r"]) == [Event("message", "x")]
    assert decode([b"event: a\rdata: x\r\rdata: y\r\r"]) == [Event("a", "x"), Event("message", "y")]
    with pytest.raises(ResponseError, match=r"ended inside an event \(truncated\)"):
        decode([b"data: x\r"])  # one line end: the event is never dispatched


@pytest.mark.parametrize(("provider", "name"), STREAMS)
@pytest.mark.parametrize("ending", [b"\r", b"\r\n"])
def test_every_line_ending_reads_as_lf_at_every_split(
    provider: str, name: str, ending: bytes
) -> None:
    lf = fixture(provider, name)
    other = lf.replace(b"\n", ending)
    expected = read_stream(provider, lf)
    for at in range(0, len(other) + 1, 7):
        assert read_stream(provider, [other[:at], other[at:]]) == expected, at
    assert read_stream(provider, [other[i : i + 1] for i in range(len(other))]) == expected


def test_a_cr_only_error_stream_keeps_its_error() -> None:
    """A refusal that will not change on retry must not become a retry-safe truncation."""
    cr = fixture("anthropic", "error_invalid.sse").replace(b"\n", b"\r")
    with pytest.raises(ResponseError) as caught:
        read_stream("anthropic", cr)
    assert "invalid_request_error" in str(caught.value)
    assert caught.value.retry_safe is False


def test_one_leading_bom_is_ignored_in_any_chunking() -> None:
    """ "One leading U+FEFF BYTE ORDER MARK character must be ignored if any are
    present." Before, the first field read as "\\ufeffdata" and its event was lost:
    Gemini's first chunk, with the thought part, silently."""
    bom = b"\xef\xbb\xbf"
    assert decode([bom + b"event: first\ndata: x\n\n"]) == [Event("first", "x")]
    assert decode([bom[:1], bom[1:2], bom[2:] + b"data: x\n\n"]) == [Event("message", "x")]
    assert decode([bom[:2], bom[2:], b"data: x\n\n"]) == [Event("message", "x")]
    # only one, and only leading
    assert decode([bom + bom + b"data: x\n\n"]) == []
    assert decode([b"data: x\n\n" + bom + b"data: y\n\n"]) == [Event("message", "x")]
    stream = fixture("gemini", "turn2.sse")
    expected = read_stream("gemini", stream)
    assert read_stream("gemini", bom + stream) == expected
    assert read_stream("gemini", [bom[:1], bom[1:] + stream]) == expected


# -- linear work and a line cap (issue 43, finding 8) ------------------------------------
#
# The decoder once joined its buffer with each chunk and searched it from the start on
# every feed: one 32 MB event in 4 KiB chunks took 17 s. Its work is counted here (bytes
# searched, copied or decoded: ``SSEDecoder.scanned``), never timed.


def fed(decoder: SSEDecoder, data: bytes, size: int) -> list[Event]:
    return [e for i in range(0, len(data), size) for e in decoder.feed(data[i : i + size])]


def test_one_long_event_in_small_chunks_takes_linear_work() -> None:
    value = b"x" * (2 * 1024 * 1024)
    stream = b"data: " + value + b"\n\n"
    decoder = SSEDecoder()
    assert fed(decoder, stream, 512) == [Event("message", value.decode())]
    assert decoder.close() == []
    # each byte: copied in once, searched once, decoded once (quadratic: ~4 GB here)
    assert decoder.scanned <= 3 * len(stream)


@pytest.mark.parametrize("ending", [b"\n", b"\r", b"\r\n"])
def test_many_lines_in_one_chunk_take_linear_work(ending: bytes) -> None:
    stream = (b"data: y" + ending + ending) * 50_000
    decoder = SSEDecoder()
    events = fed(decoder, stream, len(stream)) + decoder.close()
    assert events == [Event("message", "y")] * 50_000
    # a search for "\r" alone once scanned to the end of the chunk for every LF line
    assert decoder.scanned <= 3 * len(stream)


def test_a_cr_waiting_for_its_lf_is_not_searched_again_and_again() -> None:
    stream = b"data: " + b"z" * 100_000 + b"\r\n\r\n"
    decoder = SSEDecoder()
    assert fed(decoder, stream, 7) == [Event("message", "z" * 100_000)]
    assert decoder.scanned <= 3 * len(stream)


def test_a_line_past_the_cap_is_refused_as_soon_as_it_passes_it() -> None:
    decoder = SSEDecoder(max_line=1000)
    assert decoder.feed(b"data: " + b"a" * 900) == []
    with pytest.raises(ResponseLimitError) as caught:
        decoder.feed(b"a" * 200)  # no line end yet: refused before the line is whole
    assert str(caught.value) == (
        "the event stream has a line of more than 1000 bytes (the limit of a response line) "
        "(do not retry as is)"
    )
    assert isinstance(caught.value, LimitError)
    with pytest.raises(ResponseLimitError):
        SSEDecoder(max_line=1000).feed(b"data: " + b"a" * 1000 + b"\n")  # whole, still over


def test_an_event_joining_lines_past_the_cap_is_refused() -> None:
    decoder = SSEDecoder(max_line=1000)
    with pytest.raises(ResponseLimitError) as caught:
        decoder.feed(b"data: " + b"b" * 400 + b"\n" + (b"data: " + b"b" * 400 + b"\n") * 2)
    assert str(caught.value) == (
        "the event stream has an event of more than 1000 bytes of data (the limit of a "
        "response line) (do not retry as is)"
    )


def test_the_default_line_cap_is_the_documented_one() -> None:
    assert SSEDecoder().max_line == MAX_LINE_BYTES == MAX_RESPONSE_LINE_BYTES == 16 * 1024 * 1024
