"""The SSE decoder against the WHATWG event-stream rules it names
(https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation):
every line ending, at every split, at the end of the stream, and a leading BOM."""

from __future__ import annotations

import pytest
from prefixlock import ResponseError
from prefixlock.providers.readers.sse import Event, SSEDecoder
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
