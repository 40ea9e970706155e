"""``prefixlock convert codex ROLLOUT.jsonl``: a Codex CLI rollout as a scenario and its
observed usage.

The format (JSON lines ``{timestamp, type, payload}``, written by Codex's rollout recorder
to ``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl``), as public sources
describe it -- github.com/jnarowski/agentcmd .agent/research/codex/format-comparison.md,
github.com/AcidicSoil/codex-session-viewer CODEX-KEY-REFERENCES.md,
github.com/ryoppippi/ccusage apps/codex/CLAUDE.md:

- ``session_meta``: ``id``, ``cwd``, ``git`` {``branch``, ``commit_hash``}, ...;
- ``turn_context``: per turn ``cwd``, ``model``, approval and sandbox policy;
- ``response_item``: the Responses API items sent and received: ``message`` (role
  ``user`` / ``assistant`` / ``developer``, parts ``input_text`` / ``output_text`` /
  ``input_image`` with an ``image_url``, a ``data:`` URL for a pasted image),
  ``reasoning``, ``function_call`` {``name``, ``arguments`` (a JSON string), ``call_id``},
  ``function_call_output`` {``call_id``, ``output``: a string, or content items
  ``input_text`` / ``input_image`` as ``view_image`` returns, whose ``data:`` images
  become the result's ``images``}, ``custom_tool_call`` /
  ``custom_tool_call_output``, ``local_shell_call``;
- ``event_msg``: UI events; ``token_count`` carries ``info.last_token_usage`` (the last
  call's ``input_tokens``, of them ``cached_input_tokens``, ``output_tokens``,
  ``reasoning_output_tokens``) and ``info.total_token_usage`` (running sums);
  ``user_message`` / ``agent_message`` repeat the response items;
- ``compacted``: ``message``, the summary that replaced the history, and (newer Codex)
  ``replacement_history``, the exact history Codex goes on from (local compaction: the
  context, the user messages it keeps, the summary; remote compaction: the items the
  service returned, ``message`` empty) -- ``CompactedItem`` in
  github.com/openai/codex codex-rs/protocol/src/protocol.rs; resume rebuilds the
  history from the newest one (codex-rs/core/src/codex/rollout_reconstruction.rs);
- ``event_msg`` ``thread_rolled_back`` {``num_turns``}: the last turns are dropped from
  the history (the same file: ``drop_last_n_user_turns``); a resumed or forked rollout
  may write ``session_meta`` again.

OpenAI's input tokens include the cached ones ("Prompt caching",
platform.openai.com/docs/guides/prompt-caching), so a call's observed usage is
``uncached = input - cached``, ``cache_read = cached``, no writes. The rollout cannot
say more: Codex keeps a response's usage as its ``TokenUsage`` (github.com/openai/codex
codex-rs/protocol/src/protocol.rs, commit edb4efe: ``input_tokens``,
``cached_input_tokens``, ``output_tokens``, ``reasoning_output_tokens``,
``total_tokens``, summed field by field into ``total_token_usage``), which has no write
count, although the Responses API's usage does for GPT-5.6 and later
(``input_tokens_details.cache_write_tokens`` and ``cache_write_tokens_details``
{``ttl_30m_tokens``, ``ttl_12h_tokens``}, openai-python 3.63.0
``types/responses/response_usage.py``). On those models a write is counted as uncached
input, so the observed cost of a Codex session is a lower bound (docs/convert.md).

The replies of one model call are the response items between its inputs; the
``token_count`` that follows them is its usage. A ``reasoning`` item with
``encrypted_content`` becomes a thinking part of provider ``openai-responses`` (its
summary texts, the encrypted content as the signature); one without is reported as
dropped. A compaction becomes a ``compact`` step whose summary is the ``message``, or
without one the texts of the ``replacement_history`` (its user messages and summary);
a rollback drops the last turns' steps, their billed calls counted as rewound and kept
beside the scenario. ``turn_context.model`` names each reply's model: a ``switch`` step
to it goes before the first call and before each call whose model changed
(:meth:`Builder.finish`). User messages that carry the harness's context
(``<environment_context>``, ``<user_instructions>``) are dropped: the context is rebuilt
from ``session_meta`` and ``turn_context``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ...core import canonical
from ...core.errors import CanonicalJSONError
from .common import Builder, Converted, ToolMap, Usage, count, default_tools, read_lines

__all__ = ["DEFAULT_TOOLS", "convert_codex"]

#: Its tools -> the example bundle's tools (rules/tools.yaml).
DEFAULT_TOOLS = default_tools("codex")

SOURCE = "codex"
PROVIDER = "openai-responses"
_CONTEXT_TAGS = ("<environment_context>", "<user_instructions>", "<INSTRUCTIONS>")


def convert_codex(path: Path, file: str | None = None, tools: ToolMap = DEFAULT_TOOLS) -> Converted:
    """Convert one Codex rollout (see the module docstring)."""
    name = file if file is not None else str(path)
    build = Builder(SOURCE, name, tools)
    reply = _Reply()
    session = ""
    branch: str | None = None
    head: str | None = None

    for number, record in read_lines(path, name):
        kind = record.get("type")
        payload = record.get("payload")
        stamp = record.get("timestamp")
        if not isinstance(payload, dict):
            build.drop(number, f"a {kind!r} record", "no payload object")
            continue
        ptype = payload.get("type")
        if kind == "session_meta":
            if session:  # a resumed or forked rollout: the first session names it
                build.tally("session_meta_again")
            session = session or str(payload.get("id") or "")
            git = payload.get("git")
            if isinstance(git, dict):
                branch = git.get("branch") if isinstance(git.get("branch"), str) else None
                head = git.get("commit_hash") if isinstance(git.get("commit_hash"), str) else None
            build.set_context(_str(payload.get("cwd")), branch, head)
        elif kind == "turn_context":
            build.set_context(_str(payload.get("cwd")), branch, head)
            reply.model = _str(payload.get("model")) or reply.model
        elif kind == "compacted":
            reply.flush(build, number, None)
            build.compact(number, _summary(build, number, payload))
        elif kind == "event_msg":
            if ptype == "thread_rolled_back":
                reply.flush(build, number, None)
                turns = payload.get("num_turns")
                build.rewind(number, turns if isinstance(turns, int) else 0)
            elif ptype == "token_count":
                usage = _usage(payload)
                if reply.items or reply.calls or reply.thinking:
                    reply.flush(build, number, usage)
                elif usage is not None:
                    build.tally("token_counts_without_reply")
            else:
                build.tally("event_msg_echoes")
        elif kind == "response_item":
            if ptype == "message":
                role = payload.get("role")
                text = _content_text(payload.get("content"))
                if role == "assistant":
                    reply.items.append(text)
                elif role == "user":
                    if text.lstrip().startswith(_CONTEXT_TAGS):
                        build.drop(
                            number,
                            "a context message",
                            "rebuilt from session_meta and turn_context",
                        )
                        continue
                    reply.flush(build, number, None)
                    images = _images(build, number, payload.get("content"))
                    build.user(number, text, stamp, images=images)
                else:
                    build.drop(number, f"a {role!r} message", "instructions come from the bundle")
            elif ptype in ("function_call", "custom_tool_call", "local_shell_call"):
                call_name = str(
                    payload.get("name") or ("local_shell" if ptype == "local_shell_call" else "")
                )
                raw = payload.get("arguments", payload.get("input", payload.get("action", {})))
                reply.calls.append(
                    (str(payload.get("call_id") or payload.get("id")), call_name, _arguments(raw))
                )
            elif ptype in ("function_call_output", "custom_tool_call_output"):
                reply.flush(build, number, None)
                output = payload.get("output")
                if isinstance(output, dict):
                    output = output.get("content_items") or output.get(
                        "content", canonical.dumps(output)
                    )
                result: dict[str, Any] = {"call_id": str(payload.get("call_id"))}
                if isinstance(output, list):  # content items: texts and images (view_image)
                    result["output"], images = _output_items(build, number, output)
                    if images:
                        result["images"] = images
                else:
                    result["output"] = str(output)
                build.results(number, [result], stamp)
            elif ptype == "reasoning":
                part = _reasoning(payload)
                if part is None:
                    build.drop(
                        number,
                        "a reasoning item without encrypted_content",
                        "only its encrypted content can be sent back: no item ids are sent",
                    )
                else:
                    reply.thinking.append(part)
            else:
                build.drop(number, f"a {ptype!r} item", "the scenario format has no such step")
        else:
            build.drop(number, f"a {kind!r} record", "not part of the conversation")
    reply.flush(build, 0, None)
    return build.finish(f"codex session {session}".strip(), session or "codex", PROVIDER)


class _Reply:
    """The response items of the model call being read."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self.calls: list[tuple[str, str, Any]] = []
        self.thinking: list[dict[str, Any]] = []
        #: the model of the turn (``turn_context.model``)
        self.model: str | None = None

    def flush(self, build: Builder, line: int, usage: Usage | None) -> None:
        if not self.items and not self.calls and not self.thinking:
            return
        build.assistant(line, "\n".join(self.items), self.calls, usage, self.model, self.thinking)
        self.items, self.calls, self.thinking = [], [], []


def _output_items(build: Builder, line: int, items: list[Any]) -> tuple[str, list[dict[str, str]]]:
    """A function call output given as content items (codex-rs ``FunctionCallOutputBody::
    ContentItems``: ``input_text`` {text} / ``input_image`` {image_url, detail?}, what
    ``view_image`` returns): the texts joined by newlines, and the images with a base64
    ``data:`` URL as the result's ``images``; an image by another URL stays an
    ``[image]`` placeholder (reported and counted), any other item is reported."""
    texts, images = [], []
    for item in items:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "input_text":
            texts.append(str(item.get("text", "")))
        elif kind == "input_image":
            match = _DATA_URL.match(str(item.get("image_url") or ""))
            if match is None:
                build.tally("tool_result_images_as_placeholders")
                build.drop(
                    line,
                    "an image in a tool result",
                    "not a base64 data URL: an [image] placeholder",
                )
                texts.append("[image]")
            else:
                images.append({"media_type": match.group(1), "data": match.group(2)})
        else:
            build.drop(
                line, f"a {kind!r} item of a tool output", "the scenario format has no such part"
            )
    return "\n".join(texts), images


_DATA_URL = re.compile(r"data:(image/[a-z0-9.+-]+);base64,([A-Za-z0-9+/]+={0,2})\Z")


def _images(build: Builder, line: int, content: Any) -> list[dict[str, str]]:
    """A user message's ``input_image`` parts with a base64 ``data:`` URL as the turn's
    images; any other (an http URL, a file id) is reported."""
    images = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict) or part.get("type") != "input_image":
            continue
        match = _DATA_URL.match(str(part.get("image_url") or ""))
        if match is None:
            build.drop(line, "an image", "not a base64 data URL")
            continue
        images.append({"media_type": match.group(1), "data": match.group(2)})
    return images


def _summary(build: Builder, line: int, payload: dict[str, Any]) -> str:
    """A ``compacted`` record's summary: its ``message``, else (a remote compaction
    writes none) the texts of its ``replacement_history``, the exact history Codex goes
    on from -- the user messages it keeps and the summary -- as one summary; the context
    messages in it are rebuilt from ``turn_context`` and an opaque ``compaction`` item
    (encrypted) cannot be, both reported."""
    message = payload.get("message")
    history = payload.get("replacement_history")
    if not isinstance(history, list):
        return str(message or "")
    build.tally("compactions_with_replacement_history")
    texts = []
    for item in history:
        if not isinstance(item, dict):
            continue
        text = _content_text(item.get("content")) if item.get("type") == "message" else ""
        if item.get("type") == "message" and item.get("role") in ("user", "assistant"):
            if text.lstrip().startswith(_CONTEXT_TAGS):
                build.tally("replacement_context_messages")
                continue
            texts.append(text)
        else:
            build.drop(
                line,
                f"a {item.get('type')!r} item of the replacement history",
                "only its messages' texts become the summary",
            )
    if isinstance(message, str) and message.strip():
        return message
    return "\n\n".join(t for t in texts if t.strip())


def _reasoning(payload: dict[str, Any]) -> dict[str, Any] | None:
    """A ``reasoning`` item as a scenario's thinking part of provider
    ``openai-responses`` (its summary texts, ``encrypted_content`` as the signature);
    None without ``encrypted_content``: the serializer sends no item ids, so an item
    is only sent back with its encrypted content."""
    encrypted = payload.get("encrypted_content")
    if not isinstance(encrypted, str) or not encrypted:
        return None
    summary = payload.get("summary")
    texts = [
        str(part.get("text", ""))
        for part in (summary if isinstance(summary, list) else [])
        if isinstance(part, dict)
    ]
    return {"provider": "openai-responses", "summary": texts, "signature": encrypted}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(
        str(part.get("text", ""))
        for part in content
        if isinstance(part, dict) and part.get("type") in ("input_text", "output_text", "text")
    )


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            value = canonical.loads(raw)
        except (ValueError, CanonicalJSONError):
            return {"input": raw}
        return value if isinstance(value, dict) else {"input": raw}
    return raw if isinstance(raw, dict) else {"input": raw}


def _usage(payload: dict[str, Any]) -> Usage | None:
    info = payload.get("info")
    last = info.get("last_token_usage") if isinstance(info, dict) else None
    if not isinstance(last, dict):
        return None
    total = count(last.get("input_tokens"))
    cached = min(count(last.get("cached_input_tokens")), total)
    # output_tokens already counts the reasoning tokens (Responses API usage object)
    return Usage(total - cached, cached, 0, 0, count(last.get("output_tokens")))
