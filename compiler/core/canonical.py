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
* only ``str`` keys; tuples encode as arrays; nothing else is coerced.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import CanonicalJSONError

JsonValue = Any  # a JSON value: None, bool, int, float, str, list/tuple, dict/Ordered


class Ordered(dict[str, Any]):
    """A JSON object whose keys keep their insertion order in canonical output.

    Wire formats use it for a fixed, per-object-type key order (``model`` before
    ``messages``); everything else is sorted.
    """


def _check(value: JsonValue, path: str) -> Any:
    """Validate ``value`` and convert it to what :func:`json.dumps` should see."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as err:
            raise CanonicalJSONError(
                f"{path}: string contains a lone surrogate at index {err.start}"
            ) from None
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise CanonicalJSONError(f"{path}: {value!r} has no JSON form")
        return value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        items = value.items() if isinstance(value, Ordered) else sorted(value.items())
        for key, item in items:
            if not isinstance(key, str):
                raise CanonicalJSONError(f"{path}: object key {key!r} is not a string")
            out[key] = _check(item, f"{path}.{key}")
        return out
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return [_check(item, f"{path}[{i}]") for i, item in enumerate(value)]
    raise CanonicalJSONError(f"{path}: {type(value).__name__} is not a JSON value")


def dumps(value: JsonValue) -> str:
    """Encode ``value`` canonically (compact)."""
    return json.dumps(
        _check(value, "$"),
        ensure_ascii=False,
        allow_nan=False,
        separators=(",", ":"),
        sort_keys=False,
    )


def dumpb(value: JsonValue) -> bytes:
    """Encode ``value`` canonically to UTF-8 bytes."""
    return dumps(value).encode("utf-8")


def dumps_pretty(value: JsonValue) -> str:
    """The same canonical value, indented by two spaces with a final newline.

    For files people read and diff (the lock file, the manifest, golden renderings).
    """
    return (
        json.dumps(
            _check(value, "$"),
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


def loads(data: bytes | str) -> JsonValue:
    """Parse JSON, refusing NaN/Infinity literals and duplicate keys."""

    def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, item in pairs:
            if key in out:
                raise CanonicalJSONError(f"duplicate key {key!r}")
            out[key] = item
        return out

    def _constant(name: str) -> Any:
        raise CanonicalJSONError(f"{name} has no JSON form")

    return json.loads(data, object_pairs_hook=_pairs, parse_constant=_constant)
