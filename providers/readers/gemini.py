"""Gemini responses: a whole ``GenerateContentResponse`` and the
``streamGenerateContent?alt=sse`` stream of them.

Part mapping (ai.google.dev/api/caching#Part) of one candidate (with ``candidateCount``
above 1 the caller picks it, ``candidate=i``; see :func:`~.base.pick`), in model order:

===========================================  =============================================
``{"text"}`` (``thoughtSignature`` optional)  :class:`TextPart` with ``thought_signature``
``{"functionCall": {"id", "name", "args"}}``  :class:`ToolCallPart` (canonical JSON of
(``thoughtSignature`` optional)               ``args``) with ``thought_signature``
anything else                                :class:`OpaquePart` ``gemini``: the Part as
                                             received (``thought: true`` summaries, code
                                             execution, ...)
===========================================  =============================================

Every Part is checked against the request's ``Part`` first (exactly one data member,
known members only, a base64 ``thoughtSignature``): a Part the API would refuse when it
is sent back is a :class:`ResponseError`.

A ``functionCall`` the model sent without ``id`` (common) gets a local call id,
``gemini-local-<key>-<part index>``, so an agent answers it like any other call; the
serializer never sends it (:data:`prefixlock.providers.gemini.LOCAL_ID_PREFIX`): the
call and its ``functionResponse`` go back without ``id``, as the model made them. The
key is the response's ``responseId``; a response without one is keyed by a digest of
the whole response (:func:`_key`), never of its parts alone: the model asking for
the same call twice (re-reading a file) makes the same parts, and a conversation
refuses a call id it has seen ("tool call id ... was already used"). The whole
response's ``usageMetadata`` differs between those calls (the later prompt holds the
earlier call and its result), and a digest keeps the id the same for the same bytes, so
reading a response again (a retry, a restart) names its calls alike. Two responses
byte-for-byte equal and without ``responseId`` still share ids (nothing in them tells
them apart); recording the second is then refused, loudly, never merged.

Stream (ai.google.dev/api/generate-content#method:-models.streamgeneratecontent): each
SSE ``data`` is a ``GenerateContentResponse`` chunk. Text of consecutive chunks continues
one part while the kind (``thought`` or not) stays the same and the part has no
``thoughtSignature`` yet; a ``thoughtSignature`` may arrive on an empty text part at the
end of a part ("Thought signatures", ai.google.dev/gemini-api/docs/thought-signatures)
and is attached to it. Any other part arrives whole. ``usageMetadata`` is cumulative
(the last one wins). The chunk carrying ``finishReason`` is the last one; a chunk with
``error`` fails the stream.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, ClassVar

from ...core import canonical
from ...core.errors import CanonicalJSONError, ResponseError
from ...core.messages import Part, TextPart, ToolCallPart
from ...core.output import ModelOutput, Usage
from ..gemini import LOCAL_ID_PREFIX
from .base import (
    Reader,
    SSEStreamReader,
    StreamReader,
    base64_text,
    count,
    load_object,
    member,
    only,
    opaque,
    output,
    pick,
    usage,
)
from .sse import Event

NAME = "gemini"

#: Statuses and their canonical codes a retry may cure
#: (ai.google.dev/gemini-api/docs/troubleshooting#error-codes: 429 RESOURCE_EXHAUSTED,
#: 500 INTERNAL, 503 UNAVAILABLE, 504 DEADLINE_EXCEEDED; 400 INVALID_ARGUMENT /
#: FAILED_PRECONDITION, 403 PERMISSION_DENIED and 404 NOT_FOUND refuse the request).
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
RETRY_CODES = frozenset({"RESOURCE_EXHAUSTED", "INTERNAL", "UNAVAILABLE", "DEADLINE_EXCEEDED"})

#: Keys a Part may have and still be a plain :class:`TextPart` / :class:`ToolCallPart`.
TEXT_KEYS = frozenset({"text", "thoughtSignature"})
CALL_KEYS = frozenset({"functionCall", "thoughtSignature"})
FUNCTION_CALL_KEYS = frozenset({"id", "name", "args"})


def _signature(part: Mapping[str, Any]) -> str | None:
    value = part.get("thoughtSignature")
    return value if isinstance(value, str) else None


#: The ``data`` oneof of a Part: a Part holds exactly one (ai.google.dev/api/caching#Part).
DATA_KEYS = frozenset(
    {
        "text",
        "inlineData",
        "functionCall",
        "functionResponse",
        "fileData",
        "executableCode",
        "codeExecutionResult",
    }
)
#: Every member a Part read from a response may have, sent back as it came.
PART_KEYS = DATA_KEYS | {"thought", "thoughtSignature", "videoMetadata"}
#: Each data member's own members: name -> (required members' types, optional ones').
DATA_MEMBERS: Mapping[str, tuple[Mapping[str, type[Any]], Mapping[str, type[Any]]]] = {
    "functionCall": ({"name": str}, {"id": str, "args": dict}),
    "functionResponse": ({"name": str, "response": dict}, {"id": str}),
    "inlineData": ({"mimeType": str, "data": str}, {}),
    "fileData": ({"fileUri": str}, {"mimeType": str}),
    "executableCode": ({"language": str, "code": str}, {}),
    "codeExecutionResult": ({"outcome": str}, {"output": str}),
}


def _checked(part: Mapping[str, Any], where: str) -> None:
    """A Part against the wire schema of the request it is sent back in: known members
    only, exactly one data member of its type, ``thought`` a boolean, a
    ``thoughtSignature`` base64 (proto ``bytes``: the service refuses other text)."""
    only(part, PART_KEYS, where)
    data = sorted(k for k in part if k in DATA_KEYS)
    if len(data) != 1:
        raise ResponseError(
            f"{where}: a Part holds exactly one of {', '.join(sorted(DATA_KEYS))}, not {len(data)}",
            retry_safe=False,
        )
    member(part, "thought", bool, where, required=False)
    member(part, "videoMetadata", dict, where, required=False)
    signature = member(part, "thoughtSignature", str, where, required=False)
    if signature is not None:
        base64_text(signature, f"{where}.thoughtSignature")
    (key,) = data
    if key == "text":
        member(part, "text", str, where)
        return
    value = member(part, key, dict, where)
    required, optional = DATA_MEMBERS[key]
    at = f"{where}.{key}"
    only(value, frozenset({*required, *optional}), at)
    for name, kind in required.items():
        member(value, name, kind, at)
    for name, kind in optional.items():
        member(value, name, kind, at, required=False)
    if key == "inlineData":
        base64_text(value["data"], f"{at}.data")


def _part(part: Mapping[str, Any], local_id: str, where: str = "gemini part") -> Part:
    _checked(part, where)
    keys = part.keys()
    if keys <= TEXT_KEYS and isinstance(part.get("text"), str):
        return TextPart(part["text"], _signature(part))
    call = part.get("functionCall")
    if keys <= CALL_KEYS and isinstance(call, dict) and call.keys() <= FUNCTION_CALL_KEYS:
        call_id, name, args = call.get("id"), call.get("name"), call.get("args", {})
        if call_id is None:
            call_id = local_id  # never sent back (see LOCAL_ID_PREFIX)
        if isinstance(call_id, str) and call_id and isinstance(name, str):
            if not isinstance(args, dict):
                raise ResponseError(
                    f"gemini functionCall {call_id!r}: args is not an object", retry_safe=False
                )
            return ToolCallPart(call_id, name, canonical.dumps(args), _signature(part))
        raise ResponseError(f"{where}: a functionCall with an empty id", retry_safe=False)
    return opaque(NAME, part)


def _usage(raw: Mapping[str, Any]) -> Usage:
    candidates = count(raw.get("candidatesTokenCount"))
    thoughts = count(raw.get("thoughtsTokenCount"))
    # promptTokenCount already counts the cached prompt tokens ("When cachedContent is
    # set, this is still the total effective prompt size", UsageMetadata in
    # ai.google.dev/api/generate-content#UsageMetadata); candidatesTokenCount leaves out
    # the thinking tokens, which are billed as output ("Pricing for thinking",
    # ai.google.dev/gemini-api/docs/thinking), so output counts both.
    out = None if candidates is None and thoughts is None else (candidates or 0) + (thoughts or 0)
    return usage(
        raw,
        input_tokens=count(raw.get("promptTokenCount")),
        cache_read_tokens=count(raw.get("cachedContentTokenCount")),
        cache_write_tokens=None,  # implicit caching reports no writes
        output_tokens=out,
        reasoning_tokens=thoughts,
    )


def _error(body: Mapping[str, Any]) -> ResponseError:
    error = body.get("error")
    error = error if isinstance(error, dict) else {}
    status, code = error.get("status"), error.get("code")
    return ResponseError(
        f"gemini error {code} {status}: {error.get('message', '')}",
        retry_safe=(isinstance(status, str) and status in RETRY_CODES)
        or (type(code) is int and code in RETRY_STATUSES),
        error_type=status if isinstance(status, str) else None,
    )


def _candidate(response: Mapping[str, Any], candidate: int | None) -> Mapping[str, Any]:
    """The candidate to read; ``{}`` when there is none (a blocked prompt)."""
    candidates = response.get("candidates")
    if not isinstance(candidates, list) or not candidates:
        return {}
    if not all(isinstance(c, dict) for c in candidates):
        raise ResponseError("gemini response: a candidate is not an object", retry_safe=False)
    chosen: Mapping[str, Any] = pick(NAME, candidates, candidate, "candidates")
    return chosen


def _parts(candidate: Mapping[str, Any]) -> list[Any]:
    content = candidate.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    if parts is None:
        return []
    if not isinstance(parts, list) or not all(isinstance(p, dict) for p in parts):
        raise ResponseError(
            "gemini response: content.parts is not a list of Parts", retry_safe=False
        )
    return parts


def _stop(response: Mapping[str, Any], candidate: Mapping[str, Any]) -> str | None:
    reason = candidate.get("finishReason")
    if isinstance(reason, str):
        return reason
    feedback = response.get("promptFeedback")
    blocked = feedback.get("blockReason") if isinstance(feedback, dict) else None
    return blocked if isinstance(blocked, str) else None


def _digest_line(chunk: Mapping[str, Any]) -> bytes:
    """What a chunk adds to the :func:`_key` digest: its canonical JSON and a newline
    (the parsed value, so neither the JSON spelling nor a stream's chunking matters)."""
    return canonical.dumpb(chunk) + b"\n"


def _key(response_id: object, digest: str) -> str:
    """The local-id key of a response: its ``responseId``, else the first 16 hex digits
    of ``digest``, the SHA-256 of its chunks' :func:`_digest_line` (a whole body is one
    chunk, so a one-chunk stream names its calls as the same whole body does); see the
    module docstring for why the whole response and not its parts."""
    if isinstance(response_id, str) and response_id:
        return response_id
    return digest[:16]


def _output(
    last: Mapping[str, Any],
    parts: list[Any],
    stop: str | None,
    key: str,
    response_id: str | None,
) -> ModelOutput:
    """``key``: see :func:`_key`; ``response_id``: the ``responseId``, if one came."""
    raw_usage, model = last.get("usageMetadata"), last.get("modelVersion")
    return output(
        NAME,
        [_part(p, f"{LOCAL_ID_PREFIX}{key}-{i}", f"gemini part {i}") for i, p in enumerate(parts)],
        stop,
        _usage(raw_usage) if isinstance(raw_usage, dict) else None,
        model if isinstance(model, str) else None,
        response_id,
    )


def _response_id(value: object) -> str | None:
    """A ``responseId`` as the reader keeps it: a non-empty string, else None."""
    return value if isinstance(value, str) and value else None


class GeminiReader(Reader):
    name: ClassVar[str] = NAME

    def parse_response(self, body: bytes, *, candidate: int | None = None) -> ModelOutput:
        response = load_object(body)
        if "error" in response:
            raise _error(response)
        chosen = _candidate(response, candidate)
        response_id = _response_id(response.get("responseId"))
        key = _key(response_id, hashlib.sha256(_digest_line(response)).hexdigest())
        return _output(response, _parts(chosen), _stop(response, chosen), key, response_id)

    def stream_reader(self, *, candidate: int | None = None) -> StreamReader:
        return GeminiStream(candidate)

    def is_retryable(self, status: int, body: bytes) -> bool:
        # ai.google.dev/gemini-api/docs/troubleshooting#error-codes (see RETRY_STATUSES)
        if status in RETRY_STATUSES:
            return True
        try:
            value = canonical.loads(body)
        except (ValueError, CanonicalJSONError, RecursionError):
            return False
        error = value.get("error") if isinstance(value, dict) else None
        code = error.get("status") if isinstance(error, dict) else None
        return isinstance(code, str) and code in RETRY_CODES


class GeminiStream(SSEStreamReader):
    """Chunks joined into the parts of the whole response."""

    def __init__(self, candidate: int | None = None) -> None:
        super().__init__()
        #: the candidate to read; ``None``: the only one (a second one fails the stream)
        self.candidate = candidate
        self.parts: list[dict[str, Any]] = []
        #: the last part is text that the next chunk's text may continue
        self.open = False
        self.last: Mapping[str, Any] = {}
        self.stop: str | None = None
        self.response_id: str | None = None
        #: the digest of the chunks so far, the key of a response without responseId
        #: (not updated once a responseId has come: then it is not used)
        self.digest = hashlib.sha256()

    def on_event(self, event: Event) -> None:
        chunk = self.data(event)
        if "error" in chunk:
            raise _error(chunk)
        self.digested(chunk)
        candidate = self.chosen(chunk)
        if isinstance(chunk.get("responseId"), str) and chunk["responseId"]:
            self.response_id = chunk["responseId"]
        for part in _parts(candidate):
            self.add(part)
        if "usageMetadata" in chunk or "modelVersion" in chunk:
            self.last = {**self.last, **chunk}
        stop = _stop(chunk, candidate)
        if stop is not None:
            self.stop, self.done = stop, True

    def digested(self, chunk: Mapping[str, Any]) -> None:
        if self.response_id is None:
            self.digest.update(_digest_line(chunk))

    def chosen(self, chunk: Mapping[str, Any]) -> Mapping[str, Any]:
        """The chunk's piece of the candidate read (``{}`` if it carries none)."""
        candidates = chunk.get("candidates")
        if not isinstance(candidates, list):
            return {}
        if not all(isinstance(c, dict) for c in candidates):
            raise ResponseError("gemini stream: a candidate is not an object", retry_safe=False)
        indexes = [c.get("index", i) for i, c in enumerate(candidates)]
        if self.candidate is None and any(i != 0 for i in indexes):
            raise ResponseError(
                "gemini stream carries more than one candidate: pick the one to record "
                "with candidate=i",
                retry_safe=False,
            )
        want = self.candidate or 0
        found: Mapping[str, Any] = next(
            (c for c, i in zip(candidates, indexes, strict=True) if i == want), {}
        )
        return found

    def late(self, event: Event) -> None:
        # Several candidates stream side by side: after the one read has finished, the
        # others' chunks (and the final usage) may still come; only its own is refused.
        if self.candidate is None:
            super().late(event)
        chunk = self.data(event)
        if "error" in chunk or self.chosen(chunk):
            super().late(event)
        self.digested(chunk)
        if "usageMetadata" in chunk or "modelVersion" in chunk:
            self.last = {**self.last, **chunk}

    def add(self, part: dict[str, Any]) -> None:
        if part.keys() <= TEXT_KEYS | {"thought"} and isinstance(part.get("text"), str):
            previous = self.parts[-1] if self.parts else None
            if (
                self.open
                and previous is not None
                and previous.get("thought") == part.get("thought")
                and "thoughtSignature" not in previous
            ):
                previous["text"] += part["text"]
                if "thoughtSignature" in part:
                    previous["thoughtSignature"] = part["thoughtSignature"]
                return
            self.parts.append(dict(part))
            self.open = True
            return
        self.parts.append(part)
        self.open = False

    def output(self) -> ModelOutput:
        key = _key(self.response_id, self.digest.hexdigest())
        return _output(self.last, self.parts, self.stop, key, self.response_id)
