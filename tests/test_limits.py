"""Every text input has a documented size limit, enforced with ``LimitError`` before
anything is held whole or saved (issue 43, finding 8; docs/limits.md): compaction
summaries, assistant text, tool arguments, instructions, whole responses and streams.
The turn and tool output limits are tested in test_boundaries.py."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import attrs
import pytest
from conv_helpers import CONV, REPO, example_bundle, user
from prefixlock.core.errors import LimitError, ResponseLimitError, SpecErrors
from prefixlock.core.limits import (
    MAX_INSTRUCTIONS_BYTES,
    MAX_RESPONSE_BYTES,
    MAX_RESPONSE_LINE_BYTES,
)
from prefixlock.core.messages import TextPart, ToolCallPart
from prefixlock.core.output import ModelOutput
from prefixlock.providers.readers import MODULES, reader
from prefixlock.providers.readers.base import EventStreamReader
from prefixlock.runtime.conversation import Conversation
from prefixlock.runtime.limits import Limits
from prefixlock.runtime.tools import ToolCall
from prefixlock.spec.build import build_bundle
from prefixlock.store.contract import MemoryStore

MIB = 1024 * 1024


def conversation(limits: Limits) -> tuple[Conversation, MemoryStore]:
    store = MemoryStore()
    return Conversation.open(store, example_bundle(), CONV, limits=limits), store


def test_a_manual_compaction_summary_over_the_limit_is_refused_before_saving() -> None:
    conv, _ = conversation(Limits(max_summary_bytes=10))
    conv.handle(user("u1"))
    conv.assistant("ok")
    seq = conv.history.seq
    with pytest.raises(LimitError) as err:
        conv.compact("é" * 6)
    assert str(err.value) == (
        "compact summary: the summary is 12 bytes, over the limit of 10 bytes "
        "(Limits.max_summary_bytes)"
    )
    assert conv.history.seq == seq
    conv.compact("0123456789")


def test_an_automatic_compaction_summary_over_the_limit_is_refused() -> None:
    conv, _ = conversation(Limits(max_summary_bytes=10))
    conv.handle(user("u1"))
    conv.assistant("ok")
    with pytest.raises(LimitError) as err:
        conv.handle(user("u2", compact={"summary": "x" * 11}))
    assert str(err.value) == (
        "event 'u2': compact.summary: the summary is 11 bytes, over the limit of 10 bytes "
        "(Limits.max_summary_bytes)"
    )


def test_assistant_text_over_the_limit_is_refused_in_assistant_and_record() -> None:
    conv, _ = conversation(Limits(max_assistant_text_bytes=10))
    conv.handle(user("u1"))
    seq = conv.history.seq
    message = (
        "assistant output: its text is 12 bytes, over the limit of 10 bytes "
        "(Limits.max_assistant_text_bytes)"
    )
    with pytest.raises(LimitError) as err:
        conv.assistant("0123456789AB")
    assert str(err.value) == message
    with pytest.raises(LimitError) as err:  # the text parts together
        conv.record(ModelOutput("anthropic", (TextPart("012345"), TextPart("6789AB"))))
    assert str(err.value) == message
    assert conv.history.seq == seq
    conv.assistant("0123456789")


def test_tool_arguments_over_the_limit_are_refused() -> None:
    conv, _ = conversation(Limits(max_tool_arguments_bytes=16))
    conv.handle(user("u1"))
    with pytest.raises(LimitError) as err:
        conv.assistant(tool_calls=[ToolCall("c1", "read_file", '{"path":"abcdefg"}')])
    assert str(err.value) == (
        "tool call 'c1': arguments are 18 bytes, over the limit of 16 bytes "
        "(Limits.max_tool_arguments_bytes)"
    )
    with pytest.raises(LimitError):
        conv.record(
            ModelOutput("anthropic", (ToolCallPart("c1", "read_file", '{"path":"abcdefg"}'),))
        )
    conv.assistant(tool_calls=[ToolCall("c1", "read_file", '{"path":"abcde"}')])


def test_the_default_limits_are_the_documented_ones() -> None:
    assert attrs.asdict(Limits()) == {
        "max_turn_bytes": 4 * MIB,
        "max_tool_output_bytes": 4 * MIB,
        "max_summary_bytes": 4 * MIB,
        "max_assistant_text_bytes": 4 * MIB,
        "max_tool_arguments_bytes": 4 * MIB,
    }
    assert (MAX_INSTRUCTIONS_BYTES, MAX_RESPONSE_BYTES, MAX_RESPONSE_LINE_BYTES) == (
        MIB,
        32 * MIB,
        16 * MIB,
    )


def test_docs_list_every_limit_with_its_default() -> None:
    text = (REPO / "docs" / "limits.md").read_text(encoding="utf-8")
    for field in attrs.fields(Limits):
        assert re.search(rf"`Limits\.{field.name}`.*\| 4 MiB", text), field.name
    for name, size in (
        ("MAX_INSTRUCTIONS_BYTES", "1 MiB"),
        ("MAX_RESPONSE_BYTES", "32 MiB"),
        ("MAX_RESPONSE_LINE_BYTES", "16 MiB"),
    ):
        assert re.search(rf"`{name}`.*\| {size}", text), name


def test_instructions_over_the_limit_are_a_build_error(tmp_path: Path) -> None:
    root = tmp_path / "spec"
    shutil.copytree(REPO / "rules", root / "rules")
    shutil.copytree(REPO / "prompt", root / "prompt")
    (root / "prompt" / "cursor" / "instructions.md").write_text("x" * (MAX_INSTRUCTIONS_BYTES + 1))
    with pytest.raises(SpecErrors) as err:
        build_bundle(root)
    assert str(err.value) == (
        f"prompt/cursor/instructions.md: the instructions are {MAX_INSTRUCTIONS_BYTES + 1} bytes, "
        f"over the limit of {MAX_INSTRUCTIONS_BYTES} bytes"
    )


def test_a_bundle_with_instructions_over_the_limit_opens_no_conversation() -> None:
    bundle = attrs.evolve(example_bundle(), instructions="y" * (MAX_INSTRUCTIONS_BYTES + 1))
    with pytest.raises(LimitError) as err:
        Conversation.open(MemoryStore(), bundle, CONV)
    assert str(err.value) == (
        f"bundle {bundle.digest}: the instructions are {MAX_INSTRUCTIONS_BYTES + 1} bytes, "
        f"over the limit of {MAX_INSTRUCTIONS_BYTES} bytes"
    )


@pytest.mark.parametrize("name", sorted(MODULES))
def test_a_whole_response_over_the_limit_is_refused_before_it_is_parsed(name: str) -> None:
    body = b" " * (MAX_RESPONSE_BYTES + 1)  # not even JSON: refused for its size first
    with pytest.raises(ResponseLimitError) as err:
        reader(name).parse_response(body)
    assert str(err.value) == (
        f"response: {MAX_RESPONSE_BYTES + 1} bytes, over {MAX_RESPONSE_BYTES} (the limit of a "
        "response) (do not retry as is)"
    )
    assert isinstance(err.value, LimitError)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_a_stream_over_the_limit_is_refused_at_the_chunk_that_passes_it(name: str) -> None:
    assert reader(name).stream_reader().max_bytes == MAX_RESPONSE_BYTES
    stream = reader(name).stream_reader()
    stream.max_bytes = 100
    if isinstance(stream, EventStreamReader):  # both Bedrock wires: AWS event-stream frames
        stream.feed(b"\0" * 11)  # the start of a frame's 12-byte prelude: held, not decoded
    else:  # SSE comments: read, nothing in them
        stream.feed(b":" * 59 + b"\n")
    with pytest.raises(ResponseLimitError) as err:
        stream.feed(b"\0" * 101)  # refused for its size before it is decoded
    assert str(err.value) == (
        "the stream is over 100 bytes (the limit of a response) (do not retry as is)"
    )
