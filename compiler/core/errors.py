"""Every error prefixlock raises, in one hierarchy.

::

    PrefixlockError                 base; the CLI prints str(err) and exits 2 (bad input)
    ├── SpecErrors                  one or more SpecError of an input file (YAML, template,
    │                               request, scenario), sorted by file, line, column, path
    ├── BuildError                  the bundle could not be built or its outputs written
    ├── InputError                  a file, folder, body or revision that is missing,
    │   │                           unreadable or not what the operation reads
    │   ├── GitError                git is missing, or refused a command
    │   ├── BundleError             a compiled bundle (build/) with a part missing or not
    │   │                           the one its prefixlock.lock pins (Bundle.load)
    │   └── WrongTypeError          a value of the wrong type handed to the public API (a
    │                               dict where an AgentRunRequest goes); also a TypeError
    ├── UsageError                  arguments the operation cannot use (a history length
    │                               below 2, a target that must not exist yet, ...)
    ├── UnknownNameError            a mode, provider or tokenizer name nobody defined
    ├── ConflictError               an event id re-delivered with different content
    ├── UnknownCallError            a tool result for a call id nobody made
    ├── HistoryError                an operation that the append-only history refuses
    ├── CheckpointError             a store or record that is corrupt, truncated or racing
    │   └── CheckpointRaceError     another writer appended the same seq first
    ├── SerializationError          a provider cannot express a message part
    ├── ResponseError               a provider response or stream that cannot be read or
    │   │                           reports an error; ``retry_safe`` says whether sending
    │   │                           the same request again (same event id) may succeed
    │   ├── ResponseLimitError      a response, a stream line or event over its size limit
    │   │                           (a limit error too)
    │   └── CallError               a model call over HTTP (prefixlock.http) failed after
    │       │                       ``tries`` sends: ``status``, ``error_type``,
    │       │                       ``provider_message``, ``request_id`` where known
    │       ├── ProviderError       the provider answered with an error: an error status,
    │       │                       an error event mid-stream, a body it cannot read
    │       ├── ConnectionLostError no connection, or it was closed or reset, or the
    │       │                       stream ended before its final event (retry-safe)
    │       └── CallTimeoutError    connect, read or total timeout
    ├── CanonicalJSONError          a value with no canonical JSON form (NaN, a non-string
    │                               key, a lone surrogate, nesting past the limit, ...)
    ├── LimitError                  a text input (a turn, a tool output, a summary, model
    │                               output, instructions, a response) over its documented
    │                               size limit (docs/limits.md); refused before anything
    │                               is saved
    └── CacheSimulationError        a body the cache simulator cannot read or price

A :class:`SpecError` is a value, not an exception: loaders collect all of them for a file
and raise one :class:`SpecErrors` so that the user sees every problem at once.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs


@attrs.frozen(order=True)
class Location:
    """Where a value came from: file, 1-based line and column."""

    file: str
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        if self.line <= 0:
            return self.file
        if self.column <= 0:  # templates: Jinja knows lines, not columns
            return f"{self.file}:{self.line}"
        return f"{self.file}:{self.line}:{self.column}"


@attrs.frozen(order=True)
class SpecError:
    """One problem in one input, with its location and JSON path (``$.rules[2].kind``)."""

    location: Location
    path: str
    message: str

    def __str__(self) -> str:
        where = str(self.location)
        if self.path:
            return f"{where}: {self.path}: {self.message}"
        return f"{where}: {self.message}"


class PrefixlockError(Exception):
    """Base class of every error prefixlock raises on purpose."""


class SpecErrors(PrefixlockError):
    """All problems found in one or more input files, sorted."""

    def __init__(self, errors: Iterable[SpecError]) -> None:
        self.errors: tuple[SpecError, ...] = tuple(sorted(set(errors)))
        super().__init__("\n".join(str(e) for e in self.errors))


class BuildError(PrefixlockError):
    """The bundle could not be built."""


class InputError(PrefixlockError):
    """A file, folder, body or revision is missing, unreadable or not what is read."""


class GitError(InputError):
    """git is missing, or refused a command."""


class BundleError(InputError):
    """A compiled bundle that cannot be loaded: a part missing, not a regular file, or
    not the bytes its lock pins; every problem is one line of the message, naming it."""


class WrongTypeError(InputError, TypeError):
    """A value of the wrong type handed to the public API: a dict where an
    :class:`AgentRunRequest` goes, a string where a list of results goes. Raised before
    anything is read from the value, so nothing changes. Also a :class:`TypeError`."""


def require_type(
    value: object, expected: type | tuple[type, ...], field: str, hint: str = ""
) -> None:
    """Raise :class:`WrongTypeError` naming ``field`` unless ``value`` is an ``expected``.

    ``bool`` is not accepted where ``int`` is expected (it is one in Python, not in JSON)."""
    kinds = expected if isinstance(expected, tuple) else (expected,)
    if isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds):
        return
    names = " or ".join(_TYPE_WORDS.get(k, k.__name__) for k in kinds)
    got = "None" if value is None else _TYPE_WORDS.get(type(value), type(value).__name__)
    raise WrongTypeError(f"{field}: expected {_article(names)}, got {_article(got)}{hint}")


#: How a builtin type is named in a message (JSON's words, which a caller recognises).
_TYPE_WORDS: dict[type, str] = {str: "string", int: "integer", bool: "boolean", dict: "dict"}


def _article(noun: str) -> str:
    if noun == "None":
        return noun
    return f"{'an' if noun[0] in 'AEIOUaeiou' else 'a'} {noun}"


class UsageError(PrefixlockError):
    """Arguments the operation cannot use."""


class UnknownNameError(PrefixlockError):
    """A mode, provider or tokenizer name that is not defined."""


class ConflictError(PrefixlockError):
    """An event id was delivered again with different content."""


class UnknownCallError(PrefixlockError):
    """A tool result names a call id that no assistant message made."""


class HistoryError(PrefixlockError):
    """An operation the append-only history refuses."""


class CheckpointError(PrefixlockError):
    """A checkpoint store or record is corrupt, truncated or inconsistent."""


class CheckpointRaceError(CheckpointError):
    """Another writer appended to the same conversation first."""


class SerializationError(PrefixlockError):
    """A provider cannot express part of a request."""


class ResponseError(PrefixlockError):
    """A provider response or stream that cannot be read, or that reports an error.

    Nothing of it was recorded. ``retry_safe`` is true when sending the same request
    again (the same event id, so the same bytes) may succeed: a truncated stream, a
    rate limit, an overloaded or failing server. It is false when the provider refused
    the request itself, or sent something this prefixlock cannot read.
    """

    def __init__(self, message: str, *, retry_safe: bool, error_type: str | None = None) -> None:
        self.retry_safe = retry_safe
        #: the provider's own error type or code, when it sent one (``overloaded_error``)
        self.error_type = error_type
        #: the message without the retry hint
        self.reason = message
        hint = "a retry with the same event id is safe" if retry_safe else "do not retry as is"
        super().__init__(f"{message} ({hint})")


class CallError(ResponseError):
    """A model call over HTTP failed (:mod:`prefixlock.http`), after ``tries`` sends of
    the same bytes. ``status`` is the last HTTP status (``None`` when no response came),
    ``error_type`` and ``provider_message`` what the provider said, ``request_id`` the
    provider's request id header; secrets never appear in any of them."""

    def __init__(
        self,
        message: str,
        *,
        retry_safe: bool,
        status: int | None = None,
        error_type: str | None = None,
        provider_message: str | None = None,
        request_id: str | None = None,
        tries: int = 1,
    ) -> None:
        self.status = status
        self.provider_message = provider_message
        self.request_id = request_id
        self.tries = tries
        super().__init__(message, retry_safe=retry_safe, error_type=error_type)


class ProviderError(CallError):
    """The provider answered with an error: an error status, an error event in the
    middle of a stream (``overloaded`` with HTTP 200), or a body that cannot be read."""


class ConnectionLostError(CallError):
    """No connection could be made, or it was closed or reset, or the stream ended
    before its final event: sending the same bytes again is safe."""


class CallTimeoutError(CallError):
    """The connect, read or total timeout of a call ran out."""


class CanonicalJSONError(PrefixlockError):
    """A value that has no canonical JSON form; ``path`` is its JSON path (``$.a[0]``)
    and ``reason`` the message without it, when the value was walked."""

    path: str = "$"
    reason: str = ""


class LimitError(PrefixlockError):
    """A text input over its documented size limit (nothing was saved): see
    ``docs/limits.md``."""


class ResponseLimitError(ResponseError, LimitError):
    """A response body, a stream, a stream line or an event over its size limit
    (:mod:`prefixlock.core.limits`): refused as soon as it passes it, never held whole.
    Both a :class:`ResponseError` (what a reader raises) and a :class:`LimitError`."""


class CacheSimulationError(PrefixlockError):
    """A request body the cache simulator cannot read or price."""
