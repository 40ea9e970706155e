"""``prefixlock convert claude-code FILE.jsonl``: a Claude Code session transcript as a
scenario and its observed usage.

The format (JSON lines, one record each; no official specification, so read from the
public descriptions of it and cited here):

- records have ``type`` ``user`` / ``assistant`` / ``system`` / ``summary`` (and
  bookkeeping types such as ``file-history-snapshot``, ``queue-operation``), and
  ``uuid``, ``parentUuid`` (null for a root), ``isSidechain``, ``timestamp`` (ISO 8601),
  ``sessionId``, ``cwd``, ``gitBranch``; ``message`` holds the API message
  (``content`` a string or blocks ``text`` / ``thinking`` with ``signature`` /
  ``tool_use`` {id, name, input} / ``tool_result`` {tool_use_id, content, is_error} /
  ``image``) and, on assistant records, ``model``, ``id`` and ``usage``
  (``input_tokens``, ``output_tokens``, ``cache_creation_input_tokens``,
  ``cache_read_input_tokens``) -- github.com/Huntehhh/claude-code-chat
  docs/claude-cli-jsonl-format.md; github.com/alicoding/claude-parser docs/JSONL-STRUCTURE.md;
  github.com/DRMacIver/claude-reliability notes/transcript-format.md;
- ``usage.cache_creation`` splits the cache writes into ``ephemeral_5m_input_tokens`` and
  ``ephemeral_1h_input_tokens`` (the Messages API's usage object, "Prompt caching",
  docs.anthropic.com);
- one API response is written as several assistant records, one per content block,
  sharing ``message.id`` and its usage (claude-parser, as above);
- sub-agents write records with ``isSidechain: true`` (and ``agentId``), in the session
  file or in ``agent-*.jsonl`` files (claude-parser's JSONL_STRUCTURE_COMPLETE.md);
- a compaction writes a ``system`` record of ``subtype: compact_boundary`` with a null
  ``parentUuid`` and a ``logicalParentUuid``, then a user record with
  ``isCompactSummary: true`` holding the summary;
- a rewind (editing an earlier prompt) starts a new branch from an earlier ``uuid``, so
  the records form a tree; a resumed session may write records again under the same
  ``uuid``.

What the converter keeps: the chain of ``parentUuid`` links that ends at the transcript's
last main-chain record (the branch that led to the final state; every record of another
branch is counted as rewound), each record at its latest writing. Sidechains are kept
apart: each agent's records (by ``agentId``) are converted the same way into a scenario
of their own, and their billed calls counted. Thinking blocks become the reply's
``thinking`` parts of provider ``anthropic`` (text and signature; ``redacted_thinking``
its data), first in the reply; an unsigned one is reported as dropped. A prompt's inline
(base64) images become the turn's ``images``, a tool result's its ``images`` (an image by
another source stays an ``[image]`` placeholder, reported and counted). Bookkeeping records
are reported as dropped; ``isMeta`` user records (command caveats, reminders the
harness adds) become ``note`` steps, sent with the next call.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import attrs

from .common import Builder, Converted, ToolMap, Usage, count, default_tools, read_lines

__all__ = ["DEFAULT_TOOLS", "convert_claude_code"]

#: Its tools -> the example bundle's tools (rules/tools.yaml).
DEFAULT_TOOLS = default_tools("claude-code")

SOURCE = "claude-code"
PROVIDER = "anthropic"
_CHAIN_TYPES = ("user", "assistant", "system")


def convert_claude_code(
    path: Path, file: str | None = None, tools: ToolMap = DEFAULT_TOOLS
) -> Converted:
    """Convert one Claude Code transcript (see the module docstring)."""
    name = file if file is not None else str(path)
    lines = read_lines(path, name)
    build = Builder(SOURCE, name, tools)
    main: list[tuple[int, dict[str, Any]]] = []
    agents: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    session = ""
    for number, record in lines:
        kind = record.get("type")
        session = session or str(record.get("sessionId") or "")
        if kind not in _CHAIN_TYPES or not isinstance(record.get("uuid"), str):
            build.drop(number, f"a {kind!r} record", "bookkeeping, not part of the conversation")
        elif record.get("isSidechain") is True:
            agents.setdefault(_agent(record), []).append((number, record))
        else:
            main.append((number, record))
    if not main and len(agents) == 1:
        # a sub-agent's own file (agent-<id>.jsonl: every record a sidechain): its
        # conversation is the scenario
        ((agent, records),) = agents.items()
        build.tally(f"sidechain {agent} as the scenario")
        main, agents = records, {}
    sidechains = []
    for agent in sorted(agents):
        records = agents[agent]
        billed = {
            str(r["message"].get("id") or r["uuid"])
            for _, r in records
            if r.get("type") == "assistant" and isinstance(r.get("message"), dict)
        }
        build.tally("sidechain_records", len(records))
        build.tally(f"sidechain {agent} billed calls", len(billed))
        side = Builder(SOURCE, name, tools)
        _conversation(records, side)
        if side.steps and any("user" in step for step in side.steps):
            conversation = f"{session or 'claude-code'}:{agent}"
            sidechains.append(
                (
                    agent,
                    side.finish(
                        f"claude-code sub-agent {agent} of {session}", conversation, PROVIDER
                    ),
                )
            )
        else:
            build.drop(
                records[0][0], f"sidechain {agent}", "it has no user turn to start a scenario"
            )
    _conversation(main, build)
    done = build.finish(
        f"claude-code session {session}".strip(), session or "claude-code", PROVIDER
    )
    return attrs.evolve(done, sidechains=tuple(sidechains))


def _agent(record: dict[str, Any]) -> str:
    """A sidechain's agent id, as a file name may hold it."""
    raw = str(record.get("agentId") or "sidechain")
    return re.sub(r"[^A-Za-z0-9_-]", "_", raw)[:64] or "sidechain"


def _conversation(records: list[tuple[int, dict[str, Any]]], build: Builder) -> None:
    """Play the records' final branch into ``build``; count the rewritten and rewound."""
    latest: dict[str, tuple[int, dict[str, Any]]] = {}
    leaf: str | None = None
    for number, record in records:
        uuid = record["uuid"]
        if uuid in latest:
            build.tally("rewritten_records")
        latest[uuid] = (number, record)
        leaf = uuid
    chain = _chain(latest, leaf, build)
    on_chain = {record["uuid"] for _, record in chain}
    rewound = [(n, r) for uuid, (n, r) in latest.items() if uuid not in on_chain]
    if rewound:
        build.tally("rewound_records", len(rewound))
        billed = {
            str(r["message"].get("id"))
            for _, r in rewound
            if r.get("type") == "assistant" and isinstance(r.get("message"), dict)
        }
        build.tally("rewound_billed_calls", len(billed))
    _play(chain, build)


def _chain(
    latest: dict[str, tuple[int, dict[str, Any]]], leaf: str | None, build: Builder
) -> list[tuple[int, dict[str, Any]]]:
    """The records from the root to ``leaf``, following ``parentUuid`` (and a compaction
    boundary's ``logicalParentUuid``)."""
    out: list[tuple[int, dict[str, Any]]] = []
    seen: set[str] = set()
    at = leaf
    while at is not None and at in latest and at not in seen:
        seen.add(at)
        number, record = latest[at]
        out.append((number, record))
        parent = record.get("parentUuid")
        if parent is None and record.get("subtype") == "compact_boundary":
            parent = record.get("logicalParentUuid")
        if isinstance(parent, str) and parent not in latest:
            build.drop(
                number, f"the parent {parent!r}", "not in the transcript: the chain starts here"
            )
        at = parent if isinstance(parent, str) else None
    out.reverse()
    return out


def _thinking(block: dict[str, Any]) -> dict[str, Any] | None:
    """A ``thinking`` block (text and ``signature``) or ``redacted_thinking`` block
    (``data``) as a scenario's thinking part of provider ``anthropic``; None if it has no
    signature (or data): Anthropic refuses an unsigned thinking block sent back."""
    if block.get("type") == "redacted_thinking":
        data = block.get("data")
        ok = isinstance(data, str) and data
        return {"provider": "anthropic", "redacted": data} if ok else None
    text, signature = block.get("thinking"), block.get("signature")
    if not isinstance(text, str) or not isinstance(signature, str) or not signature:
        return None
    return {"provider": "anthropic", "text": text, "signature": signature}


def _image(block: dict[str, Any]) -> dict[str, str] | None:
    """An ``image`` block with an inline base64 source as a scenario image
    ``{media_type, data}``; None for any other source (a URL, a file id)."""
    source = block.get("source")
    if not isinstance(source, dict) or source.get("type") != "base64":
        return None
    media, data = source.get("media_type"), source.get("data")
    if not isinstance(media, str) or not isinstance(data, str) or not data:
        return None
    return {"media_type": media, "data": data}


def _result_content(build: Builder, line: int, content: Any) -> tuple[str, list[dict[str, str]]]:
    """A ``tool_result`` block's content: its texts (joined by newlines) and its inline
    (base64) images as the result's ``images`` (a screenshot, the ``Read`` of a PNG); an
    image by another source stays an ``[image]`` placeholder in the text (counted)."""
    if not isinstance(content, list):
        return _text(content), []
    texts, images = [], []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        elif block.get("type") == "image":
            image = _image(block)
            if image is None:
                build.tally("tool_result_images_as_placeholders")
                build.drop(
                    line,
                    "an image in a tool result",
                    "not inline base64 data: an [image] placeholder",
                )
                texts.append("[image]")
            else:
                images.append(image)
    return "\n".join(texts), images


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif isinstance(block, dict) and block.get("type") == "image":
                parts.append("[image]")
    return "\n".join(parts)


def _usage(message: dict[str, Any]) -> Usage | None:
    usage = message.get("usage")
    if not isinstance(usage, dict):
        return None
    written = count(usage.get("cache_creation_input_tokens"))
    split = usage.get("cache_creation")
    one_hour = count(split.get("ephemeral_1h_input_tokens")) if isinstance(split, dict) else 0
    five = count(split.get("ephemeral_5m_input_tokens")) if isinstance(split, dict) else written
    if isinstance(split, dict) and five + one_hour != written and written:
        five = written - one_hour  # the total is the bill; the split only divides it
    return Usage(
        count(usage.get("input_tokens")),
        count(usage.get("cache_read_input_tokens")),
        five,
        one_hour,
        count(usage.get("output_tokens")),
    )


def _play(chain: list[tuple[int, dict[str, Any]]], build: Builder) -> None:
    index = 0
    while index < len(chain):
        number, record = chain[index]
        kind = record["type"]
        build.set_context(record.get("cwd"), record.get("gitBranch"))
        message = record.get("message") if isinstance(record.get("message"), dict) else {}
        assert isinstance(message, dict)
        if kind == "system":
            if record.get("subtype") != "compact_boundary":
                build.drop(
                    number, "a system record", f"subtype {record.get('subtype')!r} is not sent"
                )
            index += 1
            continue
        if kind == "assistant":
            blocks: list[Any] = []
            ident = message.get("id")
            usage = _usage(message)
            model = message.get("model")
            # one response, several records (one per block): merge them
            while True:
                content = message.get("content")
                blocks += (
                    content
                    if isinstance(content, list)
                    else [{"type": "text", "text": str(content or "")}]
                )
                nxt = chain[index + 1] if index + 1 < len(chain) else None
                if nxt is None or nxt[1]["type"] != "assistant" or ident is None:
                    break
                follow = nxt[1].get("message")
                if not isinstance(follow, dict) or follow.get("id") != ident:
                    break
                index += 1
                message = follow
                usage = _usage(message) or usage
            index += 1
            if model == "<synthetic>":
                build.drop(
                    number,
                    "a synthetic assistant message",
                    "written by Claude Code, not a model call",
                )
                continue
            texts, calls, thinking = [], [], []
            for block in blocks:
                if not isinstance(block, dict):
                    continue
                btype = block.get("type")
                if btype == "text":
                    texts.append(str(block.get("text", "")))
                elif btype == "tool_use":
                    calls.append(
                        (str(block.get("id")), str(block.get("name")), block.get("input", {}))
                    )
                elif btype in ("thinking", "redacted_thinking"):
                    part = _thinking(block)
                    if part is None:
                        build.drop(
                            number,
                            f"a {btype} block without its signature",
                            "only a signed block can be sent back",
                        )
                        continue
                    if texts or calls:
                        # interleaved thinking: the scenario puts a reply's thinking first
                        build.tally("thinking_moved_before_text_or_calls")
                    thinking.append(part)
                else:
                    build.drop(number, f"a {btype!r} block", "the scenario format has no such part")
            build.assistant(
                number,
                "\n".join(texts),
                calls,
                usage,
                model if isinstance(model, str) else None,
                thinking,
            )
            continue
        index += 1
        content = message.get("content")
        if record.get("isCompactSummary") is True:
            build.compact(number, _text(content))
            continue
        if record.get("isMeta") is True:
            # harness content (command caveats, reminders): sent with the next call
            build.note(number, _text(content), "a meta user record")
            continue
        stamp = record.get("timestamp")
        if isinstance(content, list):
            results = []
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    output, result_images = _result_content(build, number, block.get("content"))
                    result: dict[str, Any] = {
                        "call_id": str(block.get("tool_use_id")),
                        "output": output,
                        "is_error": block.get("is_error") is True,
                    }
                    if result_images:
                        result["images"] = result_images
                    results.append(result)
            text = "\n".join(
                str(b.get("text", ""))
                for b in content
                if isinstance(b, dict) and b.get("type") == "text"
            )
            images = []
            for block in content:
                if isinstance(block, dict) and block.get("type") == "image":
                    image = _image(block)
                    if image is None:
                        build.tally("images_as_placeholders")
                        build.drop(
                            number, "an image", "not inline base64 data: an [image] placeholder"
                        )
                        text = (text + "\n[image]").strip("\n")
                    else:
                        images.append(image)
            if results and (text or images):
                # the query travels with the results: one turn, results first
                build.tally("queries_with_tool_results")
                build.user(number, text, stamp, results, images)
                continue
            if results:
                build.results(number, results, stamp)
                continue
            build.user(number, text, stamp, images=images)
            continue
        build.user(number, str(content or ""), stamp)
