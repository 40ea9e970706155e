"""The canonical encoder's fast path gives exactly the bytes and refusals of the walk
that names each refusal's path."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prefixlock.core import canonical
from prefixlock.core.canonical import ENCODE_DEPTH, MAX_DEPTH, Ordered
from prefixlock.core.errors import CanonicalJSONError


class _Kind(StrEnum):
    A = "a\u00e9"


def _reference(value: Any, limit: int = ENCODE_DEPTH, nul: bool = True) -> str:
    """The walk alone (every node checked and converted), then json.dumps."""
    return json.dumps(
        canonical._check(value, "$", limit, 0, nul),
        ensure_ascii=False,
        allow_nan=False,
        separators=(",", ":"),
        sort_keys=False,
    )


_text = st.text(
    st.characters(codec=None, categories=None, blacklist_categories=()), max_size=6
) | st.sampled_from(["", "a", "\0", "\ud800", "é", "k\0", "\U0001f600", "\\", '"'])
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**66), max_value=2**66)
    | st.floats(allow_nan=True, allow_infinity=True)
    | _text
    | st.just(_Kind.A)
    | st.just(b"x")
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(_text, inner, max_size=4)
        | st.dictionaries(_text, inner, max_size=4).map(lambda d: Ordered(reversed(d.items())))
        | st.dictionaries(st.integers(0, 3), inner, max_size=2)
    ),
    max_leaves=12,
)


def _outcome(encode: Any, value: Any) -> tuple[str, Any]:
    try:
        return "ok", encode(value)
    except CanonicalJSONError as err:
        return "refused", (str(err), err.path, err.reason)


@settings(max_examples=400, deadline=None)
@given(_values)
def test_fast_path_encodes_and_refuses_exactly_as_the_walk(value: Any) -> None:
    assert _outcome(canonical.dumps, value) == _outcome(_reference, value)


@settings(max_examples=300, deadline=None)
@given(_values)
def test_fast_path_checks_exactly_as_the_walk(value: Any) -> None:
    for nul in (True, False):

        def check(v: Any, nul: bool = nul) -> None:
            canonical.check(v, strings_without_nul=not nul)

        def walk(v: Any, nul: bool = nul) -> None:
            _reference(v, MAX_DEPTH, nul)

        assert _outcome(check, value) == _outcome(walk, value)


@settings(max_examples=300, deadline=None)
@given(_values)
def test_check_encodable_refuses_exactly_as_the_walk(value: Any) -> None:
    def walk(v: Any) -> None:
        _reference(v)

    assert _outcome(canonical.check_encodable, value) == _outcome(walk, value)


def test_nesting_at_the_limits_is_refused_at_its_path_by_both() -> None:
    for limit, call in (
        (ENCODE_DEPTH, canonical.dumps),
        (ENCODE_DEPTH, canonical.check_encodable),
        (MAX_DEPTH, canonical.check),
    ):
        deep: Any = "x"
        for _ in range(limit):
            deep = [deep]
        call(deep)
        assert _outcome(call, [deep])[0] == "refused"
        assert _outcome(call, {"a": [deep]})[1][1].startswith("$.a[0]")


_texts = st.text(max_size=20) | st.sampled_from(['","type":"tool_result"}', '\\"', "é\u2028"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_texts, _texts, st.booleans()), min_size=1, max_size=3))
def test_tool_results_digest_from_the_message_bytes_is_the_request_digest(
    results: list[tuple[str, str, bool]],
) -> None:
    """Tool results' request digest (the retry identity stored in their record) is taken
    from the bytes their message was encoded to, and is exactly the digest of the parts'
    fields."""
    import attrs
    from prefixlock.core.messages import CanonicalMessage, MessageKind, Role, ToolResultPart
    from prefixlock.runtime.conversation import results_digest

    parts = tuple(ToolResultPart(c, o, e) for c, o, e in results)
    try:
        # results without images: the fields every record before images hashed
        fields = [attrs.asdict(p, filter=lambda a, _: a.name != "images") for p in parts]
        want = canonical.digest(fields)
    except CanonicalJSONError:
        return  # a lone surrogate: refused before either digest is taken
    message = CanonicalMessage.create("tool-results:x", MessageKind.TOOL_RESULT, Role.TOOL, parts)
    assert results_digest(message) == want


def test_check_encodable_takes_known_strings_as_encoded_and_checks_the_rest() -> None:
    canonical.check_encodable({"a": ["café", "é"]}, known=frozenset({"café", "é"}))
    with pytest.raises(CanonicalJSONError, match=r"^\$\.a\[1\]: string contains a lone"):
        canonical.check_encodable({"a": ["café", "\ud800"]}, known=frozenset({"café"}))
    # known says nothing about NUL, depth or types: those are still checked
    with pytest.raises(CanonicalJSONError, match="not a JSON value"):
        canonical.check_encodable({"a": {1.5j}}, known=frozenset({"café"}))
