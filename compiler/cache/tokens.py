"""Token counts for the cache simulator: a documented estimate, or a real tokenizer.

The default is :class:`ByteEstimate`: **ceil(UTF-8 bytes / 4)** of a text. Four bytes
per token is the usual rule of thumb for English prose and code with BPE tokenizers;
it is deterministic, needs nothing installed, and is what the simulator's tests and
``prefixlock verify``'s default table use, so their numbers are the same on every
machine.

``tiktoken`` (OpenAI's BPE tokenizer) is used only when asked for by name and
installed; it is not a dependency. Its ``o200k_base`` encoding is the GPT-4o / GPT-5
family's; for other providers it is still only an approximation (their tokenizers are
not published), which is why the estimate stays the default.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol

import attrs

from ..core.errors import UnknownNameError, UsageError
from ..core.names import hint

__all__ = ["NAMES", "ByteEstimate", "Tiktoken", "Tokenizer", "get_tokenizer"]

#: Bytes per token of the estimate.
BYTES_PER_TOKEN = 4


class Tokenizer(Protocol):
    """Counts the tokens of a text."""

    @property
    def name(self) -> str: ...

    def count(self, text: str) -> int: ...


@attrs.frozen
class ByteEstimate:
    """``ceil(len(text.encode("utf-8")) / bytes_per_token)``; 0 for the empty text."""

    bytes_per_token: int = BYTES_PER_TOKEN

    @property
    def name(self) -> str:
        return "estimate"

    def count(self, text: str) -> int:
        size = len(text.encode("utf-8"))
        return -(-size // self.bytes_per_token)


@attrs.frozen
class Tiktoken:
    """A tiktoken encoding (only when the package is installed)."""

    encoding: Any
    encoding_name: str

    @property
    def name(self) -> str:
        return f"tiktoken:{self.encoding_name}"

    def count(self, text: str) -> int:
        return len(self.encoding.encode(text, disallowed_special=()))


#: Names :func:`get_tokenizer` accepts.
NAMES = ("estimate", "tiktoken")


def get_tokenizer(name: str = "estimate") -> Tokenizer:
    """The tokenizer called ``name``: ``estimate`` (default) or ``tiktoken``.

    ``tiktoken`` raises :class:`PrefixlockError` when the package is not installed
    (never a silent fallback: the numbers would change meaning).
    """
    if name == "estimate":
        return ByteEstimate()
    if name == "tiktoken":
        try:
            module = importlib.import_module("tiktoken")
        except ImportError:
            raise UsageError(
                "tokenizer 'tiktoken' is not installed (pip install tiktoken), "
                "or use the default 'estimate' (UTF-8 bytes / 4)"
            ) from None
        encoding_name = "o200k_base"
        return Tiktoken(module.get_encoding(encoding_name), encoding_name)
    raise UnknownNameError(f"unknown tokenizer {name!r} ({hint(name, NAMES, 'known')})")
