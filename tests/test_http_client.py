"""prefixlock.http against the local stand-in, for all five wires, JSON, SSE and AWS
event-stream, sync and async: each fault (429 with Retry-After, 5xx, an error event
mid-stream with HTTP 200, a connection reset mid-body, a stream cut short, a slow server,
a Bedrock frame with a bad CRC) -- how many tries, the same bytes each time, and the
final typed error or the output read."""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Any

import attrs
import pytest
from conv_helpers import open_conv, user
from http_support import (
    API_KEY,
    AWS_KEY_ID,
    AWS_SECRET,
    BEDROCK,
    PROVIDERS,
    RATE_LIMITED,
    REFUSED,
    REGION,
    TURNS,
    Waits,
    bad_crc,
    botocore_signature,
    client,
    cut_short,
    expected,
    overloaded_midstream,
    reset_midway,
    run,
    success,
)
from prefixlock import providers
from prefixlock.core import canonical
from prefixlock.core.errors import UsageError
from prefixlock.core.model import ModelRequest
from prefixlock.http import (
    CallError,
    CallTimeoutError,
    Client,
    ConnectionLostError,
    ProviderError,
    Retry,
    Timeouts,
)
from prefixlock.providers.transport import HttpRequest
from stub_server import Reply, StubServer, stub_server

KINDS = ["sync", "async"]
STREAM = pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
KIND = pytest.mark.parametrize("kind", KINDS)
PROVIDER = pytest.mark.parametrize("provider", PROVIDERS)

_REQUEST: list[ModelRequest] = []


def request() -> ModelRequest:
    if not _REQUEST:
        _REQUEST.append(open_conv().handle(user("u1")))
    return _REQUEST[0]


def http_call(provider: str, stream: bool) -> HttpRequest:
    return providers.get(provider).http_request(request(), stream=stream)


def backoffs(n: int, seed: int = 7) -> list[float]:
    """The first ``n`` waits of Retry(seed=seed), computed here from its rule."""
    rng = random.Random(seed)
    return [min(0.5 * 2**i, 8.0) * (1 - 0.25 * rng.random()) for i in range(n)]


def same_bytes(stub: StubServer, call: HttpRequest, tries: int) -> None:
    assert len(stub.seen) == tries
    for seen in stub.seen:
        assert (seen.method, seen.path, seen.body) == (call.method, call.path, call.body)
        assert seen.headers["content-length"] == str(call.content_length)
        assert "transfer-encoding" not in seen.headers
        for name, value in call.headers.items():
            assert seen.headers[name] == value


def fails(
    kind: str, provider: str, stub: StubServer, call: HttpRequest, stream: bool, **retry: Any
) -> tuple[CallError, Waits]:
    waits = Waits()
    with pytest.raises(CallError) as info:
        run(
            kind,
            lambda: client(kind, provider, stub.url, waits, Retry(seed=7, **retry)),
            call,
            stream,
        )
    return info.value, waits


def succeeds(kind: str, provider: str, stub: StubServer, call: HttpRequest, stream: bool) -> Waits:
    waits = Waits()
    output = run(kind, lambda: client(kind, provider, stub.url, waits), call, stream)
    assert output == expected(provider, TURNS[provider][0])
    return waits


# -- retried, then read --------------------------------------------------------------


@KIND
@STREAM
@PROVIDER
def test_429_with_retry_after_waits_that_long_and_sends_the_same_bytes(
    provider: str, stream: bool, kind: str
) -> None:
    call = http_call(provider, stream)
    body, headers = RATE_LIMITED[provider]
    with stub_server() as stub:
        stub.queue(
            Reply(429, body, headers=(("retry-after", "3"), *headers)),
            success(provider, TURNS[provider][0], stream),
        )
        waits = succeeds(kind, provider, stub, call, stream)
    assert waits == [3.0]
    same_bytes(stub, call, 2)


@PROVIDER
def test_retry_after_ms_is_preferred_to_retry_after(provider: str) -> None:
    call = http_call(provider, False)
    body, headers = RATE_LIMITED[provider]
    with stub_server() as stub:
        stub.queue(
            Reply(429, body, headers=(("retry-after", "9"), ("retry-after-ms", "1500"), *headers)),
            success(provider, TURNS[provider][0], False),
        )
        waits = succeeds("sync", provider, stub, call, False)
    assert waits == [1.5]
    same_bytes(stub, call, 2)


@KIND
@STREAM
@PROVIDER
def test_500_503_529_or_504_back_off_exponentially_with_seeded_jitter(
    provider: str, stream: bool, kind: str
) -> None:
    call = http_call(provider, stream)
    # 529 is Anthropic's "overloaded"; Gemini documents 504 instead (and not 529)
    last = 504 if provider == "gemini" else 529
    with stub_server() as stub:
        stub.queue(
            Reply(500, b'{"error":{"message":"internal"}}'),
            Reply(503, b'{"error":{"message":"unavailable"}}'),
            Reply(last, b'{"error":{"message":"overloaded"}}'),
            success(provider, TURNS[provider][0], stream),
        )
        waits = succeeds(kind, provider, stub, call, stream)
    assert waits == backoffs(3)
    assert 0.375 < waits[0] <= 0.5 and 0.75 < waits[1] <= 1.0 and 1.5 < waits[2] <= 2.0
    same_bytes(stub, call, 4)


@KIND
@PROVIDER
def test_an_overloaded_event_mid_stream_with_http_200_is_retried(provider: str, kind: str) -> None:
    call = http_call(provider, True)
    with stub_server() as stub:
        stub.queue(overloaded_midstream(provider), success(provider, TURNS[provider][0], True))
        waits = succeeds(kind, provider, stub, call, True)
    assert waits == backoffs(1)
    same_bytes(stub, call, 2)


@KIND
@STREAM
@PROVIDER
def test_a_connection_reset_mid_body_is_retried(provider: str, stream: bool, kind: str) -> None:
    call = http_call(provider, stream)
    ok = success(provider, TURNS[provider][0], stream)
    with stub_server() as stub:
        stub.queue(reset_midway(ok), ok)
        waits = succeeds(kind, provider, stub, call, stream)
    assert waits == backoffs(1)
    same_bytes(stub, call, 2)


@KIND
@PROVIDER
def test_a_stream_cut_short_is_retried(provider: str, kind: str) -> None:
    call = http_call(provider, True)
    ok = success(provider, TURNS[provider][0], True)
    with stub_server() as stub:
        stub.queue(cut_short(ok), ok)
        waits = succeeds(kind, provider, stub, call, True)
    assert waits == backoffs(1)
    same_bytes(stub, call, 2)


@KIND
@STREAM
@PROVIDER
def test_a_server_slower_than_the_read_timeout_is_retried(
    provider: str, stream: bool, kind: str
) -> None:
    call = http_call(provider, stream)
    ok = success(provider, TURNS[provider][0], stream)
    with stub_server() as stub:
        stub.queue(Reply(ok.status, ok.body, ok.content_type, delay=0.5), ok)
        waits = succeeds(kind, provider, stub, call, stream)
    assert waits == backoffs(1)
    same_bytes(stub, call, 2)


@KIND
@pytest.mark.parametrize("provider", sorted(BEDROCK))
def test_a_bedrock_frame_with_a_bad_crc_is_retried(kind: str, provider: str) -> None:
    call = http_call(provider, True)
    ok = success(provider, TURNS[provider][0], True)
    with stub_server() as stub:
        stub.queue(bad_crc(ok), ok)
        waits = succeeds(kind, provider, stub, call, True)
    assert waits == backoffs(1)
    same_bytes(stub, call, 2)


# -- the final errors ----------------------------------------------------------------

#: provider -> the error a 400 ends the call with: one try, never retried
REFUSED_MESSAGES = {
    "anthropic": "anthropic POST /v1/messages: HTTP 400 invalid_request_error: max_tokens: bad "
    "(request id req_011CBad) [1 try] (do not retry as is)",
    "bedrock-anthropic": "bedrock-anthropic POST /model/anthropic.claude-sonnet-5-5/"
    "invoke: HTTP 400 ValidationException: Malformed input request (request id 0f4c-bad) "
    "[1 try] (do not retry as is)",
    "bedrock-converse": "bedrock-converse POST /model/anthropic.claude-sonnet-5-5/"
    "converse: HTTP 400 ValidationException: Malformed input request (request id 0f4c-bad) "
    "[1 try] (do not retry as is)",
    "gemini": "gemini POST /v1beta/models/gemini-4-argon:generateContent: HTTP 400 "
    "INVALID_ARGUMENT: bad field [1 try] (do not retry as is)",
    "openai-chat": "openai-chat POST /v1/chat/completions: HTTP 400 invalid_request_error: "
    "bad field (request id req_chat400) [1 try] (do not retry as is)",
    "openai-responses": "openai-responses POST /v1/responses: HTTP 400 invalid_request_error: "
    "bad field (request id req_resp400) [1 try] (do not retry as is)",
}


@KIND
@PROVIDER
def test_a_refused_request_is_not_retried_and_says_what_the_provider_said(
    provider: str, kind: str
) -> None:
    call = http_call(provider, False)
    body, headers = REFUSED[provider]
    with stub_server() as stub:
        stub.queue(Reply(400, body, headers=headers))
        error, waits = fails(kind, provider, stub, call, False)
    assert type(error) is ProviderError
    assert str(error) == REFUSED_MESSAGES[provider]
    assert (error.status, error.tries, error.retry_safe, waits) == (400, 1, False, [])
    same_bytes(stub, call, 1)


#: provider -> (error type, request id) of its rate-limit error
RATE_FIELDS = {
    "anthropic": ("rate_limit_error", "req_011CRate"),
    "bedrock-anthropic": ("ThrottlingException", "0f4c-rate"),
    "bedrock-converse": ("ThrottlingException", "0f4c-rate"),
    "gemini": ("RESOURCE_EXHAUSTED", None),
    "openai-chat": ("rate_limit_exceeded", "req_chat429"),
    "openai-responses": ("rate_limit_exceeded", "req_resp429"),
}


@KIND
@STREAM
@PROVIDER
def test_the_retry_budget_ends_with_the_last_error_and_its_tries(
    provider: str, stream: bool, kind: str
) -> None:
    call = http_call(provider, stream)
    body, headers = RATE_LIMITED[provider]
    with stub_server() as stub:
        stub.queue(*[Reply(429, body, headers=headers)] * 3)
        error, waits = fails(kind, provider, stub, call, stream, max_retries=2)
    assert type(error) is ProviderError
    assert (error.status, error.tries, error.retry_safe) == (429, 3, True)
    assert (error.error_type, error.request_id) == RATE_FIELDS[provider]
    message = "Too many requests, please wait before trying again."
    assert error.provider_message == (message if provider in BEDROCK else "slow down")
    assert str(error).endswith(" [3 tries] (a retry with the same event id is safe)")
    assert waits == backoffs(2)
    same_bytes(stub, call, 3)


@KIND
def test_a_retry_after_past_the_wait_budget_ends_the_call(kind: str) -> None:
    call = http_call("anthropic", False)
    body, headers = RATE_LIMITED["anthropic"]
    with stub_server() as stub:
        stub.queue(Reply(429, body, headers=(("retry-after", "500"), *headers)))
        error, waits = fails(kind, "anthropic", stub, call, False)
    assert str(error) == (
        "anthropic POST /v1/messages: HTTP 429 rate_limit_error: slow down (request id "
        "req_011CRate) [1 try; waiting 500 s more is past the retry budget] "
        "(a retry with the same event id is safe)"
    )
    assert waits == []


#: provider -> the error type of its overloaded event mid-stream
MIDSTREAM_TYPES = {
    "anthropic": "overloaded_error",
    "bedrock-anthropic": "serviceUnavailableException",
    "bedrock-converse": "serviceUnavailableException",
    "gemini": "UNAVAILABLE",
    "openai-chat": "server_error",
    "openai-responses": "rate_limit_exceeded",
}


@KIND
@PROVIDER
def test_an_error_event_every_time_ends_as_a_provider_error_with_status_200(
    provider: str, kind: str
) -> None:
    call = http_call(provider, True)
    with stub_server() as stub:
        stub.queue(overloaded_midstream(provider), overloaded_midstream(provider))
        error, waits = fails(kind, provider, stub, call, True, max_retries=1)
    assert type(error) is ProviderError
    assert (error.status, error.tries, error.retry_safe) == (200, 2, True)
    assert error.error_type == MIDSTREAM_TYPES[provider]
    assert waits == backoffs(1)
    same_bytes(stub, call, 2)


@KIND
@STREAM
@PROVIDER
def test_a_connection_reset_every_time_ends_as_connection_lost(
    provider: str, stream: bool, kind: str
) -> None:
    call = http_call(provider, stream)
    ok = success(provider, TURNS[provider][0], stream)
    with stub_server() as stub:
        stub.queue(reset_midway(ok), reset_midway(ok))
        error, _ = fails(kind, provider, stub, call, stream, max_retries=1)
    assert type(error) is ConnectionLostError
    assert (error.status, error.tries, error.retry_safe) == (None, 2, True)
    assert str(error).startswith(
        f"{provider} POST {call.path.partition('?')[0]}: connection lost ("
    )
    assert str(error).endswith(") [2 tries] (a retry with the same event id is safe)")
    same_bytes(stub, call, 2)


@KIND
@PROVIDER
def test_a_stream_cut_short_every_time_ends_as_connection_lost(provider: str, kind: str) -> None:
    call = http_call(provider, True)
    ok = success(provider, TURNS[provider][0], True)
    with stub_server() as stub:
        stub.queue(cut_short(ok), cut_short(ok))
        error, _ = fails(kind, provider, stub, call, True, max_retries=1)
    assert type(error) is ConnectionLostError
    assert (error.status, error.tries, error.retry_safe) == (200, 2, True)
    same_bytes(stub, call, 2)


@KIND
@STREAM
def test_a_slow_server_every_time_ends_as_a_read_timeout(stream: bool, kind: str) -> None:
    provider = "openai-chat"
    call = http_call(provider, stream)
    ok = success(provider, TURNS[provider][0], stream)
    slow = Reply(ok.status, ok.body, ok.content_type, delay=0.5)
    with stub_server() as stub:
        stub.queue(slow, slow)
        error, _ = fails(kind, provider, stub, call, stream, max_retries=1)
    assert type(error) is CallTimeoutError
    assert str(error) == (
        "openai-chat POST /v1/chat/completions: read timeout of 0.15 s [2 tries] "
        "(a retry with the same event id is safe)"
    )
    same_bytes(stub, call, 2)


@KIND
def test_a_bad_crc_every_time_ends_as_a_provider_error(kind: str) -> None:
    provider = "bedrock-converse"
    call = http_call(provider, True)
    ok = success(provider, TURNS[provider][0], True)
    with stub_server() as stub:
        stub.queue(bad_crc(ok), bad_crc(ok))
        error, _ = fails(kind, provider, stub, call, True, max_retries=1)
    assert type(error) is ProviderError
    assert str(error) == (
        "bedrock-converse POST /model/anthropic.claude-sonnet-5-5/"
        "converse-stream: HTTP 200: event stream: message CRC mismatch [2 tries] "
        "(a retry with the same event id is safe)"
    )
    same_bytes(stub, call, 2)


# -- auth, secrets, configuration ------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_key_goes_in_the_providers_header(provider: str) -> None:
    call = http_call(provider, False)
    with stub_server() as stub:
        stub.queue(success(provider, TURNS[provider][0], False))
        succeeds("sync", provider, stub, call, False)
    headers = stub.seen[0].headers
    auth = {
        "anthropic": ("x-api-key", API_KEY),
        "gemini": ("x-goog-api-key", API_KEY),
        "openai-chat": ("authorization", f"Bearer {API_KEY}"),
        "openai-responses": ("authorization", f"Bearer {API_KEY}"),
    }.get(provider)
    if auth is None:  # SigV4: checked against botocore below
        assert headers["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={AWS_KEY_ID}/")
    else:
        assert headers[auth[0]] == auth[1]


@KIND
@pytest.mark.parametrize("provider", sorted(BEDROCK))
def test_bedrock_sigv4_is_the_signature_botocore_computes_for_the_bytes_received(
    kind: str, provider: str
) -> None:
    call = http_call(provider, True)
    with stub_server() as stub:
        stub.queue(success(provider, TURNS[provider][0], True))
        succeeds(kind, provider, stub, call, True)
    seen = stub.seen[0]
    signed = {"accept", "content-type", "host", "x-amz-date"}
    signature = botocore_signature(stub.url, seen, "bedrock", signed)
    assert seen.headers["authorization"] == (
        f"AWS4-HMAC-SHA256 Credential={AWS_KEY_ID}/{seen.headers['x-amz-date'][:8]}/"
        f"{REGION}/bedrock/aws4_request, SignedHeaders=accept;content-type;host;x-amz-date, "
        f"Signature={signature}"
    )


@pytest.mark.parametrize("provider", PROVIDERS)
def test_secrets_never_show_in_errors_reprs_or_logs(
    provider: str, caplog: pytest.LogCaptureFixture
) -> None:
    call = http_call(provider, False)
    secret = AWS_SECRET if provider in BEDROCK else API_KEY
    echo = f'{{"error":{{"message":"Incorrect API key provided: {secret}"}},"message":"{secret}"}}'
    caplog.set_level(logging.DEBUG)
    waits = Waits()
    with stub_server() as stub:
        stub.queue(Reply(401, echo.encode()))
        made = client("sync", provider, stub.url, waits)
        with pytest.raises(ProviderError) as info:
            run("sync", lambda: made, call, False)
    error = info.value
    assert error.provider_message is not None and "***" in error.provider_message
    shown = [str(error), repr(error), repr(made), str(made), error.provider_message]
    shown += [r.getMessage() for r in caplog.records] + [repr(r.args) for r in caplog.records]
    assert caplog.records  # httpx2 logged the request
    for text in shown:
        assert secret not in text
        assert API_KEY not in text and AWS_SECRET not in text


def test_keys_and_base_urls_come_from_the_sdks_environment_variables() -> None:
    call = http_call("openai-chat", False)
    with stub_server() as stub:
        stub.queue(success("openai-chat", "tool_calls", False))
        env = {"OPENAI_API_KEY": "sk-env", "OPENAI_BASE_URL": stub.url + "/v1"}  # with /v1
        with Client("openai-chat", env=env) as made:
            made.send(call)
        stub.queue(success("gemini", "turn1", False))
        gemini = Client(
            "gemini", base_url=stub.url, env={"GEMINI_API_KEY": "g-1", "GOOGLE_API_KEY": "g-2"}
        )
        with gemini:
            gemini.send(http_call("gemini", False))
    assert stub.seen[0].path == "/v1/chat/completions"  # not /v1/v1/...
    assert stub.seen[0].headers["authorization"] == "Bearer sk-env"
    assert stub.seen[1].headers["x-goog-api-key"] == "g-2"  # GOOGLE_API_KEY wins, as in genai


def test_a_missing_key_or_region_is_a_usage_error() -> None:
    with pytest.raises(UsageError) as info:
        Client("anthropic", env={})
    assert str(info.value) == "anthropic: no API key (give api_key=, or set ANTHROPIC_API_KEY)"
    with pytest.raises(UsageError) as info:
        Client("gemini", env={})
    assert str(info.value) == (
        "gemini: no API key (give api_key=, or set GOOGLE_API_KEY or GEMINI_API_KEY)"
    )
    with pytest.raises(UsageError) as info:
        Client("bedrock-converse", env={})
    assert str(info.value) == "bedrock-converse: no region (give region=, or set AWS_REGION)"
    with pytest.raises(UsageError) as info:
        Client("anthropc", api_key="k")
    assert str(info.value) == "unknown provider 'anthropc' (did you mean 'anthropic'?)"


def test_a_call_of_another_provider_is_refused() -> None:
    with Client("anthropic", api_key="k") as made, pytest.raises(UsageError) as info:
        made.send(http_call("gemini", False))
    assert str(info.value) == (
        "a gemini call sent through a anthropic client: make one client per provider"
    )


# -- connections, events ---------------------------------------------------------------


@KIND
def test_one_client_reuses_one_connection_across_calls_and_conversations(kind: str) -> None:
    provider = "anthropic"
    wire = providers.get(provider)
    other = open_conv(conversation="conv-2").handle(user("u1", conversation="conv-2"))
    calls = [
        (wire.http_request(request(), stream=False), False),
        (wire.http_request(request(), stream=True), True),
        (wire.http_request(other, stream=False), False),  # another conversation
    ]
    waits = Waits()
    with stub_server() as stub:
        stub.queue(*[success(provider, "turn1", stream) for _, stream in calls])
        made = client(kind, provider, stub.url, waits)
        if kind == "async":

            async def go() -> None:
                assert not isinstance(made, Client)
                async with made:
                    for call, stream in calls:
                        await (made.stream(call) if stream else made.send(call))

            asyncio.run(go())
        else:
            assert isinstance(made, Client)
            with made:
                for call, stream in calls:
                    made.stream(call) if stream else made.send(call)
    assert [seen.body for seen in stub.seen] == [call.body for call, _ in calls]
    assert len({seen.port for seen in stub.seen}) == 1


@KIND
@PROVIDER
def test_on_event_sees_every_event_in_order(provider: str, kind: str) -> None:
    call = http_call(provider, True)
    events: list[tuple[str, bytes]] = []
    waits = Waits()
    with stub_server() as stub:
        stub.queue(success(provider, TURNS[provider][0], True))
        made = client(kind, provider, stub.url, waits)
        if kind == "async":

            async def go() -> None:
                assert not isinstance(made, Client)
                async with made:
                    await made.stream(call, lambda n, d: events.append((n, d)))

            asyncio.run(go())
        else:
            assert isinstance(made, Client)
            with made:
                made.stream(call, lambda n, d: events.append((n, d)))
    reader = providers.get(provider).stream_reader()
    seen: list[tuple[str, bytes]] = []
    reader.listener = lambda n, d: seen.append((n, d))
    body = success(provider, TURNS[provider][0], True).body
    reader.feed(b"".join(body) if not isinstance(body, bytes) else body)
    assert events == seen and len(events) > 2


# -- the total timeout -------------------------------------------------------------------


@KIND
def test_a_retry_after_beyond_the_total_timeout_ends_the_call(kind: str) -> None:
    call = http_call("openai-chat", False)
    body, headers = RATE_LIMITED["openai-chat"]
    waits = Waits()
    timeouts = Timeouts(read=1.0, total=5.0)
    with stub_server() as stub:
        stub.queue(Reply(429, body, headers=(("retry-after", "10"), *headers)))
        with pytest.raises(ProviderError) as info:
            run(
                kind,
                lambda: client(kind, "openai-chat", stub.url, waits, timeouts=timeouts),
                call,
                False,
            )
    assert str(info.value).endswith(
        "[1 try; waiting 10 s more is past the retry budget] "
        "(a retry with the same event id is safe)"
    )
    assert waits == []


@KIND
def test_a_stream_past_the_total_timeout_ends_without_a_retry(kind: str) -> None:
    call = http_call("anthropic", True)
    ticks = iter([0.0, 0.0])
    waits = Waits()

    def clock() -> float:
        return next(ticks, 1e9)  # the deadline passes after the first chunk

    with stub_server() as stub:
        stub.queue(success("anthropic", "turn1", True))
        with pytest.raises(CallTimeoutError) as info:
            run(
                kind,
                lambda: client(kind, "anthropic", stub.url, waits, clock=clock),
                call,
                True,
            )
    assert str(info.value) == (
        "anthropic POST /v1/messages: total timeout of 30 s passed [1 try] (do not retry as is)"
    )
    assert (info.value.tries, info.value.retry_safe, waits) == (1, False, [])


def test_a_bedrock_api_key_is_sent_as_a_bearer_token_instead_of_sigv4() -> None:
    call = http_call("bedrock-converse", False)
    with stub_server() as stub:
        stub.queue(success("bedrock-converse", TURNS["bedrock-converse"][0], False))
        env = {"AWS_BEARER_TOKEN_BEDROCK": "bedrock-key", "AWS_REGION": REGION}
        with Client("bedrock-converse", base_url=stub.url, env=env) as made:
            made.send(call)
    assert stub.seen[0].headers["authorization"] == "Bearer bedrock-key"
    assert "x-amz-date" not in stub.seen[0].headers
    same_bytes(stub, call, 1)


def test_the_default_base_urls_are_the_public_apis() -> None:
    urls = {name: Client(name, api_key="k", region="eu-west-3").base_url for name in PROVIDERS}
    assert urls == {
        "anthropic": "https://api.anthropic.com",
        "bedrock-anthropic": "https://bedrock-runtime.eu-west-3.amazonaws.com",
        "bedrock-converse": "https://bedrock-runtime.eu-west-3.amazonaws.com",
        "gemini": "https://generativelanguage.googleapis.com",
        "openai-chat": "https://api.openai.com",
        "openai-responses": "https://api.openai.com",
    }


# -- the configured Anthropic API version on the wire (issue 45) ---------------------


@pytest.mark.parametrize("version", ["2023-06-01", "2026-10-21"])
@STREAM
def test_anthropic_sends_the_configured_api_version_header(version: str, stream: bool) -> None:
    """``anthropic_version`` (rules/providers.yaml) is the ``anthropic-version`` header
    the stand-in receives, never a body key; without it, 2023-06-01."""
    base = request()
    settings = tuple(
        attrs.evolve(s, options=canonical.dumps({**s.options_value, "anthropic_version": version}))
        if s.provider == "anthropic"
        else s
        for s in base.settings
    )
    call = providers.get("anthropic").http_request(
        attrs.evolve(base, settings=settings), stream=stream
    )
    plain = http_call("anthropic", stream)
    assert plain.headers["anthropic-version"] == "2023-06-01"
    assert list(call.headers) == list(plain.headers)  # the same headers, in order
    assert call.body == plain.body and b"anthropic_version" not in call.body
    with stub_server() as stub:
        stub.queue(success("anthropic", TURNS["anthropic"][0], stream))
        run("sync", lambda: client("sync", "anthropic", stub.url, Waits()), call, stream)
    assert [seen.headers["anthropic-version"] for seen in stub.seen] == [version]
    assert stub.seen[0].body == plain.body
