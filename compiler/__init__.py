"""prefixlock: compile coding-agent prompts into an append-only, byte-exact history.

The public API: what an agent server and a build script use. Everything else may move
between releases; ``tests/test_public_api.py`` pins this list.

::

    import prefixlock

    bundle = prefixlock.build_bundle("specs/")
    store = prefixlock.open_store("sqlite:///var/lib/agent/conversations.db")  # postgresql://..
    conv = prefixlock.Conversation.open(store, bundle, "conv-1")
    request = conv.handle(prefixlock.AgentRunRequest.from_value({...}))
    body = prefixlock.providers.get("anthropic").serialize(request)
"""

from __future__ import annotations

from importlib import metadata as _metadata

from . import providers
from .core.errors import (
    BuildError,
    BundleError,
    CacheSimulationError,
    CheckpointError,
    CheckpointRaceError,
    ConflictError,
    HistoryError,
    InputError,
    LimitError,
    Location,
    PrefixlockError,
    ResponseError,
    SerializationError,
    SpecError,
    SpecErrors,
    UnknownCallError,
    UnknownNameError,
    UsageError,
    WrongTypeError,
)
from .core.messages import CanonicalMessage, MessageKind, Role
from .core.model import ModelRequest
from .core.output import ModelOutput, Usage
from .providers import Provider
from .runtime.conversation import Conversation
from .runtime.limits import Limits
from .runtime.request import AgentRunRequest, RequestKind
from .runtime.tools import ToolCall, ToolResult
from .runtime.turn import Turn
from .spec.build import build_bundle, check_outputs, find_example_root, write_lock, write_outputs
from .spec.bundle import Bundle
from .store.contract import DurableStore, MemoryStore, Store
from .store.sqlite import SQLiteStore
from .store.urls import open_store

__all__ = [
    "AgentRunRequest",
    "BuildError",
    "Bundle",
    "BundleError",
    "CacheSimulationError",
    "CanonicalMessage",
    "CheckpointError",
    "CheckpointRaceError",
    "ConflictError",
    "Conversation",
    "DurableStore",
    "HistoryError",
    "InputError",
    "LimitError",
    "Limits",
    "Location",
    "MemoryStore",
    "MessageKind",
    "ModelOutput",
    "ModelRequest",
    "PrefixlockError",
    "Provider",
    "RequestKind",
    "ResponseError",
    "Role",
    "SQLiteStore",
    "SerializationError",
    "SpecError",
    "SpecErrors",
    "Store",
    "ToolCall",
    "ToolResult",
    "Turn",
    "UnknownCallError",
    "UnknownNameError",
    "Usage",
    "UsageError",
    "WrongTypeError",
    "__version__",
    "build_bundle",
    "check_outputs",
    "find_example_root",
    "open_store",
    "providers",
    "write_lock",
    "write_outputs",
]

try:
    __version__ = _metadata.version(__name__)
except _metadata.PackageNotFoundError:  # pragma: no cover - run from an unbuilt tree
    __version__ = "0+unknown"
