"""bedrock-anthropic with ``options: {endpoint: mantle}``: Claude's Messages API on
Amazon Bedrock's ``bedrock-mantle`` endpoint, the path AWS and Anthropic document for
newer Claude models.

The body is the ``anthropic`` wire's byte for byte (``model`` first, a Bedrock model
id); the call is ``POST /anthropic/v1/messages`` with the ``anthropic-version`` header,
signed with SigV4 for the service ``bedrock-mantle`` or sent with a Bedrock API key as
``Authorization: Bearer``; the answer is the Messages API's JSON or SSE. Everything
runs against a stand-in server on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from conv_helpers import CONTEXT_A
from http_support import (
    API_KEY,
    AWS_KEY_ID,
    REGION,
    Waits,
    botocore_signature,
    client,
    expected,
    pieces,
    run,
)
from prefixlock.core import canonical
from prefixlock.core.errors import SerializationError, UsageError
from prefixlock.core.messages import OpaquePart
from prefixlock.core.model import ModelRequest
from prefixlock.http import CallError, Client, ProviderError, Retry
from prefixlock.providers import get
from prefixlock.providers.readers import reader
from prefixlock.providers.transport import HttpRequest
from prefixlock.runtime.conversation import Conversation
from prefixlock.runtime.tools import ToolResult
from prefixlock.spec.build import build_bundle
from prefixlock.store.contract import MemoryStore
from provider_cases import (
    CTX,
    RT,
    image,
    long_text,
    opaque,
    providers_yaml_errors,
    refused,
    request,
    simple,
    spec_with_providers,
    tool_loop,
    unicode,
    with_options,
)
from sdk_judge import assert_valid, judge
from service_rules import assert_accepted
from stub_server import Reply, StubServer, stub_server

NAME = "bedrock-anthropic"
MANTLE = {"endpoint": "mantle"}
DATA = Path(__file__).parent / "data" / "responses" / "anthropic"
MODEL = "anthropic.claude-sonnet-4-5-v1:0"  # the shared cases' Bedrock model id
SSE = "text/event-stream"
THINKING = canonical.dumps(
    {"type": "thinking", "thinking": "Check the file first.", "signature": "sig-EqQBCkYIBxgCKkA"}
)


def mantle(req: ModelRequest, **more: Any) -> ModelRequest:
    return with_options(req, NAME, **MANTLE, **more)


def anthropic_bytes(req: ModelRequest) -> bytes:
    """The anthropic wire's body for ``req`` with the Bedrock model id as ``model``."""
    model = next(s.model for s in req.settings if s.provider == "anthropic")
    data = get("anthropic").serialize(req)
    head = canonical.dumpb({"model": model})[:-1] + b","
    assert data.startswith(head)
    return canonical.dumpb({"model": MODEL})[:-1] + b"," + data[len(head) :]


def produce_mantle(req: ModelRequest) -> dict[str, Any]:
    """The body, checked as :func:`provider_cases.produce` checks a body: bytes are the
    canonical encoding of wire_body, the fragment cache gives the same bytes, body() is
    the POSTed JSON itself (no URI member here), and the SDK judge (the mantle client's
    ``messages.create`` params) and the service rules accept it."""
    provider = get(NAME)
    data = provider.serialize(req)
    full = provider.body(req)
    assert data == canonical.dumpb(provider.wire_body(req)) == canonical.dumpb(full)
    assert provider.serialize(req) == data
    assert_valid(NAME, full, endpoint="mantle")
    return full


# -- the body ------------------------------------------------------------------------


@pytest.mark.parametrize("case", [simple, tool_loop, unicode, long_text, image])
def test_the_body_is_anthropics_byte_for_byte_with_the_bedrock_model_id(case: Any) -> None:
    req = mantle(case())
    assert get(NAME).serialize(req) == anthropic_bytes(req)
    full = produce_mantle(req)
    assert list(full)[:2] == ["model", "max_tokens"] and full["model"] == MODEL
    # the InvokeModel body of the same request is another one
    assert get(NAME).serialize(case()).startswith(b'{"anthropic_version":"bedrock-2023-05-31",')


def test_exact_call_of_a_plain_and_a_streaming_request() -> None:
    req = mantle(tool_loop())
    provider = get(NAME)
    plain, streamed = provider.http_request(req), provider.http_request(req, stream=True)
    body = provider.serialize(req)
    assert (plain.method, plain.path, plain.endpoint, plain.provider) == (
        "POST",
        "/anthropic/v1/messages",
        "mantle",
        NAME,
    )
    assert dict(plain.headers) == {
        "anthropic-version": "2023-06-01",
        "content-type": "application/json",
    }
    assert plain.body == body
    assert streamed.path == "/anthropic/v1/messages"
    assert dict(streamed.headers) == {
        "anthropic-version": "2023-06-01",
        "content-type": "application/json",
        "accept": "text/event-stream",
    }
    assert streamed.body == body[:-1] + b',"stream":true}'
    # the anthropic wire's streaming call differs only in the model and the path
    first = get("anthropic").http_request(tool_loop(), stream=True)
    assert streamed.body == anthropic_bytes(req)[:-1] + b',"stream":true}'
    assert dict(first.headers) == dict(streamed.headers)


def test_the_endpoint_option_is_never_sent_and_invoke_model_is_the_default() -> None:
    req = tool_loop()
    invoke_model = with_options(req, NAME, endpoint="invoke-model")
    assert get(NAME).serialize(invoke_model) == get(NAME).serialize(req)
    call = get(NAME).http_request(invoke_model)
    assert (call.path, call.endpoint) == ("/model/anthropic.claude-sonnet-4-5-v1%3A0/invoke", "")
    assert b'"endpoint"' not in get(NAME).serialize(mantle(req))


@pytest.mark.parametrize("version", ["2023-06-01", "2026-10-21"])
def test_anthropic_version_names_the_header_on_mantle(version: str) -> None:
    req = mantle(simple(), anthropic_version=version)
    call = get(NAME).http_request(req)
    assert call.headers["anthropic-version"] == version
    assert call.body == get(NAME).serialize(mantle(simple()))  # never a body member


def test_own_thinking_goes_back_verbatim_and_anthropics_is_refused() -> None:
    own = get(NAME).serialize(mantle(opaque(NAME, THINKING)))
    assert json.loads(own)["messages"][-2]["content"][0] == json.loads(THINKING)
    refused(
        NAME,
        mantle(opaque("anthropic", THINKING)),
        "opaque part of provider 'anthropic' cannot be sent to 'bedrock-anthropic'",
    )


def test_failover_keeps_claude_thinking_signatures_to_and_from_mantle() -> None:
    from prefixlock.runtime.failover import retarget

    block = json.loads(THINKING)

    def blocks(body: bytes) -> list[Any]:
        return [b for m in json.loads(body)["messages"] for b in m["content"]]

    to_mantle = get(NAME).serialize(retarget(mantle(opaque("anthropic", THINKING)), NAME))
    assert block in blocks(to_mantle)
    to_anthropic = get("anthropic").serialize(retarget(mantle(opaque(NAME, THINKING)), "anthropic"))
    assert block in blocks(to_anthropic)
    to_converse = get("bedrock-converse").serialize(
        retarget(mantle(opaque(NAME, THINKING)), "bedrock-converse")
    )
    reasoning = {"text": block["thinking"], "signature": block["signature"]}
    assert {"reasoningContent": {"reasoningText": reasoning}} in blocks(to_converse)


@pytest.mark.parametrize("key", ["model", "stream", "system", "cache_control"])
def test_options_may_not_set_what_the_wire_carries(key: str) -> None:
    refused(NAME, mantle(simple(), **{key: "x"}), "reserved key(s)", repr(key))


# -- contradictory settings: refused by serialize and by the build --------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"endpoint": "mantle", "anthropic_beta": ["context-1m-2025-08-07"]},
            "bedrock-anthropic: settings options.anthropic_beta: anthropic_beta is "
            "InvokeModel's body member; the mantle endpoint takes betas as the "
            "anthropic-beta header, which prefixlock does not send: remove it, or set "
            "endpoint: invoke-model",
        ),
        (
            {"endpoint": "messages"},
            "bedrock-anthropic: settings options.endpoint: expected 'invoke-model' or "
            "'mantle', got 'messages'",
        ),
        (
            {"endpoint": "invoke-model", "anthropic_version": "2023-06-01"},
            "bedrock-anthropic: settings options.anthropic_version: anthropic_version is "
            "the Messages API's version header, sent with endpoint: mantle only; "
            "InvokeModel's version is the body member 'bedrock-2023-05-31', which "
            "prefixlock sets",
        ),
        (
            {"endpoint": "mantle", "anthropic_version": "2026-10-21", "temperature": 0.5},
            "bedrock-anthropic: settings options.temperature: Anthropic API version "
            "2026-10-21 removes 'temperature': the service answers 400 ('Extra inputs are "
            "not permitted', even at its default value); remove it, or set "
            "anthropic_version: 2023-06-01",
        ),
    ],
)
def test_serialize_refuses_contradictory_settings(options: dict[str, Any], message: str) -> None:
    assert refused(NAME, with_options(simple(), NAME, **options)) == message


def test_endpoint_on_another_provider_is_refused() -> None:
    with pytest.raises(SerializationError) as info:
        get("anthropic").serialize(with_options(simple(), "anthropic", **MANTLE))
    assert str(info.value) == (
        "anthropic: settings options.endpoint: endpoint chooses the Bedrock endpoint of "
        "bedrock-anthropic (invoke-model or mantle); anthropic has one endpoint"
    )


def test_the_build_names_file_line_column_and_field_of_each_contradiction(
    tmp_path: Path,
) -> None:
    errors = providers_yaml_errors(
        tmp_path,
        "providers:\n"
        "  bedrock-anthropic:\n"
        "    model: anthropic.claude-sonnet-5-5\n"
        "    max_tokens: 4096\n"
        "    options:\n"
        "      endpoint: mantle\n"
        "      anthropic_beta: [context-1m-2025-08-07]\n"
        "  bedrock-converse:\n"
        "    model: anthropic.claude-sonnet-5-5\n"
        "    max_tokens: 4096\n"
        "    options: {endpoint: mantle}\n",
    )
    assert errors == [
        'rules/providers.yaml:7:23: $.providers["bedrock-anthropic"].options.anthropic_beta: '
        "anthropic_beta is InvokeModel's body member; the mantle endpoint takes betas as the "
        "anthropic-beta header, which prefixlock does not send: remove it, or set "
        "endpoint: invoke-model",
        'rules/providers.yaml:11:25: $.providers["bedrock-converse"].options.endpoint: '
        "endpoint chooses the Bedrock endpoint of bedrock-anthropic (invoke-model or "
        "mantle); bedrock-converse has one endpoint",
    ]


def test_the_schema_refuses_an_unknown_endpoint_with_its_location(tmp_path: Path) -> None:
    errors = providers_yaml_errors(
        tmp_path,
        "providers:\n"
        "  bedrock-anthropic:\n"
        "    model: anthropic.claude-sonnet-5-5\n"
        "    max_tokens: 4096\n"
        "    options: {endpoint: bedrock-runtime}\n",
    )
    assert errors == [
        'rules/providers.yaml:5:25: $.providers["bedrock-anthropic"].options.endpoint: '
        "expected one of invoke-model, mantle; got 'bedrock-runtime'"
    ]


def test_a_one_hour_ttl_follows_bedrocks_rule_by_model_on_mantle_too() -> None:
    req = mantle(simple(), cache_ttl="1h")
    settings = tuple(
        attrs.evolve(s, model="anthropic.claude-3-7-sonnet-20250219-v1:0")
        if s.provider == NAME
        else s
        for s in req.settings
    )
    message = refused(NAME, attrs.evolve(req, settings=settings), "settings options.cache_ttl")
    assert "'1h' asks for one-hour cache entries: Bedrock accepts cachePoint ttl '1h'" in message
    body = get(NAME).serialize(req)  # Claude 4.5: taken, on every marker
    assert body.count(b'"ttl":"1h"') == body.count(b'"cache_control"') > 0


def test_the_cache_simulator_prices_mantle_bodies_by_bedrocks_rules() -> None:
    """Claude Opus 4.7 caches from 2,048 tokens on the Anthropic API and from 4,096 on
    Bedrock (prefixlock.cache.rules): a ~3,000-token root is cached by the first and not
    on the mantle endpoint, which is Bedrock's."""
    from prefixlock.cache.simulator import simulate

    def bodies(name: str, model: str) -> list[bytes]:
        reqs = [request(CTX, RT, instructions="word " * 2400), tool_loop()]
        out = []
        for req in reqs:
            req = attrs.evolve(req, instructions="word " * 2400)
            settings = tuple(
                attrs.evolve(s, model=model) if s.provider == name else s for s in req.settings
            )
            out.append(get(name).serialize(mantle(attrs.evolve(req, settings=settings))))
        return out

    on_bedrock = simulate(NAME, bodies(NAME, "anthropic.claude-opus-4-7"))
    first_party = simulate("anthropic", bodies("anthropic", "claude-opus-4-7"))
    assert [c.cache_write_tokens for c in on_bedrock.calls] == [0, 0]
    assert [c.cache_read_tokens for c in on_bedrock.calls] == [0, 0]
    assert first_party.calls[0].cache_write_tokens > 2048
    assert first_party.calls[1].cache_read_tokens >= first_party.calls[0].cache_write_tokens


# -- the SDK judge ----------------------------------------------------------------------


def test_the_judge_refuses_what_the_mantle_client_sends_elsewhere() -> None:
    full = get(NAME).body(mantle(simple()))
    assert judge(NAME, full, endpoint="mantle") == []
    assert judge(NAME, {"anthropic_version": "bedrock-2023-05-31", **full}, endpoint="mantle") == [
        "$.anthropic_version: not a body member on bedrock-mantle (the anthropic-version header)"
    ]
    invoke = get(NAME).body(simple())  # InvokeModel's params: modelId, anthropic_version
    assert judge(NAME, invoke, endpoint="mantle")[:2] == [
        "$.anthropic_version: not a body member on bedrock-mantle (the anthropic-version header)",
        "$.modelId: not a body member on bedrock-mantle (InvokeModel's path; here 'model' "
        "is a body member)",
    ]
    assert judge(NAME, {**full, "max_tokens": "x"}, endpoint="mantle") == [
        "$.max_tokens: expected integer, got string 'x'"
    ]
    assert judge(NAME, {**full, "bogus": 1}, endpoint="mantle")[0].startswith(
        "$.bogus: unknown key for MessageCreateParamsNonStreaming (known: "
    )
    without_model = {k: v for k, v in full.items() if k != "model"}
    assert judge(NAME, without_model, endpoint="mantle") == [
        "$: missing required key 'model' of MessageCreateParamsNonStreaming"
    ]
    assert_accepted(NAME, full, endpoint="mantle")


# -- the call over HTTP: a stand-in bedrock-mantle on 127.0.0.1 --------------------------


def _sse(name: str) -> Reply:
    return Reply(200, pieces((DATA / f"{name}.sse").read_bytes()), SSE)


def _json(name: str) -> Reply:
    return Reply(200, (DATA / f"{name}.json").read_bytes())


def _call(stream: bool) -> HttpRequest:
    return get(NAME).http_request(mantle(request()), stream=stream)


def _send(
    stub: StubServer, call: HttpRequest, stream: bool, kind: str = "sync", **more: Any
) -> Any:
    waits = Waits()
    return run(kind, lambda: client(kind, NAME, stub.url, waits, **more), call, stream)


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_the_answer_is_read_as_the_messages_api_sends_it(kind: str, stream: bool) -> None:
    call = _call(stream)
    with stub_server() as stub:
        stub.queue(_sse("turn1") if stream else _json("turn1"))
        output = _send(stub, call, stream, kind)
    # the same output InvokeModel's reader gives for the same message (opaque parts
    # named bedrock-anthropic), from SSE here instead of event-stream frames
    assert output == expected(NAME, "turn1")
    assert [p.provider for p in output.parts if isinstance(p, OpaquePart)] == [NAME, NAME]
    (seen,) = stub.seen
    assert (seen.method, seen.path, seen.body) == ("POST", "/anthropic/v1/messages", call.body)
    assert seen.headers["anthropic-version"] == "2023-06-01"
    assert seen.headers["content-length"] == str(call.content_length)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_sigv4_is_botocores_signature_for_the_service_bedrock_mantle(kind: str) -> None:
    call = _call(True)
    with stub_server() as stub:
        stub.queue(_sse("turn1"))
        _send(stub, call, True, kind)
    seen = stub.seen[0]
    signed = {"accept", "anthropic-version", "content-type", "host", "x-amz-date"}
    signature = botocore_signature(stub.url, seen, "bedrock-mantle", signed)
    assert seen.headers["authorization"] == (
        f"AWS4-HMAC-SHA256 Credential={AWS_KEY_ID}/{seen.headers['x-amz-date'][:8]}/"
        f"{REGION}/bedrock-mantle/aws4_request, "
        "SignedHeaders=accept;anthropic-version;content-type;host;x-amz-date, "
        f"Signature={signature}"
    )


def test_one_client_signs_each_endpoint_for_its_own_service() -> None:
    invoke = get(NAME).http_request(request(), stream=False)
    with stub_server() as stub:
        stub.queue(_json("turn1"), _json("turn1"))
        waits = Waits()
        with client("sync", NAME, stub.url, waits) as made:
            assert isinstance(made, Client)
            made.send(invoke)
            made.send(_call(False))
    scopes = [s.headers["authorization"].split(", ")[0].split("/", 2)[2] for s in stub.seen]
    assert scopes == [
        f"{REGION}/bedrock/aws4_request",
        f"{REGION}/bedrock-mantle/aws4_request",
    ]
    assert [s.path for s in stub.seen] == [
        "/model/anthropic.claude-sonnet-4-5-v1%3A0/invoke",
        "/anthropic/v1/messages",
    ]


def test_a_bedrock_api_key_is_sent_as_a_bearer_token() -> None:
    call = _call(False)
    env = {"AWS_BEARER_TOKEN_BEDROCK": "bedrock-key", "AWS_REGION": REGION}
    with stub_server() as stub:
        stub.queue(_json("turn1"))
        with Client(NAME, base_url=stub.url, env=env) as made:
            made.send(call)
    seen = stub.seen[0]
    assert seen.headers["authorization"] == "Bearer bedrock-key"
    assert "x-amz-date" not in seen.headers and "x-api-key" not in seen.headers
    assert (seen.path, seen.body) == ("/anthropic/v1/messages", call.body)


def test_the_default_host_and_the_sdks_base_url_variable() -> None:
    made = Client(NAME, api_key="k", region="eu-west-3", env={})
    assert made._bases == {
        "": "https://bedrock-runtime.eu-west-3.amazonaws.com",
        "mantle": "https://bedrock-mantle.eu-west-3.api.aws",
    }
    made.close()
    call = _call(False)
    with stub_server() as stub:
        stub.queue(_json("turn1"))
        # the SDK's ANTHROPIC_BEDROCK_MANTLE_BASE_URL ends with /anthropic: not doubled
        env = {"ANTHROPIC_BEDROCK_MANTLE_BASE_URL": stub.url + "/anthropic/"}
        with Client(NAME, api_key=API_KEY, region=REGION, env=env) as made:
            made.send(call)
    assert stub.seen[0].path == "/anthropic/v1/messages"


def test_a_call_for_an_endpoint_the_client_lacks_is_refused() -> None:
    call = attrs.evolve(get("anthropic").http_request(request()), endpoint="mantle")
    with Client("anthropic", api_key=API_KEY, env={}) as made, pytest.raises(UsageError) as info:
        made.send(call)
    assert str(info.value) == "anthropic has no endpoint 'mantle'"


def _fails(stub: StubServer, call: HttpRequest, stream: bool, **retry: Any) -> CallError:
    with pytest.raises(CallError) as info:
        _send(stub, call, stream, retry=Retry(seed=7, **retry))
    return info.value


def test_an_anthropic_rate_limit_is_typed_and_retried() -> None:
    call = _call(False)
    limited = Reply(
        429,
        b'{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}',
        headers=(("request-id", "req_mantle429"), ("retry-after", "0")),
    )
    with stub_server() as stub:
        stub.queue(limited, _json("turn1"))
        assert _send(stub, call, False) == expected(NAME, "turn1")
    assert len(stub.seen) == 2 and stub.seen[0].body == stub.seen[1].body == call.body
    with stub_server() as stub:
        stub.queue(limited)
        error = _fails(stub, call, False, max_retries=0)
    assert type(error) is ProviderError
    assert (error.status, error.error_type, error.provider_message, error.request_id) == (
        429,
        "rate_limit_error",
        "slow down",
        "req_mantle429",
    )
    assert error.retry_safe is True
    assert str(error) == (
        "bedrock-anthropic POST /anthropic/v1/messages: HTTP 429 rate_limit_error: slow down "
        "(request id req_mantle429) [1 try] (a retry with the same event id is safe)"
    )


def test_a_refused_request_and_an_aws_access_error_are_not_retried() -> None:
    call = _call(False)
    refused_ = Reply(
        400,
        b'{"type":"error","error":{"type":"invalid_request_error","message":"bad model"}}',
    )
    denied = Reply(
        403,
        b'{"message":"The security token included in the request is invalid."}',
        headers=(("x-amzn-errortype", "UnrecognizedClientException:http://internal/"),),
    )
    errors = []
    for reply in (refused_, denied):
        with stub_server() as stub:
            stub.queue(reply)
            errors.append(_fails(stub, call, False))
        assert len(stub.seen) == 1
    assert [(e.status, e.error_type, e.provider_message, e.retry_safe) for e in errors] == [
        (400, "invalid_request_error", "bad model", False),
        (
            403,
            "UnrecognizedClientException",
            "The security token included in the request is invalid.",
            False,
        ),
    ]


def test_an_overloaded_event_mid_stream_is_retried_then_read() -> None:
    call = _call(True)
    with stub_server() as stub:
        stub.queue(_sse("error_overloaded"), _sse("turn1"))
        assert _send(stub, call, True) == expected(NAME, "turn1")
    assert len(stub.seen) == 2


def test_the_provider_reads_by_the_calls_endpoint() -> None:
    provider = get(NAME)
    sse = (DATA / "turn1.sse").read_bytes()
    stream = provider.stream_reader(endpoint="mantle")
    for chunk in pieces(sse, 13):
        stream.feed(chunk)
    assert stream.result() == expected(NAME, "turn1")
    assert provider.parse_response((DATA / "turn1.json").read_bytes(), endpoint="mantle") == (
        expected(NAME, "turn1")
    )
    assert type(reader(NAME, "mantle")).__name__ == "BedrockMantleReader"


# -- end to end: a conversation configured for mantle -----------------------------------


def test_a_conversation_configured_for_mantle_calls_streams_and_records(tmp_path: Path) -> None:
    root = spec_with_providers(
        tmp_path,
        "providers:\n"
        "  anthropic: {model: claude-sonnet-5-5, max_tokens: 4096}\n"
        "  bedrock-anthropic:\n"
        "    model: anthropic.claude-sonnet-5-5\n"
        "    max_tokens: 4096\n"
        "    options: {endpoint: mantle, cache_ttl: auto}\n",
    )
    conv = Conversation.open(MemoryStore(), build_bundle(root), "conv-m")
    conv.user_turn("u1", "fix the bug", mode="agent", context=CONTEXT_A)
    with stub_server() as stub:
        stub.queue(_sse("turn1"), _sse("turn2"))
        with Client(NAME, api_key=API_KEY, region=REGION, base_url=stub.url, env={}) as made:
            first = conv.call(made, stream=True)
            conv.tool_results([ToolResult(c.call_id, "ok") for c in first.tool_calls])
            second = conv.call(made, stream=True)
    assert (first, second) == (expected(NAME, "turn1"), expected(NAME, "turn2"))
    assert conv.history.messages[-1].parts == second.parts
    one, two = (json.loads(s.body) for s in stub.seen)
    assert [s.path for s in stub.seen] == ["/anthropic/v1/messages"] * 2
    assert (one["model"], one["stream"], "anthropic_version" in one) == (
        "anthropic.claude-sonnet-5-5",
        True,
        False,
    )
    # the second call carries the recorded thinking block back, signature and all
    thinking = first.parts[0]
    assert isinstance(thinking, OpaquePart)
    (assistant,) = [m for m in two["messages"] if m["role"] == "assistant"]
    assert assistant["content"][0] == thinking.value
    # append-only: the first body (without its tail marker) is a prefix of the second
    strip = get(NAME).strip_cache_markers
    assert strip(two)["messages"][: len(one["messages"])] == strip(one)["messages"]
    assert_valid(NAME, {k: v for k, v in two.items() if k != "stream"}, endpoint="mantle")
