"""The comparison of two request bodies of one provider: its classification and explanation.

:func:`compare_bodies` classifies ``new`` against ``old`` (two bodies of one provider):

* ``identical`` -- the same bytes (or the same structure once the provider's cache
  markers are removed: only a marker moved); reported as ``unchanged``;
* ``tail append`` -- after removing cache markers, every key but the history list is
  equal and ``old``'s history is a prefix of ``new``'s, item by item, except that the
  last old wire message may have gained content blocks (a wire that carries
  consecutive same-role messages as blocks of one message, Bedrock): the sequence of
  (role, content block) pairs (:func:`block_pairs`) of ``old`` is a prefix of ``new``'s,
  so the provider cache still hits; reported as ``tail-only``;
* ``prefix break`` -- anything else, at the first divergent JSON path
  (``$.messages[3].content[0].text``), with the old and new values and the
  *invalidated share*: ``1 - common byte prefix / old length`` of the two bodies
  without cache markers (the part of the old body's cached prefix that no longer
  matches).

:func:`attribute` names the spec line that produced a break's text when it can
(:class:`prefixlock.review.sources.SourceIndex`); :func:`explanation` turns a comparison into the
lines ``prefixlock diff`` prints. The verdicts of a call (``unchanged``, ``tail-only``,
``prefix break``, ``added``, ``removed``) are defined here too.

This is the one module of ``prefixlock diff`` that knows the wire formats, so it sits at
the CLI edge: it uses a provider's ``strip_cache_markers`` and ``MESSAGES_KEY``, and the
registry's names (:data:`PROVIDERS`, re-exported for the rest of the command).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from ..core import canonical
from ..core.errors import CanonicalJSONError, InputError, UsageError
from ..core.fragments import common_prefix
from ..providers import NAMES, get
from .jsondiff import MISSING, Difference, describe, first_difference, value_at
from .sources import SourceIndex

__all__ = [
    "ADDED",
    "CALL_VERDICTS",
    "IDENTICAL",
    "PREFIX_BREAK",
    "PROVIDERS",
    "REMOVED",
    "TAIL_APPEND",
    "TAIL_ONLY",
    "UNCHANGED",
    "Comparison",
    "attribute",
    "block_pairs",
    "compare_bodies",
    "explanation",
    "grown_blocks",
    "guess_provider",
    "history_key",
    "parse_body",
]

IDENTICAL = "identical"
TAIL_APPEND = "tail append"
PREFIX_BREAK = "prefix break"

#: The verdicts of ``prefixlock diff`` per call (``PREFIX_BREAK`` keeps its name).
UNCHANGED = "unchanged"
TAIL_ONLY = "tail-only"
ADDED = "added"
REMOVED = "removed"
VERDICTS = {IDENTICAL: UNCHANGED, TAIL_APPEND: TAIL_ONLY, PREFIX_BREAK: PREFIX_BREAK}
#: Every verdict of a call, in the order reports count them.
CALL_VERDICTS = (UNCHANGED, TAIL_ONLY, PREFIX_BREAK, ADDED, REMOVED)

#: Deployment impact of a changed call (``prefixlock diff``): a running conversation
#: keeps its root and stored history, so only a change of the root reaches it as a cache
#: miss, and only for *new* conversations.
ROOT_CHANGE = "root change"
CONTENT_CHANGE = "rendered-content change"
NO_IMPACT = "none"
IMPACTS = (ROOT_CHANGE, CONTENT_CHANGE, NO_IMPACT)
#: Roles of leading history items that carry the root (OpenAI Chat's instructions).
ROOT_ROLES = frozenset({"system", "developer"})

#: The provider names: the folder names of bodies and the choices of ``--provider``.
PROVIDERS: tuple[str, ...] = NAMES


@attrs.frozen
class Comparison:
    kind: str  # IDENTICAL, TAIL_APPEND or PREFIX_BREAK
    appended: int = 0
    #: content blocks the last old wire message gained (a TAIL_APPEND on a wire that
    #: merges same-role neighbours into one message)
    blocks: int = 0
    difference: Difference | None = None
    #: markers moved (identical otherwise), or why the bytes differ at "$"
    note: str = ""
    #: share of ``old``'s bytes after its longest common byte prefix with ``new``
    #: (both without cache markers); 0 unless a prefix break
    invalidated: float = 0.0
    #: the byte sizes behind ``invalidated``: old body, common prefix
    old_size: int = 0
    common: int = 0
    #: the root differs: instructions, tools or settings (everything outside the history,
    #: and leading system/developer history items), cache markers aside
    root: bool = False

    @property
    def verdict(self) -> str:
        return VERDICTS[self.kind]

    @property
    def impact(self) -> str:
        """What deploying the change does to conversations (:data:`IMPACTS`)."""
        if self.kind == IDENTICAL:
            return NO_IMPACT
        return ROOT_CHANGE if self.root else CONTENT_CHANGE


#: Keys of a wire message's content-block list (``{"role": r, <key>: [blocks]}``).
BLOCK_LIST_KEYS = ("content", "parts")


def _blocks_of(item: Any) -> tuple[Any, list[Any]] | None:
    """``(role, blocks)`` of a wire message made of a role and a block list only, else
    None (that item counts as one block of its own)."""
    if not isinstance(item, Mapping) or len(item) != 2 or "role" not in item:
        return None
    (key,) = (k for k in item if k != "role")
    blocks = item[key]
    if key not in BLOCK_LIST_KEYS or not isinstance(blocks, list):
        return None
    return item["role"], blocks


def block_pairs(history: Any) -> list[tuple[Any, Any]]:
    """The (role, content block) pairs of a history list, in order: one per block of a
    ``{"role", "content" | "parts": [...]}`` message; any other item (a Chat message with
    string content, a Responses item) is one pair ``(role or type, item)``. Invariant 1
    on the wire: without compaction, call N's pairs are a prefix of call N+1's."""
    out: list[tuple[Any, Any]] = []
    for item in history if isinstance(history, list) else ():
        found = _blocks_of(item)
        if found is not None:
            role, blocks = found
            out.extend((role, block) for block in blocks)
        else:
            role = item.get("role", item.get("type")) if isinstance(item, Mapping) else None
            out.append((role, item))
    return out


def grown_blocks(old: Any, new: Any) -> int | None:
    """How many content blocks ``new`` adds after all of ``old``'s, when ``new`` is
    ``old`` with blocks appended (same role, earlier blocks unchanged); else None."""
    a, b = _blocks_of(old), _blocks_of(new)
    if a is None or b is None or list(old) != list(new) or a[0] != b[0]:
        return None
    if len(a[1]) > len(b[1]) or first_difference(a[1], b[1][: len(a[1])]) is not None:
        return None
    return len(b[1]) - len(a[1])


def parse_body(data: bytes, what: str) -> dict[str, Any]:
    """``data`` as a JSON object; a :class:`PrefixlockError` naming ``what`` otherwise."""
    try:
        value = canonical.loads(data)
    except (CanonicalJSONError, ValueError) as err:
        raise InputError(f"{what}: not JSON ({err})") from None
    if not isinstance(value, dict):
        raise InputError(f"{what}: a request body must be a JSON object")
    return value


def _as_sent(value: Any) -> bytes:
    """``value`` encoded like the wire: compact UTF-8 JSON, keys in their parsed order
    (:func:`canonical.dumpb` would sort the keys of plain dicts)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def _share(old: bytes, new: bytes) -> tuple[float, int, int]:
    """(invalidated share, old size, common prefix) of ``old`` against ``new``."""
    common = common_prefix(old, new)
    return (1 - common / len(old) if old else 0.0), len(old), common


def compare_bodies(
    provider: str, old: bytes, new: bytes, *, old_name: str = "old", new_name: str = "new"
) -> Comparison:
    """Classify ``new`` against ``old``, two exact bodies of ``provider``."""
    if old == new:
        return Comparison(IDENTICAL)
    wire = get(provider)
    old_value, new_value = parse_body(old, old_name), parse_body(new, new_name)
    if old_value == new_value and first_difference(old_value, new_value) is None:
        note = "same JSON value, different bytes (key order or formatting)"
        share, size, common = _share(old, new)
        return Comparison(
            PREFIX_BREAK,
            difference=Difference((), MISSING, MISSING),
            note=note,
            invalidated=share,
            old_size=size,
            common=common,
        )
    a, b = wire.strip_cache_markers(old_value), wire.strip_cache_markers(new_value)
    key = wire.MESSAGES_KEY
    history_a, history_b = a.get(key, []), b.get(key, [])
    root = _root(a, key) != _root(b, key)
    found = first_difference(
        {k: v for k, v in a.items() if k != key}, {k: v for k, v in b.items() if k != key}
    )
    if found is None and isinstance(history_a, list) and isinstance(history_b, list):
        grown = 0
        for index, item in enumerate(history_a):
            if index >= len(history_b):
                found = Difference((key, index), item, MISSING)
                break
            found = first_difference(item, history_b[index], (key, index))
            if found is not None:
                last = grown_blocks(item, history_b[index])
                if index == len(history_a) - 1 and last:
                    grown, found = last, None  # the last message gained blocks
                break
        if found is None:
            appended = len(history_b) - len(history_a)
            if appended == 0 and not grown:
                return Comparison(IDENTICAL, note="only cache markers moved")
            return Comparison(TAIL_APPEND, appended=appended, blocks=grown, root=root)
    elif found is None:
        found = first_difference(history_a, history_b, (key,))
    assert found is not None
    share, size, common = _share(_as_sent(a), _as_sent(b))
    # The path is one of the bodies with their markers removed, and so are its values:
    # Bedrock's markers are blocks of their own (cachePoint), so in the bodies as sent
    # the same path can name another block.
    return Comparison(
        PREFIX_BREAK,
        difference=Difference(found.parts, value_at(a, found.parts), value_at(b, found.parts)),
        invalidated=share,
        old_size=size,
        common=common,
        root=root,
    )


def _root(body: Mapping[str, Any], key: str) -> tuple[dict[str, Any], list[Any]]:
    """A body's root: its members outside the history, and the leading history items
    with a root role."""
    history = body.get(key, [])
    lead: list[Any] = []
    for item in history if isinstance(history, list) else []:
        if not (isinstance(item, Mapping) and item.get("role") in ROOT_ROLES):
            break
        lead.append(item)
    return {k: v for k, v in body.items() if k != key}, lead


def history_key(provider: str) -> str:
    """The key of ``provider``'s history list (``messages``, ``input``, ``contents``)."""
    return get(provider).MESSAGES_KEY


#: A Bedrock Claude model id: ``anthropic.<name>`` after an optional profile prefix, or an ARN.
_BEDROCK_CLAUDE = re.compile(r"(?:[a-z]{2,6}(?:-[a-z]+)?\.)?anthropic\.|arn:aws")


def guess_provider(body: Mapping[str, Any], path: Path | None = None) -> str:
    """The provider of a body: its folder's name if that is a provider, else its shape."""
    if path is not None and path.parent.name in PROVIDERS:
        return path.parent.name
    if "contents" in body:
        return "gemini"
    if "input" in body:
        return "openai-responses"
    if "anthropic_version" in body:  # Bedrock InvokeModel's Messages body
        return "bedrock-anthropic"
    model = body.get("model")
    if "messages" in body and isinstance(model, str) and _BEDROCK_CLAUDE.match(model):
        # the Messages-API endpoint on Bedrock (bedrock-anthropic, endpoint: mantle):
        # the anthropic body naming a Bedrock model id, priced by Bedrock's rules
        return "bedrock-anthropic"
    if "inferenceConfig" in body or "toolConfig" in body:
        return "bedrock-converse"
    if "max_completion_tokens" in body or "prompt_cache_key" in body:
        return "openai-chat"
    if "messages" in body:
        return "anthropic"
    raise UsageError(f"{path or 'body'}: cannot tell the provider; pass --provider")


# --- explanations -----------------------------------------------------------------------


def attribute(
    provider: str, comparison: Comparison, index: SourceIndex, new: bytes, old: bytes
) -> str | None:
    """The spec ``file:line`` behind a prefix break, if known."""
    difference = comparison.difference
    if comparison.kind != PREFIX_BREAK or difference is None or comparison.note:
        return None
    return index.attribute(provider, difference, canonical.loads(new), canonical.loads(old))


def explanation(comparison: Comparison, source: str | None) -> list[str]:
    """Human lines for one comparison (the first names the verdict); ``source`` is what
    :func:`attribute` found."""
    if comparison.kind == IDENTICAL:
        return [IDENTICAL + (f" ({comparison.note})" if comparison.note else "")]
    if comparison.kind == TAIL_APPEND:
        n = comparison.appended
        text = f"+{n} item{'s' if n != 1 else ''}"
        if comparison.blocks:
            k = comparison.blocks
            text = f"+{k} block{'s' if k != 1 else ''} in the last message, {text}"
        return [f"tail append ({text})"]
    difference = comparison.difference
    assert difference is not None
    if comparison.note:
        return [f"PREFIX BREAK at {difference.path}: {comparison.note}"]
    old_text, new_text = describe(difference)
    lines = [f"PREFIX BREAK at {difference.path}: old {old_text} new {new_text}"]
    if source is not None:
        lines.append(f"  caused by {source}")
    lost = comparison.old_size - comparison.common
    lines.append(
        f"  invalidates {comparison.invalidated:.1%} of the old body's prefix"
        f" ({lost} of {comparison.old_size} bytes, cache markers aside)"
    )
    return lines
