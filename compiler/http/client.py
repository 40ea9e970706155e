"""The HTTP client: sends a provider's :class:`~prefixlock.providers.transport.HttpRequest`
and reads the answer with that provider's reader, sync (:class:`Client`) and async
(:class:`AsyncClient`) with the same API.

The only module that imports httpx2 (httpx's successor: the HTTP library the official
OpenAI and Anthropic SDKs are built on). It knows no wire format: the provider's
``http_request`` built the call, the provider's reader reads the answer, and its
``is_retryable`` and :attr:`ResponseError.retry_safe` alone decide whether a failure is
sent again. Every try sends the same bytes: the call's fragments, streamed, with their
``content-length``.

One pool of connections per client, kept across calls and conversations: make one
client per provider and process, and share it.
"""

from __future__ import annotations

import asyncio
import functools
import os
import random
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import Any, NoReturn

import httpx2 as httpx

from ..core.errors import (
    CallError,
    CallTimeoutError,
    ConnectionLostError,
    ProviderError,
    ResponseError,
    UsageError,
)
from ..core.output import ModelOutput
from ..providers.readers import Reader, reader
from ..providers.readers.base import Listener, StreamReader
from ..providers.transport import HttpRequest, error_details
from .config import (
    BEDROCK_PROVIDERS,
    ENDPOINT_VARIANTS,
    Retry,
    Secret,
    Timeouts,
    endpoint,
    join_url,
    retry_after,
)

__all__ = ["ERROR_BODY_LIMIT", "AsyncClient", "Client"]

#: An error response body is read up to this many bytes (its message is all we need).
ERROR_BODY_LIMIT = 1 << 20


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context (the system's trusted certificates) for every client: loading the
    certificates costs a tenth of a second, once per process rather than per client."""
    return httpx.create_ssl_context()


class _Failure(Exception):
    """One try failed: the error to raise if no retry follows, and the server's wait."""

    def __init__(self, error: CallError, wait: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.wait = wait


class _Attempts:
    """One call's tries, for both clients: the digest of its bytes, its total deadline,
    and the tries and the wait so far. :meth:`after` is the retry decision (what is
    retried, the delay, the budget: :meth:`_Core._next_wait`); a client's loop only
    sends and sleeps."""

    def __init__(self, core: _Core, call: HttpRequest) -> None:
        core._check(call)
        self._core = core
        self.digest = core._digest(call)
        self.deadline = core._clock() + core.timeouts.total
        self.tries = 0
        self.waited = 0.0

    def start(self) -> None:
        """A try begins."""
        self.tries += 1

    def after(self, failure: _Failure) -> float:
        """The wait before the next try, or the error raised when there is none."""
        wait = self._core._next_wait(failure, self.tries, self.waited, self.deadline)
        self.waited += wait
        return wait


class _Core:
    """Everything but the I/O: configuration, auth, errors, the retry decision, the
    reading of an answer's bytes."""

    def __init__(
        self,
        provider: str,
        *,
        api_key: str | None,
        base_url: str | None,
        region: str | None,
        aws_access_key_id: str | None,
        aws_secret_access_key: str | None,
        aws_session_token: str | None,
        timeouts: Timeouts,
        retry: Retry,
        env: Mapping[str, str] | None,
        clock: Callable[[], float],
        wall_clock: Callable[[], float],
    ) -> None:
        self.provider = provider
        point = endpoint(provider)
        environ = os.environ if env is None else env
        self._reader: Reader = reader(provider)
        self.timeouts = timeouts
        self.retry = retry
        self._rng = random.Random(retry.seed)
        self._clock = clock
        self._wall_clock = wall_clock
        key = api_key
        if key is None:
            key = next((environ[v] for v in point.key_env if environ.get(v)), None)
        self._key = None if key is None else Secret(key)
        self._signer: Any = None
        if provider in BEDROCK_PROVIDERS:
            region = region or environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION")
            if not region:
                raise UsageError(f"{provider}: no region (give region=, or set AWS_REGION)")
            if self._key is None:
                from .bedrock import SigV4Signer  # botocore: the optional extra

                access = aws_access_key_id or environ.get("AWS_ACCESS_KEY_ID")
                secret = aws_secret_access_key or environ.get("AWS_SECRET_ACCESS_KEY")
                token = aws_session_token or environ.get("AWS_SESSION_TOKEN")
                self._signer = SigV4Signer(
                    region,
                    None if not access else Secret(access),
                    None if not secret else Secret(secret),
                    None if not token else Secret(token),
                    provider=provider,
                )
        elif self._key is None:
            names = " or ".join(point.key_env)
            raise UsageError(f"{provider}: no API key (give api_key=, or set {names})")
        given = base_url
        if base_url is None:
            base_url = next((environ[v] for v in point.base_url_env if environ.get(v)), None)
        self.base_url = (base_url or point.base_url).replace("{region}", region or "")
        #: per endpoint of this provider (HttpRequest.endpoint): its base URL, the SigV4
        #: service its calls are signed for, and its reader (a base_url= given serves
        #: every endpoint: a proxy or a stand-in server)
        self._bases = {"": self.base_url}
        self._services = {"": point.signing_name}
        self._readers = {"": self._reader}
        for (name, variant), other in sorted(ENDPOINT_VARIANTS.items()):
            if name != provider:
                continue
            url = given or next((environ[v] for v in other.base_url_env if environ.get(v)), None)
            self._bases[variant] = (url or other.base_url).replace("{region}", region or "")
            self._services[variant] = other.signing_name
            self._readers[variant] = reader(provider, variant)
        secrets = [] if self._key is None else [self._key.value]
        if self._signer is not None:
            secrets += self._signer.secrets()
        self._secrets = tuple(s for s in secrets if s)
        self._key_header = (point.key_header, point.key_prefix)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(provider={self.provider!r}, base_url={self.base_url!r})"

    # -- a try ---------------------------------------------------------------------

    def _check(self, call: HttpRequest) -> None:
        if not isinstance(call, HttpRequest):
            raise UsageError(
                f"expected provider.http_request(...)'s HttpRequest, got {type(call).__name__}"
            )
        if call.provider and call.provider != self.provider:
            raise UsageError(
                f"a {call.provider} call sent through a {self.provider} client: "
                "make one client per provider"
            )
        if call.endpoint not in self._bases:
            raise UsageError(f"{self.provider} has no endpoint {call.endpoint!r}")

    def _prepare(self, call: HttpRequest, digest: str | None) -> tuple[str, dict[str, str]]:
        """The URL and the headers of one try (a SigV4 signature is made per try)."""
        url = join_url(self._bases[call.endpoint], call.path)
        headers = dict(call.headers)
        if self._signer is not None:
            assert digest is not None
            service = self._services[call.endpoint]
            headers = self._signer.sign(call.method, url, headers, digest, service)
        elif self._key is not None:
            name, prefix = self._key_header
            headers[name] = prefix + self._key.value
        headers["content-length"] = str(call.content_length)
        return url, headers

    def _digest(self, call: HttpRequest) -> str | None:
        if self._signer is None:
            return None
        from .bedrock import payload_hash

        return payload_hash(call.fragments)

    def _timeout(self, deadline: float) -> httpx.Timeout:
        left = max(deadline - self._clock(), 0.001)
        t = self.timeouts
        return httpx.Timeout(
            connect=min(t.connect, left),
            read=min(t.read, left),
            write=min(t.write, left),
            pool=min(t.connect, left),
        )

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _where(self, call: HttpRequest) -> str:
        return f"{self.provider} {call.method} {call.path.partition('?')[0]}"

    def _status_failure(
        self, call: HttpRequest, status: int, headers: Mapping[str, str], body: bytes
    ) -> _Failure:
        kind, message, request_id = error_details(self.provider, headers, body, call.endpoint)
        message = None if message is None else self._scrub(message)
        text = f"{self._where(call)}: HTTP {status}"
        if kind:
            text += f" {kind}"
        if message:
            text += f": {message}"
        error = ProviderError(
            text,
            retry_safe=self._readers[call.endpoint].is_retryable(status, body),
            status=status,
            error_type=kind,
            provider_message=message,
            request_id=request_id,
        )
        return _Failure(error, retry_after(headers, self._wall_clock()))

    def _read_failure(
        self,
        call: HttpRequest,
        err: ResponseError,
        status: int,
        headers: Mapping[str, str],
        *,
        ended: bool,
    ) -> _Failure:
        """A response the reader refused: an error event mid-stream, an unreadable body,
        or (``ended``: refused when the stream was over) a stream cut short."""
        request_id = error_details(self.provider, headers, b"", call.endpoint)[2]
        reason = self._scrub(err.reason)
        kind: type[CallError] = ProviderError
        if ended and err.retry_safe and err.error_type is None:
            kind = ConnectionLostError
        error = kind(
            f"{self._where(call)}: HTTP {status}: {reason}",
            retry_safe=err.retry_safe,
            status=status,
            error_type=err.error_type,
            provider_message=reason,
            request_id=request_id,
        )
        error.__cause__ = err
        return _Failure(error, None)

    def _transport_failure(self, call: HttpRequest, err: httpx.HTTPError) -> _Failure:
        """An exception of httpx: a timeout, or a connection that failed, closed or
        reset (retry-safe: the same bytes go again)."""
        if isinstance(err, httpx.TimeoutException):
            t = self.timeouts
            which, seconds = {
                httpx.ConnectTimeout: ("connect", t.connect),
                httpx.ReadTimeout: ("read", t.read),
                httpx.WriteTimeout: ("write", t.write),
                httpx.PoolTimeout: ("pool", t.connect),
            }.get(type(err), ("total", t.total))
            error: CallError = CallTimeoutError(
                f"{self._where(call)}: {which} timeout of {seconds:g} s", retry_safe=True
            )
        else:
            detail = self._scrub(str(err)) or type(err).__name__
            error = ConnectionLostError(
                f"{self._where(call)}: connection lost ({type(err).__name__}: {detail})",
                retry_safe=True,
            )
        return _Failure(error, None)

    def _total_failure(self, call: HttpRequest) -> _Failure:
        return _Failure(
            CallTimeoutError(
                f"{self._where(call)}: total timeout of {self.timeouts.total:g} s passed",
                retry_safe=False,
            )
        )

    def _next_wait(self, failure: _Failure, tries: int, waited: float, deadline: float) -> float:
        """The wait before the next try, or the error raised (with ``tries``) when there
        is none: not retry-safe, the retries or the wait budget spent, or the total
        timeout would pass."""
        error = failure.error
        error.tries = tries
        if not error.retry_safe or tries > self.retry.max_retries:
            self._give_up(error, tries)
        wait = failure.wait if failure.wait is not None else self.retry.backoff(tries, self._rng)
        if waited + wait > self.retry.max_wait or self._clock() + wait >= deadline:
            self._give_up(error, tries, f"waiting {wait:g} s more is past the retry budget")
        return wait

    @staticmethod
    def _give_up(error: CallError, tries: int, why: str = "") -> NoReturn:
        tail = f"{tries} {'try' if tries == 1 else 'tries'}" + (f"; {why}" if why else "")
        head = error.reason
        if error.request_id:
            head += f" (request id {error.request_id})"
        # ResponseError's message is fixed at construction: rebuild it with the count.
        Exception.__init__(error, f"{head} [{tail}] ({_hint(error)})")
        raise error

    def _build(
        self,
        http: httpx.Client | httpx.AsyncClient,
        call: HttpRequest,
        attempts: _Attempts,
        content: Iterator[bytes] | AsyncIterator[bytes],
    ) -> httpx.Request:
        """The request of one try (the same bytes every try: ``content`` streams the
        call's fragments)."""
        url, headers = self._prepare(call, attempts.digest)
        return http.build_request(
            call.method,
            url,
            headers=headers,
            content=content,
            timeout=self._timeout(attempts.deadline),
        )

    def _whole(
        self, call: HttpRequest, body: bytes, status: int, headers: Mapping[str, str]
    ) -> ModelOutput:
        """A whole response body read, or the try's failure."""
        try:
            return self._readers[call.endpoint].parse_response(body)
        except ResponseError as err:
            raise self._read_failure(call, err, status, headers, ended=False) from None

    def _chunk(
        self,
        call: HttpRequest,
        reader: StreamReader,
        chunk: bytes,
        status: int,
        headers: Mapping[str, str],
        deadline: float,
    ) -> None:
        """One chunk of a stream fed to ``reader``, or the try's failure (the total
        timeout passed, or the reader refused it)."""
        if self._clock() >= deadline:
            raise self._total_failure(call)
        try:
            reader.feed(chunk)
        except ResponseError as err:
            raise self._read_failure(call, err, status, headers, ended=False) from None

    def _ended(
        self, call: HttpRequest, reader: StreamReader, status: int, headers: Mapping[str, str]
    ) -> ModelOutput:
        """The output of a stream that ended, or the try's failure."""
        try:
            return reader.result()
        except ResponseError as err:
            raise self._read_failure(call, err, status, headers, ended=True) from None

    def _stream_reader(self, call: HttpRequest, on_event: Listener | None) -> StreamReader:
        stream = self._readers[call.endpoint].stream_reader()
        if on_event is not None:
            stream.listener = on_event
        return stream


def _hint(error: ResponseError) -> str:
    return "a retry with the same event id is safe" if error.retry_safe else "do not retry as is"


def _lower(headers: httpx.Headers) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


class Client(_Core):
    """A synchronous client for one provider (``"anthropic"``, ``"openai-chat"``, ...).

    ``api_key`` and ``base_url`` default to the official SDKs' environment variables
    (``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``, ``GEMINI_API_KEY``/``GOOGLE_API_KEY``;
    ``ANTHROPIC_BASE_URL``, ``OPENAI_BASE_URL``, with or without its ``/v1``) and the
    public API. Bedrock signs with AWS SigV4 (``region`` or ``AWS_REGION``; explicit
    keys, else botocore's credential chain; needs ``prefixlock[bedrock]``), or sends a
    Bedrock API key (``api_key`` or ``AWS_BEARER_TOKEN_BEDROCK``). A call for another
    endpoint of the provider (:attr:`HttpRequest.endpoint`: ``bedrock-anthropic``'s
    ``mantle``, Claude's Messages API on bedrock-mantle) goes to that endpoint's host
    (``ANTHROPIC_BEDROCK_MANTLE_BASE_URL``, else ``bedrock-mantle.REGION.api.aws``; a
    ``base_url`` given serves every endpoint), signed for its SigV4 service and read by
    its reader.

    ``sleep`` and ``clock`` are injectable so tests never wait."""

    def __init__(
        self,
        provider: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        region: str | None = None,
        aws_access_key_id: str | None = None,
        aws_secret_access_key: str | None = None,
        aws_session_token: str | None = None,
        timeouts: Timeouts | None = None,
        retry: Retry | None = None,
        env: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(
            provider,
            api_key=api_key,
            base_url=base_url,
            region=region,
            aws_access_key_id=aws_access_key_id,
            aws_secret_access_key=aws_secret_access_key,
            aws_session_token=aws_session_token,
            timeouts=timeouts or Timeouts(),
            retry=retry or Retry(),
            env=env,
            clock=clock,
            wall_clock=wall_clock,
        )
        self._sleep = sleep
        self._http = httpx.Client(transport=transport, verify=_tls(), follow_redirects=False)

    def send(self, call: HttpRequest) -> ModelOutput:
        """Send a non-streaming call (``provider.http_request(request)``) and read its
        JSON response; retried as :class:`~.config.Retry` says."""
        return self._run(call, False, None)

    def stream(self, call: HttpRequest, on_event: Listener | None = None) -> ModelOutput:
        """Send a streaming call (``provider.http_request(request, stream=True)``) and
        read the stream; ``on_event(name, data)`` sees every event as it arrives (a
        retried call's events come again from the start)."""
        return self._run(call, True, on_event)

    def close(self) -> None:
        """Close the pooled connections."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, call: HttpRequest, stream: bool, on_event: Listener | None) -> ModelOutput:
        attempts = _Attempts(self, call)
        while True:
            attempts.start()
            try:
                return self._try(call, attempts, stream, on_event)
            except _Failure as failure:
                wait = attempts.after(failure)
            self._sleep(wait)

    def _try(
        self, call: HttpRequest, attempts: _Attempts, stream: bool, on_event: Listener | None
    ) -> ModelOutput:
        request = self._build(self._http, call, attempts, iter(call.fragments))
        try:
            response = self._http.send(request, stream=True)
        except httpx.HTTPError as err:
            raise self._transport_failure(call, err) from None
        try:
            status, got = response.status_code, _lower(response.headers)
            if not 200 <= status < 300:
                raise self._status_failure(call, status, got, _read_error(response))
            if not stream:
                return self._whole(call, response.read(), status, got)
            reader = self._stream_reader(call, on_event)
            for chunk in response.iter_bytes():
                self._chunk(call, reader, chunk, status, got, attempts.deadline)
            return self._ended(call, reader, status, got)
        except httpx.HTTPError as err:
            raise self._transport_failure(call, err) from None
        finally:
            response.close()


def _read_error(response: httpx.Response) -> bytes:
    body = bytearray()
    for chunk in response.iter_bytes():
        body += chunk
        if len(body) >= ERROR_BODY_LIMIT:
            break
    return bytes(body[:ERROR_BODY_LIMIT])


async def _aread_error(response: httpx.Response) -> bytes:
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) >= ERROR_BODY_LIMIT:
            break
    return bytes(body[:ERROR_BODY_LIMIT])


async def _fragments(call: HttpRequest) -> AsyncIterator[bytes]:
    for fragment in call.fragments:
        yield fragment


class AsyncClient(_Core):
    """The asynchronous :class:`Client`: the same arguments (``sleep`` a coroutine
    function), ``await client.send(call)``, ``await client.stream(call, on_event)``."""

    def __init__(
        self,
        provider: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        region: str | None = None,
        aws_access_key_id: str | None = None,
        aws_secret_access_key: str | None = None,
        aws_session_token: str | None = None,
        timeouts: Timeouts | None = None,
        retry: Retry | None = None,
        env: Mapping[str, str] | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(
            provider,
            api_key=api_key,
            base_url=base_url,
            region=region,
            aws_access_key_id=aws_access_key_id,
            aws_secret_access_key=aws_secret_access_key,
            aws_session_token=aws_session_token,
            timeouts=timeouts or Timeouts(),
            retry=retry or Retry(),
            env=env,
            clock=clock,
            wall_clock=wall_clock,
        )
        self._sleep = sleep
        self._http = httpx.AsyncClient(transport=transport, verify=_tls(), follow_redirects=False)

    async def send(self, call: HttpRequest) -> ModelOutput:
        """As :meth:`Client.send`."""
        return await self._run(call, False, None)

    async def stream(self, call: HttpRequest, on_event: Listener | None = None) -> ModelOutput:
        """As :meth:`Client.stream`."""
        return await self._run(call, True, on_event)

    async def aclose(self) -> None:
        """Close the pooled connections."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _run(self, call: HttpRequest, stream: bool, on_event: Listener | None) -> ModelOutput:
        attempts = _Attempts(self, call)
        while True:
            attempts.start()
            try:
                return await self._try(call, attempts, stream, on_event)
            except _Failure as failure:
                wait = attempts.after(failure)
            await self._sleep(wait)

    async def _try(
        self, call: HttpRequest, attempts: _Attempts, stream: bool, on_event: Listener | None
    ) -> ModelOutput:
        request = self._build(self._http, call, attempts, _fragments(call))
        try:
            response = await self._http.send(request, stream=True)
        except httpx.HTTPError as err:
            raise self._transport_failure(call, err) from None
        try:
            status, got = response.status_code, _lower(response.headers)
            if not 200 <= status < 300:
                raise self._status_failure(call, status, got, await _aread_error(response))
            if not stream:
                return self._whole(call, await response.aread(), status, got)
            reader = self._stream_reader(call, on_event)
            async for chunk in response.aiter_bytes():
                self._chunk(call, reader, chunk, status, got, attempts.deadline)
            return self._ended(call, reader, status, got)
        except httpx.HTTPError as err:
            raise self._transport_failure(call, err) from None
        finally:
            await response.aclose()
