"""What :meth:`Conversation.call <prefixlock.runtime.conversation.Conversation.call>`
needs of a client, as protocols: the runtime never imports the HTTP stage, which sits
beside it; ``prefixlock.http.Client`` and ``AsyncClient`` satisfy these (and so may a
test double, or another transport)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..core.output import ModelOutput
from ..providers.readers.base import Listener
from ..providers.transport import HttpRequest

__all__ = ["AsyncModelClient", "ModelClient"]


@runtime_checkable
class ModelClient(Protocol):
    """Sends one provider's calls and reads the answers."""

    @property
    def provider(self) -> str:
        """The provider registry name (``anthropic``)."""
        ...

    def send(self, call: HttpRequest) -> ModelOutput: ...

    def stream(self, call: HttpRequest, on_event: Listener | None = None) -> ModelOutput: ...


@runtime_checkable
class AsyncModelClient(Protocol):
    """The asynchronous :class:`ModelClient`."""

    @property
    def provider(self) -> str: ...

    async def send(self, call: HttpRequest) -> ModelOutput: ...

    async def stream(self, call: HttpRequest, on_event: Listener | None = None) -> ModelOutput: ...
