"""Claude Messages on AWS Bedrock: ``InvokeModel`` / ``InvokeModelWithResponseStream``
with the Anthropic Messages body (``POST /model/{modelId}/invoke`` and
``/model/{modelId}/invoke-with-response-stream`` on ``bedrock-runtime``, SigV4 service
``bedrock``).

The body is :mod:`prefixlock.providers.anthropic`'s, byte for byte, with the differences
Bedrock documents (every other member, block, cache marker and refusal is the
Anthropic wire's: this module only sets them):

* ``"anthropic_version": "bedrock-2023-05-31"`` is the first body member, the version
  the body speaks (AWS, "Inference using Anthropic Messages API": "bedrock-runtime: Set
  ``"anthropic_version": "bedrock-2023-05-31"`` in the request body";
  docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-anthropic-claude-messages.html,
  "anthropic_version - (Required) The anthropic version. The value must be
  bedrock-2023-05-31."). No ``anthropic-version`` header is sent.
* No ``model`` member: the model id travels in the path (``modelId`` is a URI member of
  botocore's ``InvokeModelRequest``, ``"location": "uri"``, :attr:`URI_MEMBERS`), so
  :meth:`body` carries it as ``modelId`` for the SDK checks and :meth:`serialize` leaves
  it out. The anthropic SDK's Bedrock client does the same (``lib/bedrock/_client.py``:
  it pops ``model`` from the JSON and builds ``/model/{model}/invoke``).
* No ``stream`` member: streaming is the path (``/invoke-with-response-stream``; the
  SDK client pops ``stream`` too), so a streaming call sends the same bytes.
* Beta features travel as the body member ``anthropic_beta`` (a list of strings; the
  SDK's Bedrock client moves the ``anthropic-beta`` header there), which the agent's
  settings options may set like any other top-level option.

Model ids: Bedrock's (``anthropic.claude-sonnet-5-5``, with an inference-profile prefix
``us.``/``global.`` or as an ARN); the build warns on others as for Bedrock Converse
(:mod:`prefixlock.core.models`).

Cache rule: Anthropic's (``cache_control`` markers, never more than 4, the top-level
TAIL marker; ``cache_ttl`` 5m / 1h / auto, :mod:`prefixlock.providers.cache_ttl`).
Bedrock documents prompt caching for Claude on InvokeModel with the same
``cache_control`` field (docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html)
and takes a one-hour TTL on the same Claude models as Converse's ``cachePoint``
(:func:`prefixlock.core.limits.one_hour_ttl_refusal`: the build and :meth:`serialize`
refuse ``cache_ttl: 1h``/``auto`` on the others).

Thinking blocks (opaque parts) carry the provider name ``bedrock-anthropic``; a failover
between this wire and ``anthropic`` or ``bedrock-converse`` keeps their signatures
(:mod:`prefixlock.runtime.failover`).

Newer Claude models on Bedrock (``options: {endpoint: mantle}``): Anthropic's Bedrock
page calls InvokeModel and Converse "the legacy Amazon Bedrock integration" for "Opus
4.6 and earlier"; newer models take the plain Messages API at ``/anthropic/v1/messages``
with SSE streaming (platform.claude.com/docs/en/build-with-claude/claude-on-amazon-bedrock-legacy).
With ``endpoint: mantle`` this wire sends that call instead: ``POST /anthropic/v1/messages``
on ``https://bedrock-mantle.{region}.api.aws`` (AWS, "Inference using Anthropic Messages
API", docs.aws.amazon.com/bedrock/latest/userguide/inference-messages-api.html: "Base
URL https://bedrock-mantle.{region}.api.aws/anthropic/v1/messages"; the anthropic SDK's
``AnthropicBedrockMantle``, ``lib/bedrock/_mantle.py``, base URL
``https://bedrock-mantle.{region}.api.aws/anthropic`` and its ``messages.create``
posting ``/v1/messages``). The body is then the ``anthropic`` wire's byte for byte
(``model`` first, no ``anthropic_version`` member; ``"stream": true`` for a stream),
the version is the ``anthropic-version`` header ("bedrock-mantle: Set
``anthropic-version: 2023-06-01`` as an HTTP header", the same AWS page; the
``anthropic_version`` option may name another, as on ``anthropic``), and the answer is
SSE, read by the Anthropic stream reader. Everything that is Bedrock's stays: the
model ids, the one-hour TTL rule by model, the cache simulator's minimum tokens and
prices, the opaque parts' provider name (so failover keeps thinking signatures as on
InvokeModel). The endpoint is part of the settings, so it is in the lock and in each
conversation's root.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ..core.canonical import Ordered
from ..core.limits import ENDPOINT_OPTION, bedrock_endpoint
from ..core.model import ModelRequest, ProviderSettings
from .anthropic import Anthropic
from .base import Markers

#: The body member naming the Messages API version, and the one value Bedrock takes.
VERSION_KEY = "anthropic_version"
VERSION = "bedrock-2023-05-31"


class BedrockAnthropic(Anthropic):
    name: ClassVar[str] = "bedrock-anthropic"

    MODEL_KEY = None  # a URI member: see URI_MEMBERS and body()
    URI_MEMBERS = ("modelId",)
    #: ``model`` and ``stream`` are not body members on Bedrock (the path carries them);
    #: ``anthropic_version`` is this module's.
    RESERVED_OPTIONS = Anthropic.RESERVED_OPTIONS | frozenset(
        {VERSION_KEY, "model", "stream", "modelId"}
    )

    #: The endpoint of ``options: {endpoint: mantle}`` (the Messages API on bedrock-mantle).
    MANTLE = "mantle"

    def endpoint(self, settings: ProviderSettings) -> str:
        """The Bedrock endpoint the settings choose: ``""`` for InvokeModel (this wire's
        default route), ``"mantle"`` for the Messages API on bedrock-mantle."""
        return self.MANTLE if bedrock_endpoint(settings.options_value) == self.MANTLE else ""

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The InvokeModel params: ``modelId`` first, then :meth:`wire_body` (the JSON
        ``body``). On the mantle endpoint the body itself (``model`` is a member)."""
        settings = self._settings(request)
        if self.endpoint(settings):
            return super().body(request)
        out = Ordered(modelId=settings.model)
        out.update(super().body(request))
        return out

    def split_options(self, options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        # endpoint is prefixlock's own (core.limits): it picks the route, never a body key
        nested, sent = super().split_options(options)
        sent.pop(ENDPOINT_OPTION, None)
        return nested, sent

    def head(
        self,
        request: ModelRequest,
        settings: ProviderSettings,
        markers: Markers,
        nested: Mapping[str, Any],
    ) -> Ordered:
        if self.endpoint(settings):
            # the anthropic wire's head: the model first (MODEL_KEY is None here)
            out = Ordered([("model", settings.model)])
        else:
            out = Ordered([(VERSION_KEY, VERSION)])
        out.update(super().head(request, settings, markers, nested))
        return out
