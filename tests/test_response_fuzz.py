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
