"""What a client is configured with, apart from sending: where each provider's API is,
how a call is authenticated, how long it may take and how it is retried.

Nothing here imports an HTTP library; :mod:`.client` sends, :mod:`.bedrock` signs.

Sources of the defaults: the base URLs and auth headers of each API reference
(docs.anthropic.com/en/api/getting-started: ``x-api-key``; platform.openai.com/docs/
api-reference/authentication: ``Authorization: Bearer``; ai.google.dev/api#api-keys:
``x-goog-api-key``; docs.aws.amazon.com/bedrock/latest/APIReference: SigV4 for the
service ``bedrock`` at ``bedrock-runtime.REGION.amazonaws.com``, or a Bedrock API key as
``Authorization: Bearer``; Claude's Messages API on Bedrock at
``bedrock-mantle.REGION.api.aws``, SigV4 for the service ``bedrock-mantle`` or the same
Bedrock API key: docs.aws.amazon.com/bedrock/latest/userguide/inference-messages-api.html
and the anthropic SDK's ``lib/bedrock/_mantle.py``). The environment variables are the
official SDKs'.
"""

from __future__ import annotations

import email.utils
import math
import random
from collections.abc import Mapping

import attrs

from ..core.errors import UsageError
from ..core.names import hint
from ..providers import NAMES

__all__ = [
    "BEDROCK_PROVIDERS",
    "ENDPOINTS",
    "ENDPOINT_VARIANTS",
    "Endpoint",
    "Retry",
    "Secret",
    "Timeouts",
    "retry_after",
]


@attrs.frozen(repr=False)
class Secret:
    """A credential: its value never appears in a repr, an error or a log line."""

    value: str

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__


@attrs.frozen
class Endpoint:
    """Where a provider's API is and how its key is sent."""

    base_url: str
    #: environment variables holding the key, the first one set wins
    key_env: tuple[str, ...]
    #: the header carrying the key, and the text before the key in it
    key_header: str
    key_prefix: str = ""
    #: environment variables holding another base URL (the SDKs' own)
    base_url_env: tuple[str, ...] = ()
    #: the SigV4 service name a call is signed for (Bedrock's endpoints; "" for none)
    signing_name: str = ""


#: Bedrock runtime, both of its wires (Converse, InvokeModel with the Claude Messages
#: body). AWS_BEARER_TOKEN_BEDROCK: a Bedrock API key (docs.aws.amazon.com/bedrock/latest/
#: userguide/api-keys-use.html); without one the call is signed with SigV4.
_BEDROCK = Endpoint(
    "https://bedrock-runtime.{region}.amazonaws.com",
    ("AWS_BEARER_TOKEN_BEDROCK",),
    "authorization",
    "Bearer ",
    signing_name="bedrock",
)
#: Claude's Messages API on bedrock-mantle (``bedrock-anthropic`` with ``endpoint: mantle``;
#: the path, ``/anthropic/v1/messages``, is the route's, so a base URL written with the
#: SDK's ``/anthropic`` tail is joined without doubling it). AWS, "Inference using
#: Anthropic Messages API": "bedrock-mantle - Use a Amazon Bedrock API key ... or AWS SigV4
#: credentials"; the anthropic SDK's AnthropicBedrockMantle (lib/bedrock/_mantle.py):
#: ``Authorization: Bearer <key>``, else SigV4 with ``DEFAULT_SERVICE_NAME =
#: "bedrock-mantle"``, base URL ``https://bedrock-mantle.{region}.api.aws/anthropic`` or
#: ``ANTHROPIC_BEDROCK_MANTLE_BASE_URL``. (The SDK also reads a key from
#: ``ANTHROPIC_AWS_API_KEY``; here the client's one key, ``AWS_BEARER_TOKEN_BEDROCK``,
#: serves both endpoints.)
_MANTLE = Endpoint(
    "https://bedrock-mantle.{region}.api.aws",
    ("AWS_BEARER_TOKEN_BEDROCK",),
    "authorization",
    "Bearer ",
    ("ANTHROPIC_BEDROCK_MANTLE_BASE_URL",),
    signing_name="bedrock-mantle",
)
#: The providers Bedrock serves: a region, SigV4 or a Bedrock API key.
BEDROCK_PROVIDERS = frozenset({"bedrock-anthropic", "bedrock-converse"})

#: Provider name -> its endpoint.
ENDPOINTS: Mapping[str, Endpoint] = {
    "anthropic": Endpoint(
        "https://api.anthropic.com",
        ("ANTHROPIC_API_KEY",),
        "x-api-key",
        "",
        ("ANTHROPIC_BASE_URL",),
    ),
    "bedrock-anthropic": _BEDROCK,
    "bedrock-converse": _BEDROCK,
    # google-genai reads GOOGLE_API_KEY first when both are set ("GOOGLE_API_KEY takes
    # precedence", googleapis/python-genai README, "Create a client").
    "gemini": Endpoint(
        "https://generativelanguage.googleapis.com",
        ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
        "x-goog-api-key",
    ),
    "openai-chat": Endpoint(
        "https://api.openai.com",
        ("OPENAI_API_KEY",),
        "authorization",
        "Bearer ",
        ("OPENAI_BASE_URL",),
    ),
    "openai-responses": Endpoint(
        "https://api.openai.com",
        ("OPENAI_API_KEY",),
        "authorization",
        "Bearer ",
        ("OPENAI_BASE_URL",),
    ),
}

#: (provider, endpoint) -> a provider's other endpoint
#: (``prefixlock.providers.transport.HttpRequest.endpoint``).
ENDPOINT_VARIANTS: Mapping[tuple[str, str], Endpoint] = {
    ("bedrock-anthropic", "mantle"): _MANTLE,
}


def endpoint(provider: str) -> Endpoint:
    found = ENDPOINTS.get(provider)
    if found is None:
        raise UsageError(f"unknown provider {provider!r} ({hint(provider, NAMES, 'known')})")
    return found


def join_url(base_url: str, path: str) -> str:
    """``base_url`` + ``path``, where a base URL that already ends with the path's first
    segment (``https://api.openai.com/v1``, as ``OPENAI_BASE_URL`` is written) does not
    get it twice."""
    base = base_url.rstrip("/")
    head, _, rest = path.lstrip("/").partition("/")
    if rest and base.endswith("/" + head):
        return f"{base}/{rest}"
    return base + path


@attrs.frozen
class Timeouts:
    """Seconds a call may take: to connect, between two reads of the response, to write
    the body, and in all (every try and every wait between tries).

    The defaults are the official SDKs' (10 minutes for a response, as the Anthropic and
    OpenAI clients allow a long generation before its first byte) with a connect timeout
    short enough to notice an unreachable host."""

    connect: float = 10.0
    read: float = 600.0
    write: float = 600.0
    total: float = 1800.0

    def __attrs_post_init__(self) -> None:
        for name in ("connect", "read", "write", "total"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise UsageError(f"timeouts.{name}: expected seconds above 0, got {value!r}")


@attrs.frozen
class Retry:
    """How a call that failed in a retry-safe way is sent again (the same bytes).

    The wait before try ``n + 1`` is ``initial * 2**(n-1)``, at most ``max_delay``, times
    a jitter factor in ``(1 - jitter, 1]`` (openai-python and anthropic-sdk-python wait
    the same way: 0.5 s doubling to 8 s, 25 % jitter); a ``retry-after-ms`` or
    ``Retry-After`` header replaces it. The budget: at most ``max_retries`` retries, and
    at most ``max_wait`` seconds of waiting in all; a Retry-After that would pass it ends
    the call with its error. ``seed`` makes the jitter reproducible."""

    max_retries: int = 4
    initial: float = 0.5
    max_delay: float = 8.0
    jitter: float = 0.25
    max_wait: float = 120.0
    seed: int | None = None

    def __attrs_post_init__(self) -> None:
        if type(self.max_retries) is not int or self.max_retries < 0:
            raise UsageError(f"retry.max_retries: expected 0 or more, got {self.max_retries!r}")
        for name in ("initial", "max_delay", "max_wait"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise UsageError(f"retry.{name}: expected seconds, got {value!r}")
        if not (isinstance(self.jitter, int | float) and 0 <= self.jitter <= 1):
            raise UsageError(f"retry.jitter: expected 0 to 1, got {self.jitter!r}")

    def backoff(self, retry: int, rng: random.Random) -> float:
        """The wait before retry number ``retry`` (1, 2, ...) without a server hint."""
        delay: float = min(self.initial * 2.0 ** (retry - 1), self.max_delay)
        return delay * (1 - self.jitter * rng.random())


def retry_after(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds the server asks to wait: ``retry-after-ms`` (the OpenAI and Anthropic
    APIs send it), else ``Retry-After`` as seconds or an HTTP date (RFC 9110 section
    10.2.3) against ``now`` (a POSIX time); ``None`` when neither is usable."""
    raw = headers.get("retry-after-ms")
    if raw is not None:
        try:
            ms = float(raw)
        except ValueError:
            ms = math.nan
        if math.isfinite(ms) and ms >= 0:
            return ms / 1000
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        seconds = _http_date(raw) - now
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _http_date(text: str) -> float:
    try:
        parsed = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return math.nan
    return float(parsed.timestamp()) if parsed.tzinfo is not None else math.nan
