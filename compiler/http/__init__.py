"""Sending model calls over HTTP: a small client on httpx2 for all six wires.

::

    from prefixlock.http import Client

    client = Client("anthropic")                 # ANTHROPIC_API_KEY; one per process
    output = conv.call(client)                   # build, send (retried), record
    output = conv.call(client, stream=True, on_event=show)

    async with AsyncClient("openai-responses") as client:
        output = await conv.acall(client)

The client sends what ``provider.http_request(request, stream=...)`` built, byte for
byte (the fragments streamed, ``content-length`` set), adds the provider's auth (an API
key header, or AWS SigV4 for Bedrock through botocore, signed for the service of the
call's endpoint: ``bedrock``, or ``bedrock-mantle`` for Claude's Messages API there,
:data:`ENDPOINT_VARIANTS`), retries what the provider's
``is_retryable`` and :attr:`~prefixlock.ResponseError.retry_safe` call safe with
exponential backoff, jitter and the server's ``Retry-After``, and reads the answer with
the provider's reader.

Connections are pooled per client and kept across calls and conversations. HTTP/1.1
only: HTTP/2 (httpx2's ``h2`` extra) waits for a measurement that shows a gain, which
needs a provider's real endpoint (the stand-in server of the tests speaks HTTP/1.1).

Errors are :class:`~prefixlock.core.errors.CallError`\\ s::

    CallError                 status, error_type, provider_message, request_id, tries
    ├── ProviderError         an error status, an error event mid-stream, an unreadable body
    ├── ConnectionLostError   no connection, closed, reset, or a stream cut short
    └── CallTimeoutError      connect, read or total timeout
"""

from __future__ import annotations

from ..core.errors import CallError, CallTimeoutError, ConnectionLostError, ProviderError
from .client import AsyncClient, Client
from .config import ENDPOINT_VARIANTS, ENDPOINTS, Endpoint, Retry, Secret, Timeouts

__all__ = [
    "ENDPOINTS",
    "ENDPOINT_VARIANTS",
    "AsyncClient",
    "CallError",
    "CallTimeoutError",
    "Client",
    "ConnectionLostError",
    "Endpoint",
    "ProviderError",
    "Retry",
    "Secret",
    "Timeouts",
]
