"""The response fuzzer in the suite (issue 43, finding 4; the fuzzer: response_fuzz.py).

Seeded and bounded: ``PREFIXLOCK_FUZZ_MUTATIONS`` mutations per provider (200 by default;
``PREFIXLOCK_FUZZ_SEED`` picks another seed). Every mutated response is either refused with
a ``ResponseError`` or read into an output that a conversation records and whose next
request serializes and passes the SDK judge: none is poisoned, none crashes."""

from __future__ import annotations

import os

import pytest
from response_fuzz import OUTCOMES, PROVIDERS, fuzz, run_one

MUTATIONS = int(os.environ.get("PREFIXLOCK_FUZZ_MUTATIONS", "200"))
SEED = int(os.environ.get("PREFIXLOCK_FUZZ_SEED", "0"))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_no_mutated_response_poisons_a_conversation_or_crashes(provider: str) -> None:
    counts, bad = fuzz(provider, MUTATIONS, SEED)
    assert bad == []
    assert sum(counts[o] for o in OUTCOMES) == MUTATIONS
    # the mutations reach both sides: some are refused, some still read
    assert counts["typed"] > 0 and counts["accepted"] > 0


def test_the_judge_of_the_fuzzer_sees_a_poisoned_output() -> None:
    """The fuzzer's own check: an output that the next request cannot carry (a thinking
    block without its signature, built past the reader) is judged poisoned."""
    import random

    import response_fuzz
    from prefixlock.core.messages import OpaquePart
    from prefixlock.core.output import ModelOutput

    bad = ModelOutput(
        "anthropic",
        (OpaquePart("anthropic", '{"thinking":"hm","type":"thinking"}'),),
    )
    why = response_fuzz.judge_output("anthropic", bad)
    assert why is not None and "missing required key 'signature'" in why
    outcome, _ = run_one("anthropic", random.Random("anthropic:0"))
    assert outcome in OUTCOMES


def test_an_unchanged_bedrock_anthropic_stream_goes_out_as_its_fixture_frames() -> None:
    """The fuzzer opens each ``chunk`` blob to mutate the Anthropic event inside; closed
    again unchanged, every frame is the fixture's, byte for byte."""
    import json

    import response_fuzz
    from prefixlock.providers.readers.eventstream import encode_frame

    headers = {":content-type": "application/json", ":message-type": "event"}
    folder = response_fuzz.DATA / "bedrock-anthropic"
    paths = sorted(folder.glob("*.stream.json"))
    streams = response_fuzz.inputs("bedrock-anthropic")[1]
    assert len(paths) == len(streams) == 3
    for path, events in zip(paths, streams, strict=True):
        recorded = json.loads(path.read_text())
        assert events[0][1]["bytes"]["type"] == "message_start"  # the blob is open
        assert response_fuzz.frames_bytes(events) == b"".join(
            encode_frame({**headers, ":event-type": e["event"]}, json.dumps(e["payload"]).encode())
            for e in recorded
        )


def test_bedrock_anthropic_mutations_reach_the_event_the_blob_and_the_frame() -> None:
    import random

    import response_fuzz

    rng = random.Random("blob")
    stream = response_fuzz.inputs("bedrock-anthropic")[1][1]
    whats = [response_fuzz.mutate_stream(stream, rng, "bedrock-anthropic")[1] for _ in range(300)]
    assert any("$['bytes']['" in w for w in whats)  # inside the Anthropic event
    assert any(w.endswith("$['bytes']") for w in whats)  # the blob itself
    assert any(":event-type" in w for w in whats)  # the frame's header
    assert not any(
        ":event-type" in w
        for w in [
            response_fuzz.mutate_stream(s, rng, "anthropic")[1]
            for s in response_fuzz.inputs("anthropic")[1]
            for _ in range(50)
        ]
    )


def test_the_bedrock_anthropic_fixtures_read_as_bedrock_sends_them() -> None:
    """Bedrock's message and tool ids (``msg_bdrk_``, ``toolu_bdrk_``); each stream reads
    into its whole body's output."""
    import json

    import response_fuzz
    from prefixlock.providers.readers import reader

    wholes, _ = response_fuzz.inputs("bedrock-anthropic")
    assert [w["id"][:9] for w in wholes] == ["msg_bdrk_"] * 3
    ids = [b["id"] for w in wholes for b in w["content"] if b["type"] == "tool_use"]
    assert ids and all(i.startswith("toolu_bdrk_") for i in ids)
    for source, whole in enumerate(wholes):
        output = reader("bedrock-anthropic").parse_response(json.dumps(whole).encode())
        assert output.parts and response_fuzz.original("bedrock-anthropic", source) == output
