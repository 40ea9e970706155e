"""The one canonical JSON encoder: everything prefixlock hashes, pins or sends goes through it.

Rules (documented, tested):

* object keys are sorted by code point (``sort_keys``) unless the caller builds an
  :class:`Ordered` object, whose insertion order is the fixed per-type order of a wire
  format;
* ``ensure_ascii=False``; output is UTF-8; lone surrogates are refused;
* compact separators ``,`` and ``:``; no whitespace;
* NaN and +/-Infinity are refused;
* floats use Python's shortest round-trip ``repr`` (``0.1`` -> ``0.1``, ``1e-07``);
  integral floats keep their ``.0``; integers are arbitrary precision;
* only ``str`` keys; tuples encode as arrays; nothing else is coerced;
* limits, so that no input can exhaust the stack of an encoder or of a provider's JSON
  parser: nesting at most :data:`MAX_DEPTH` levels (like the YAML loader's) at the
  boundaries, :data:`ENCODE_DEPTH` when encoding; integers within :data:`MAX_INT` in
  magnitude (64 bits); no NUL in keys.

:func:`check` runs the same rules on a value without encoding it, and is what every
boundary (requests, tool calls) uses (:func:`check_encodable`: with the encoder's own
depth limit); ``strings_without_nul`` also refuses NUL
characters in strings there. Every refusal is a :class:`CanonicalJSONError` whose
``path`` is the JSON path of the offending value.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Container, Mapping, Sequence
from typing import Any

from .errors import CanonicalJSONError

JsonValue = Any  # a JSON value: None, bool, int, float, str, list/tuple, dict/Ordered


class Ordered(dict[str, Any]):
    """A JSON object whose keys keep their insertion order in canonical output.

    Wire formats use it for a fixed, per-object-type key order (``model`` before
    ``messages``); everything else is sorted.
    """


#: The deepest nesting of arrays and objects a value may have (the YAML loader's limit).
MAX_DEPTH = 100
#: The encoder's own bound: room for the wire format wrapped around an input value that
#: is :data:`MAX_DEPTH` deep (tool arguments inside a message inside a body).
ENCODE_DEPTH = 2 * MAX_DEPTH
#: Integers are refused beyond 64 bits: no provider reads more, and Python's own
#: int/str conversion limit (4300 digits) must never surface as a ValueError.
MAX_INT = 2**64 - 1


def _refuse(path: str, reason: str) -> CanonicalJSONError:
    err = CanonicalJSONError(f"{path}: {reason}")
    err.path = path
    err.reason = reason
    return err


def _check_text(text: str, path: str, what: str, nul: bool) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise _refuse(
            path,
            f"{what} contains a lone surrogate U+{ord(text[err.start]):04X} at index {err.start}",
        ) from None
    if not nul and "\0" in text:
        raise _refuse(path, f"{what} contains a NUL character at index {text.index(chr(0))}")


def _check(value: JsonValue, path: str, limit: int, depth: int = 0, nul: bool = True) -> Any:
    """Validate ``value`` and convert it to what :func:`json.dumps` should see."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not -MAX_INT <= value <= MAX_INT:
            raise _refuse(path, f"integer of {value.bit_length()} bits is beyond 64 bits")
        return value
    if isinstance(value, str):
        _check_text(value, path, "string", nul)
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise _refuse(path, f"{value!r} has no JSON form")
        return value
    nested = isinstance(value, Mapping | Sequence) and not isinstance(value, bytes | bytearray)
    if nested and depth >= limit:
        raise _refuse(path, f"nesting deeper than {limit} levels")
    if isinstance(value, Mapping):
        for key in value:
            if not isinstance(key, str):
                raise _refuse(path, f"object key {key!r} is not a string")
            _check_text(key, path, f"object key {key[:40]!r}", False)
        out: dict[str, Any] = {}
        items = value.items() if isinstance(value, Ordered) else sorted(value.items())
        for key, item in items:
            out[key] = _check(item, f"{path}.{key}", limit, depth + 1, nul)
        return out
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return [_check(item, f"{path}[{i}]", limit, depth + 1, nul) for i, item in enumerate(value)]
    raise _refuse(path, f"{type(value).__name__} is not a JSON value")


class _Walk(Exception):
    """The fast path cannot vouch for a value: :func:`_check` decides, naming the path."""


def _plain_text(text: str, nul: bool) -> bool:
    """True if ``text`` needs no check: ASCII (no surrogate) and NUL allowed or absent."""
    return text.isascii() and (nul or "\0" not in text)


def _fast(value: JsonValue, limit: int, depth: int, nul: bool) -> Any:
    """:func:`_check` for the common case, without building a path per node: exact
    built-in types only, ASCII keys and strings (others: UTF-8 checked here). Anything
    it cannot vouch for raises :class:`_Walk`, and the caller runs :func:`_check`."""
    kind = type(value)
    if kind is str:
        if _plain_text(value, nul):
            return value
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise _Walk from None
        if not nul and "\0" in value:
            raise _Walk
        return value
    if kind is dict or kind is Ordered:
        if depth >= limit:
            raise _Walk
        for key in value:
            if type(key) is not str or not _plain_text(key, False):
                raise _Walk  # a key that is not ASCII text is checked by the walk
        items = value.items() if kind is Ordered else sorted(value.items())
        return {key: _fast(item, limit, depth + 1, nul) for key, item in items}
    if kind is list or kind is tuple:
        if depth >= limit:
            raise _Walk
        return [_fast(item, limit, depth + 1, nul) for item in value]
    if value is None or kind is bool:
        return value
    if kind is int:
        if -MAX_INT <= value <= MAX_INT:
            return value
        raise _Walk
    if kind is float:
        if value - value == 0.0:  # finite: NaN and the infinities give NaN
            return value
        raise _Walk
    raise _Walk  # subclasses and other types: the walk decides


def _valid(value: JsonValue, limit: int, depth: int, nul: bool, known: Container[str]) -> None:
    """:func:`_fast` without its result: the same types vouched for, no object rebuilt
    or sorted (a check that encodes nothing needs neither). Anything it cannot vouch
    for raises :class:`_Walk`, and the caller runs :func:`_check`, which names it.
    A non-ASCII string in ``known`` is taken as UTF-8 checked."""
    kind = type(value)
    if kind is str:
        if not value.isascii() and value not in known:
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise _Walk from None
        if not nul and "\0" in value:
            raise _Walk
        return
    if kind is dict or kind is Ordered:
        if depth >= limit:
            raise _Walk
        for key, item in value.items():
            if type(key) is not str or not key.isascii() or "\0" in key:
                raise _Walk  # a key that is not ASCII text is checked by the walk
            if type(item) is str and item.isascii() and (nul or "\0" not in item):
                continue
            _valid(item, limit, depth + 1, nul, known)
        return
    if kind is list or kind is tuple:
        if depth >= limit:
            raise _Walk
        for item in value:
            if type(item) is str and item.isascii() and (nul or "\0" not in item):
                continue
            _valid(item, limit, depth + 1, nul, known)
        return
    if value is None or kind is bool:
        return
    if kind is int:
        if -MAX_INT <= value <= MAX_INT:
            return
        raise _Walk
    if kind is float:
        if value - value == 0.0:  # finite: NaN and the infinities give NaN
            return
        raise _Walk
    raise _Walk  # subclasses and other types: the walk decides


def _verified(
    value: JsonValue, path: str, limit: int, nul: bool, known: Container[str] = frozenset()
) -> None:
    """:func:`_checked` for a caller that needs no result."""
    try:
        _valid(value, limit, 0, nul, known)
    except (_Walk, RecursionError):
        _check(value, path, limit, 0, nul)


def _checked(value: JsonValue, path: str, limit: int, nul: bool = True) -> Any:
    """What :func:`json.dumps` should see of ``value``, or a :class:`CanonicalJSONError`."""
    try:
        return _fast(value, limit, 0, nul)
    except (_Walk, RecursionError):
        return _check(value, path, limit, 0, nul)


def check(
    value: JsonValue,
    path: str = "$",
    *,
    strings_without_nul: bool = False,
    max_depth: int = MAX_DEPTH,
) -> None:
    """Raise :class:`CanonicalJSONError` (with ``path``) unless ``value`` has a canonical
    form within the limits; with ``strings_without_nul`` NUL in strings is refused too.
    ``max_depth``: for a value whose own shape wraps members held to :data:`MAX_DEPTH`
    (a provider response around a tool input)."""
    if type(value) is str and value.isascii() and not (strings_without_nul and "\0" in value):
        return  # the common case (an id, a name, an output): nothing to refuse
    _verified(value, path, max_depth, not strings_without_nul)


def check_encodable(value: JsonValue, *, known: Container[str] = frozenset()) -> None:
    """Raise :class:`CanonicalJSONError` exactly where :func:`dumps` would, without
    encoding: for a caller that only needs to know that ``value`` can be sent.

    ``known``: strings the caller has already had encoded (a message's part texts,
    encoded by :meth:`~prefixlock.core.messages.CanonicalMessage.create`); they are not
    UTF-8 checked again. A string of ``known`` that would not encode is the caller's
    error: the check would pass it."""
    _verified(value, "$", ENCODE_DEPTH, True, known)


def dumps(value: JsonValue) -> str:
    """Encode ``value`` canonically (compact)."""
    return json.dumps(
        _checked(value, "$", ENCODE_DEPTH),
        ensure_ascii=False,
        allow_nan=False,
        separators=(",", ":"),
        sort_keys=False,
    )


#: The JSON string of a ``str`` exactly as :func:`dumps` writes it (the encoder's own
#: string function, ``ensure_ascii=False``), unchecked: a lone surrogate passes here and
#: is refused by the caller's UTF-8 encoding.
string_text: Callable[[str], str] = json.encoder.encode_basestring


def dumpb(value: JsonValue) -> bytes:
    """Encode ``value`` canonically to UTF-8 bytes."""
    return dumps(value).encode("utf-8")


def dumps_pretty(value: JsonValue) -> str:
    """The same canonical value, indented by two spaces with a final newline.

    For files people read and diff (the lock file, the manifest, golden renderings).
    """
    return (
        json.dumps(
            _checked(value, "$", ENCODE_DEPTH),
            ensure_ascii=False,
            allow_nan=False,
            indent=2,
            separators=(",", ": "),
            sort_keys=False,
        )
        + "\n"
    )


def sha256_hex(data: bytes | str) -> str:
    """``sha256:<hex>`` of bytes, or of a string's UTF-8 encoding."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return "sha256:" + hashlib.sha256(data).hexdigest()


def digest(value: JsonValue) -> str:
    """The digest of a value's canonical encoding."""
    return sha256_hex(dumpb(value))


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in pairs:
        if key in out:
            raise CanonicalJSONError(f"duplicate key {key!r}")
        out[key] = item
    return out


def _constant(name: str) -> Any:
    raise CanonicalJSONError(f"{name} has no JSON form")


def decoder() -> json.JSONDecoder:
    """A decoder with the rules of :func:`loads`, for a caller that parses a text value
    by value (``decoder().raw_decode(text, index)``) and must read exactly what
    :func:`loads` reads."""
    return json.JSONDecoder(object_pairs_hook=_pairs, parse_constant=_constant)


def loads(data: bytes | str) -> JsonValue:
    """Parse JSON, refusing NaN/Infinity literals and duplicate keys."""
    return json.loads(data, object_pairs_hook=_pairs, parse_constant=_constant)


@functools.lru_cache(maxsize=64)
def parsed(text: str) -> JsonValue:
    """:func:`loads` of ``text``, shared: the same value for the same text while it is
    among the latest 64 parsed (tool-call arguments are parsed by the boundary and by
    every provider that maps the call). Never change it; a caller that hands the value
    on hands out a copy. A text that does not parse is not cached: each caller gets the
    parser's own error."""
    return loads(text)
