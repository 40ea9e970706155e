"""HTTP without guesswork: the method, path, headers and exact body of a model call, the
stream flag in a fixed place, and which error statuses a retry may cure.

The body of a streaming call is the non-streaming body with the stream fields appended
as the last top-level members (``...,"stream":true}``), so a conversation that streams
sends the same bytes on every retry, and the bytes before the stream fields are exactly
:meth:`~prefixlock.providers.base.Provider.serialize`'s. Gemini and Bedrock put streaming
in the path instead. Credentials are the caller's: no auth header is set here (Bedrock
requests are signed with SigV4 by the caller's AWS client).

Sources: Anthropic Messages ``POST /v1/messages`` with ``anthropic-version: 2023-06-01``
(or the version the agent's ``anthropic_version`` option names, :attr:`Route.header_options`)
and ``"stream": true`` (docs.anthropic.com/en/api/messages, /en/api/streaming); OpenAI
``POST /v1/chat/completions`` with ``stream_options.include_usage`` and
``POST /v1/responses`` (platform.openai.com/docs/api-reference); Gemini
``POST /v1beta/models/{model}:generateContent`` and ``:streamGenerateContent?alt=sse``
(ai.google.dev/api/generate-content); Bedrock ``POST /model/{modelId}/converse`` and
``/converse-stream``, ``/model/{modelId}/invoke`` and ``/invoke-with-response-stream``
(docs.aws.amazon.com/bedrock/latest/APIReference); Claude's Messages API on
``bedrock-mantle``, ``POST /anthropic/v1/messages`` (an endpoint of ``bedrock-anthropic``,
:data:`ENDPOINT_ROUTES`; docs.aws.amazon.com/bedrock/latest/userguide/inference-messages-api.html).
"""

from __future__ import annotations

import functools
import urllib.parse
from collections.abc import Iterator, Mapping
from typing import ClassVar

import attrs

from ..core import canonical
from ..core.errors import CanonicalJSONError, SerializationError
from ..core.limits import API_VERSION_OPTION
from ..core.model import ModelRequest, ProviderSettings
from ..core.output import ModelOutput
from .frame import BodyFragments
from .readers import StreamReader, reader

__all__ = ["ENDPOINT_ROUTES", "ROUTES", "HttpRequest", "Route", "Transport", "error_details"]


@attrs.frozen
class HttpRequest:
    """One model call over HTTP: POST ``path`` (relative to the API's base URL).

    The body comes as :attr:`fragments` (:class:`~.frame.BodyFragments`): hand
    :meth:`iter_body` to an HTTP client that takes an iterable body, with
    :attr:`content_length` as the ``Content-Length`` header (or let the client send it
    chunked), and no buffer of the whole body is built. :attr:`body` is the same bytes
    as one buffer, joined on first use.
    """

    method: str
    path: str
    headers: Mapping[str, str]
    fragments: BodyFragments
    #: the provider whose reader reads the response (``anthropic``)
    provider: str = ""
    #: which of the provider's endpoints the call is for: ``""`` its only (or default)
    #: one, ``"mantle"`` for ``bedrock-anthropic``'s Messages API on bedrock-mantle
    #: (:data:`ENDPOINT_ROUTES`); the client picks the host, the SigV4 service name and
    #: the reader by it
    endpoint: str = ""

    @functools.cached_property
    def body(self) -> bytes:
        """The exact body bytes, as one buffer."""
        return self.fragments.join()

    @property
    def content_length(self) -> int:
        """The body's length in bytes, known without joining it."""
        return self.fragments.size

    def iter_body(self) -> Iterator[bytes]:
        """The body's fragments in order; their concatenation is :attr:`body`."""
        return iter(self.fragments)


@attrs.frozen
class Route:
    """Where a provider's calls go and what a streaming call adds."""

    path: str
    stream_path: str
    headers: tuple[tuple[str, str], ...] = (("content-type", "application/json"),)
    stream_headers: tuple[tuple[str, str], ...] = ()
    #: appended inside the body's closing brace for a streaming call
    stream_fields: bytes = b""
    #: the response header with the provider's request id (lower case)
    request_id_header: str = ""
    #: the members of the error object (``{"error": {...}}``) naming the error type,
    #: the first string one wins
    error_type_keys: tuple[str, ...] = ()
    #: a response header naming the error type (``Type:namespace``), where the body does not
    error_type_header: str = ""
    #: (settings option, request header): an option a deployment sets that names the value
    #: of a header (never a body key); the header keeps its place among ``headers``
    header_options: tuple[tuple[str, str], ...] = ()


_JSON = (("content-type", "application/json"),)
_SSE = (("accept", "text/event-stream"),)

#: Provider name -> its route; ``{model}`` is replaced by the URL-quoted model id.
ROUTES: Mapping[str, Route] = {
    # docs.anthropic.com/en/api/errors: {"type":"error","error":{"type","message"}} and
    # the "request-id" header on every response.
    "anthropic": Route(
        "/v1/messages",
        "/v1/messages",
        (("anthropic-version", "2023-06-01"), *_JSON),
        _SSE,
        b'"stream":true',
        request_id_header="request-id",
        error_type_keys=("type",),
        # rules/providers.yaml's anthropic_version (prefixlock.core.limits), e.g.
        # 2026-10-21: "Anthropic's first new API version since 2023-06-01" (issue 45)
        header_options=((API_VERSION_OPTION, "anthropic-version"),),
    ),
    # docs.aws.amazon.com/bedrock/latest/APIReference/CommonErrors.html: the type in the
    # x-amzn-ErrorType header ("ThrottlingException:http://..."), {"message"} in the body,
    # the request id in x-amzn-RequestId.
    "bedrock-converse": Route(
        "/model/{model}/converse",
        "/model/{model}/converse-stream",
        _JSON,
        (("accept", "application/vnd.amazon.eventstream"),),
        request_id_header="x-amzn-requestid",
        error_type_header="x-amzn-errortype",
    ),
    # InvokeModel / InvokeModelWithResponseStream (botocore bedrock-runtime: "requestUri":
    # "/model/{modelId}/invoke" and "/model/{modelId}/invoke-with-response-stream"); the
    # stream is event-stream framed, its errors are Converse's (CommonErrors.html).
    "bedrock-anthropic": Route(
        "/model/{model}/invoke",
        "/model/{model}/invoke-with-response-stream",
        _JSON,
        (("accept", "application/vnd.amazon.eventstream"),),
        request_id_header="x-amzn-requestid",
        error_type_header="x-amzn-errortype",
    ),
    # ai.google.dev/gemini-api/docs/troubleshooting: {"error":{"code","message","status"}}.
    "gemini": Route(
        "/v1beta/models/{model}:generateContent",
        "/v1beta/models/{model}:streamGenerateContent?alt=sse",
        _JSON,
        _SSE,
        error_type_keys=("status",),
    ),
    # platform.openai.com/docs/guides/error-codes: {"error":{"message","type","code"}};
    # the request id in x-request-id (platform.openai.com/docs/api-reference/debugging-requests).
    "openai-chat": Route(
        "/v1/chat/completions",
        "/v1/chat/completions",
        _JSON,
        _SSE,
        b'"stream":true,"stream_options":{"include_usage":true}',
        request_id_header="x-request-id",
        error_type_keys=("code", "type"),
    ),
    "openai-responses": Route(
        "/v1/responses",
        "/v1/responses",
        _JSON,
        _SSE,
        b'"stream":true',
        request_id_header="x-request-id",
        error_type_keys=("code", "type"),
    ),
}


#: (provider, endpoint) -> the route of a provider's other endpoint (``HttpRequest.endpoint``).
ENDPOINT_ROUTES: Mapping[tuple[str, str], Route] = {
    # Claude's Messages API on bedrock-mantle (bedrock-anthropic with endpoint: mantle):
    # AWS, "Inference using Anthropic Messages API" (inference-messages-api.html): base URL
    # "https://bedrock-mantle.{region}.api.aws/anthropic/v1/messages", "bedrock-mantle:
    # Set anthropic-version: 2023-06-01 as an HTTP header"; streaming is the Messages
    # API's ("stream": true, SSE). The anthropic SDK's AnthropicBedrockMantle
    # (lib/bedrock/_mantle.py) posts /v1/messages under ".../anthropic" and reads its
    # answers and errors as the first-party API's (the Anthropic error object, the
    # request-id header: NOT in the AWS page; the SDK's choice, taken here). An error AWS
    # itself answers (authentication, throttling at the gateway) may name its type in
    # x-amzn-ErrorType, as on bedrock-runtime: read first when present.
    ("bedrock-anthropic", "mantle"): Route(
        "/anthropic/v1/messages",
        "/anthropic/v1/messages",
        (("anthropic-version", "2023-06-01"), *_JSON),
        _SSE,
        b'"stream":true',
        request_id_header="request-id",
        error_type_keys=("type",),
        error_type_header="x-amzn-errortype",
        header_options=((API_VERSION_OPTION, "anthropic-version"),),
    ),
}


def route_for(provider: str, endpoint: str = "") -> Route:
    """The route of ``provider``'s ``endpoint`` (``""``: its only or default one)."""
    return ENDPOINT_ROUTES[provider, endpoint] if endpoint else ROUTES[provider]


class Transport:
    """HTTP requests and response reading for a :class:`~.base.Provider`."""

    name: ClassVar[str]

    def serialize(self, request: ModelRequest) -> bytes:
        raise NotImplementedError

    def fragments(self, request: ModelRequest) -> BodyFragments:
        raise NotImplementedError

    def _settings(self, request: ModelRequest) -> ProviderSettings:
        raise NotImplementedError

    def endpoint(self, settings: ProviderSettings) -> str:
        """Which endpoint these settings send to (``""``: the provider's only one)."""
        return ""

    def http_request(self, request: ModelRequest, *, stream: bool = False) -> HttpRequest:
        """The exact call: method, path, the headers the body needs, and the body as
        fragments (:attr:`HttpRequest.fragments`; :attr:`HttpRequest.body` joins them)."""
        settings = self._settings(request)
        endpoint = self.endpoint(settings)
        route = route_for(self.name, endpoint)
        if stream and route.stream_fields:
            stream_key = route.stream_fields.split(b'"')[1].decode()
            if stream_key in settings.options_value:
                raise SerializationError(
                    f"{self.name}: option {stream_key!r} is set by http_request(stream=...)"
                )
        body = self.fragments(request)
        if stream and route.stream_fields:
            # Every body closes with "}": the stream fields go inside it, last.
            body = body.closed_with(body.close[:-1] + b"," + route.stream_fields + b"}")
        template = route.stream_path if stream else route.path
        path = template.replace("{model}", urllib.parse.quote(settings.model, safe=""))
        headers = dict(route.headers)
        if route.header_options:
            options = settings.options_value
            for option, header in route.header_options:
                value = options.get(option)
                if isinstance(value, str):
                    headers[header] = value
        if stream:
            headers.update(route.stream_headers)
        return HttpRequest("POST", path, headers, body, self.name, endpoint)

    def parse_response(
        self, body: bytes, *, candidate: int | None = None, endpoint: str = ""
    ) -> ModelOutput:
        """The :class:`ModelOutput` of a whole JSON response; ``candidate=i`` picks one
        of several outputs (Gemini candidates, Chat choices), which are refused without
        it. ``endpoint``: the call's :attr:`HttpRequest.endpoint`."""
        return reader(self.name, endpoint).parse_response(body, candidate=candidate)

    def stream_reader(self, *, candidate: int | None = None, endpoint: str = "") -> StreamReader:
        """A reader for one streamed response: ``feed(chunk)``, then ``result()``
        (``endpoint``: the call's :attr:`HttpRequest.endpoint`)."""
        return reader(self.name, endpoint).stream_reader(candidate=candidate)

    def is_retryable(self, status: int, body: bytes, *, endpoint: str = "") -> bool:
        """Whether sending the same request again may succeed after this HTTP error."""
        return reader(self.name, endpoint).is_retryable(status, body)


def error_details(
    provider: str, headers: Mapping[str, str], body: bytes, endpoint: str = ""
) -> tuple[str | None, str | None, str | None]:
    """``(error type, message, request id)`` of an error response, each ``None`` where
    the provider sent none (``headers`` with lower-case names)."""
    route = route_for(provider, endpoint)
    request_id = headers.get(route.request_id_header) if route.request_id_header else None
    kind: str | None = None
    if route.error_type_header and headers.get(route.error_type_header):
        kind = headers[route.error_type_header].partition(":")[0] or None
    message: str | None = None
    try:
        value = canonical.loads(body)
    except (ValueError, CanonicalJSONError, RecursionError):
        value = None
    if isinstance(value, dict):
        error = value.get("error")
        if isinstance(error, dict):
            for key in route.error_type_keys:
                if kind is None and isinstance(error.get(key), str):
                    kind = error[key]
            if isinstance(error.get("message"), str):
                message = error["message"]
        for key in ("message", "Message"):  # Bedrock's body is the error object itself
            if message is None and isinstance(value.get(key), str):
                message = value[key]
    return kind, message, request_id
