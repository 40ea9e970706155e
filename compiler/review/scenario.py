"""Scenario files: YAML conversation scripts that replay into exact request bodies.

The format is a public contract (``DESIGN.md``, "Scenario format")::

    name: context-revert          # free text
    conversation: conv-1          # conversation id
    bundle: ../..                 # optional, relative to this file (default: the
                                  # project's own bundle)
    base: {mode: agent, context: {...}}   # optional, merged into every user request
    steps:
      - user: {event: u1, query: "...", mode?, context?, selected_context?, open_files?,
               action_context?, timestamp?, compact?: {summary: "..."},
               tool_results?: [...]}      # pending calls' results, then the query  # model call
      - assistant: {thinking?: [{provider, text?, summary?, signature?, redacted?}],
                    text?: "...", tool_calls?: [{id, name, arguments}]}
      - tool_results: [{call_id, output, is_error?, timestamp?, images?}]  # model call
      - background: {event: b1, text: "..."}                               # model call
      - injected: {event: i1, text: "..."}                                 # model call
      - note: {event: n1, text: "..."}  # appended to the next call; no call of its own
      - retry: u1                 # re-deliver event u1's request unchanged  # model call
      - restart: true             # drop all memory; hydrate from the store
      - compact: {summary: "..."} # manual compaction between turns

Merging ``base`` into a user step: mappings merge key by key (recursively), lists and
scalars replace, except ``context``, whose keys replace ``base.context``'s keys whole
(a ``git`` given replaces the base ``git``; other base keys stay).

:func:`load_scenario` checks a file in three layers and reports every problem of all of
them together, sorted, each at ``file:line:col`` with its ``$.path``:

1. the loader (YAML with locations) and the ``scenario`` JSON Schema (unknown keys,
   types, a step with not exactly one key, ...);
2. each user and background request through :meth:`AgentRunRequest.from_value`, its
   errors mapped back to the step (or ``base``) that gave the offending value, and the
   bundle's modes and tool names;
3. the conversation's rules (:mod:`prefixlock.review.walk`), checked by walking the
   steps the way the history will: a retry of an unknown event, an event id delivered
   twice, a tool result for an unknown call id or a call without its result, an
   assistant step before any user turn or without a model call to answer, a turn
   started while tool calls are pending, a user turn's timestamp earlier than the
   turn's before it.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ..core import canonical
from ..core.errors import InputError, Location, PrefixlockError, SpecError, SpecErrors
from ..core.files import read_review_file
from ..core.messages import OpaquePart, Part, TextPart
from ..core.names import hint
from ..core.timestamps import seconds
from ..runtime.request import AgentRunRequest
from ..runtime.tools import ToolCall, ToolResult
from ..spec.build import build_bundle, find_example_root
from ..spec.bundle import Bundle
from ..spec.loader import LoadedDocument, load_yaml_bytes
from ..spec.validate import validate_document
from .steps import (
    STEP_KINDS,
    AssistantStep,
    BackgroundStep,
    CompactStep,
    InjectedStep,
    NoteStep,
    RestartStep,
    RetryStep,
    Scenario,
    Step,
    SwitchStep,
    ToolResultsStep,
    UserStep,
    bundle_note,
)
from .walk import Fail, Walk

__all__ = [
    "STEP_KINDS",
    "AssistantStep",
    "BackgroundStep",
    "CompactStep",
    "InjectedStep",
    "NoteStep",
    "RestartStep",
    "RetryStep",
    "Scenario",
    "Step",
    "SwitchStep",
    "ToolResultsStep",
    "UserStep",
    "golden_scenarios",
    "load_scenario",
    "merge_base",
    "scenario_bundle_root",
    "scenario_files",
    "thinking_part",
]


def merge_base(base: Mapping[str, Any], user: Mapping[str, Any]) -> dict[str, Any]:
    """A user step's fields over ``base``: mappings merge key by key, lists replace;
    ``context`` keys replace ``base.context`` keys whole."""
    out = dict(base)
    for key, value in user.items():
        old = out.get(key)
        if key == "context" and isinstance(old, Mapping) and isinstance(value, Mapping):
            out[key] = {**old, **value}
        else:
            out[key] = _deep_merge(old, value)
    return out


def _deep_merge(old: Any, new: Any) -> Any:
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        out = dict(old)
        for key, value in new.items():
            out[key] = _deep_merge(out.get(key), value)
        return out
    return new


def load_scenario(
    path: Path | str,
    *,
    bundle: Bundle | None = None,
    bundles: MutableMapping[Path, Bundle] | None = None,
) -> Scenario:
    """Load and check a scenario file; raises :class:`SpecErrors` naming every problem.

    ``bundle`` overrides the scenario's own (``bundle:`` or the project's); by default
    it is built from the spec root the scenario names. ``bundles``: spec root -> its
    bundle, for a caller loading many scenarios of one root: a root's bundle is taken
    from it, or built and kept in it.
    """
    path = Path(path)
    doc = _load(path)
    errors: list[SpecError] = []
    value = doc.value if isinstance(doc.value, dict) else {}
    root = _bundle_root(path, value)
    if bundle is None and bundles is not None:
        bundle = bundles.get(root)
    if bundle is None:
        bundle = _build(root, doc, "$.bundle" if "bundle" in value else "$", errors)
        if bundle is not None and bundles is not None:
            bundles[root] = bundle
    # Validated against the bundle's declared context fields too (the bundle first).
    declared = bundle.context_schemas() if bundle is not None else None
    problems = validate_document(doc, "scenario", context_fields=declared)
    invalid = [e.path for e in problems]
    errors[:0] = problems
    note = bundle_note(root, bundle) if bundle is not None else ""
    loader = _Loader(doc, value, bundle, errors, invalid, note)
    starts = loader.providers()
    steps = loader.steps()
    if errors:
        raise SpecErrors(errors)
    assert bundle is not None
    return Scenario(
        path=path,
        file=doc.file,
        name=value["name"],
        conversation=value["conversation"],
        bundle_root=root,
        bundle=bundle,
        steps=tuple(steps),
        providers=starts,
    )


def scenario_bundle_root(path: Path) -> Path | None:
    """The spec root of the bundle the scenario at ``path`` names (``bundle:``, else
    the spec root it lives in, as :func:`load_scenario` takes it), without building it;
    None if the file does not load."""
    try:
        value = _load(path).value
    except PrefixlockError:
        return None
    return _bundle_root(path, value) if isinstance(value, Mapping) else None


def _load(path: Path) -> LoadedDocument:
    """A scenario file, read as every review tool reads a repository file (inside the
    repository, regular, bounded: a link to a credentials file would otherwise have its
    keys quoted in schema errors)."""
    return load_yaml_bytes(read_review_file(path), path.as_posix())


def _bundle_root(path: Path, value: Mapping[str, Any]) -> Path:
    """``bundle:`` relative to the scenario; else the spec root the scenario lives in
    (the nearest folder above it holding ``rules/agent.yaml``); else the bundled example."""
    given = value.get("bundle")
    if isinstance(given, str):
        return (path.parent / given).resolve()
    for folder in path.resolve().parents:
        if (folder / "rules" / "agent.yaml").is_file():
            return folder
    return find_example_root()


def _build(root: Path, doc: LoadedDocument, at: str, errors: list[SpecError]) -> Bundle | None:
    """The bundle, or None with its errors (a spec file's own, or why it cannot build)."""
    try:
        return build_bundle(root)
    except SpecErrors as err:
        errors.extend(err.errors)
    except PrefixlockError as err:
        errors.append(
            SpecError(doc.location(at), at, f"cannot build the bundle at {str(root)!r}: {err}")
        )
    return None


_HEAD = re.compile(r"\$\.([A-Za-z_][A-Za-z0-9_]*)(.*)\Z", re.S)


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith((prefix + ".", prefix + "["))


def _failing(doc: LoadedDocument, errors: list[SpecError]) -> Fail:
    """Records an error at a path of ``doc`` (its key's position with ``at_key``)."""

    def fail(path: str, message: str, *, at_key: bool = False) -> None:
        where = doc.key_location(path) if at_key else doc.location(path)
        errors.append(SpecError(where, path, message))

    return fail


class _Loader:
    """Builds the steps of a schema-checked document, collecting every further error."""

    def __init__(
        self,
        doc: LoadedDocument,
        value: Mapping[str, Any],
        bundle: Bundle | None,
        errors: list[SpecError],
        invalid: list[str],
        note: str,
    ) -> None:
        self.doc = doc
        self.note = note  # names the bundle in the errors that depend on it
        self.value = value
        self.bundle = bundle
        self.errors = errors
        self.schema_paths = invalid  # the paths the schema found errors at
        base = value.get("base", {})
        self.base: Mapping[str, Any] = base if isinstance(base, Mapping) else {}
        self.can_build = isinstance(value.get("conversation"), str) and not any(
            _under(p, "$.base") or _under(p, "$.conversation") for p in self.schema_paths
        )
        # Not a bound method: the walk would hold the loader (and with it the whole
        # document) in a cycle, freed only by the next full collection, not on return.
        self.fail: Fail = _failing(doc, errors)
        self.walk = Walk(self.fail)
        self.texts: dict[str, str] = {}  # the requests' JSON texts, each kept once
        #: The latest user turn's time so far: (seconds, its text, the step's path).
        self.last_time: tuple[float, str, str] | None = None
        #: The latest time before the user turn being read (its tool results are checked
        #: against it: they come before the turn's query).
        self.time_before_turn: tuple[float, str, str] | None = None

    def steps(self) -> list[Step]:
        raw = self.value.get("steps")
        if not isinstance(raw, list):
            return []
        out: list[Step] = []
        for index, item in enumerate(raw):
            prefix = f"$.steps[{index}]"
            if any(_under(p, prefix) for p in self.schema_paths):
                self.walk.lost()
                continue
            ((kind, body),) = item.items()
            step = self.step(index, kind, body)
            if step is not None:
                self.walk.step(index, step)
                out.append(step)
            elif kind == "switch":
                continue  # reported; it changes nothing the walk checks
            elif self.can_build:  # its request is invalid (reported), its effect is known
                self.walk.turn(index, kind, body["event"], None)
            else:
                self.walk.lost()
        return out

    def step(self, index: int, kind: str, body: Any) -> Step | None:
        path = f"$.steps[{index}].{kind}"
        where = self.doc.key_location(path)
        if kind == "user":
            request = self.request(index, kind, body)
            if request is None:
                return None
            raw = body.get("tool_results", ())
            at = self.check_result_times(f"{path}.tool_results", raw, before=True)
            return UserStep(where, body["event"], request, _results(raw), at)
        if kind in ("background", "injected", "note"):
            request = self.request(index, kind, body)
            event = {"background": BackgroundStep, "injected": InjectedStep}.get(kind, NoteStep)
            return None if request is None else event(where, body["event"], request)
        if kind == "assistant":
            calls = tuple(
                ToolCall(call["id"], call["name"], call.get("arguments", {}))
                for call in body.get("tool_calls", ())
            )
            self.check_tools(path, calls)
            parts = tuple(
                part
                for j, entry in enumerate(body.get("thinking", ()))
                if (part := thinking_part(entry, f"{path}.thinking[{j}]", self.fail)) is not None
            )
            return AssistantStep(where, body.get("text"), calls, parts)
        if kind == "tool_results":
            return ToolResultsStep(where, _results(body), self.check_result_times(path, body))
        if kind == "retry":
            return RetryStep(where, body)
        if kind == "restart":
            return RestartStep(where)
        if kind == "switch":
            return self.switch(path, where, body)
        assert kind == "compact"
        return CompactStep(where, body["summary"])

    def providers(self) -> tuple[str, ...]:
        """``providers:``, each one the bundle configures (else reported)."""
        given = self.value.get("providers")
        if not isinstance(given, list) or any(_under(p, "$.providers") for p in self.schema_paths):
            return ()
        if self.bundle is None:
            return tuple(given)
        configured = [s.provider for s in self.bundle.settings]
        for index, name in enumerate(given):
            if name not in configured:
                why = hint(name, configured, "configured providers")
                message = f"provider {name!r} is not configured ({why}) ({self.note})"
                self.fail(f"$.providers[{index}]", message)
        return tuple(given)

    def switch(self, path: str, where: Location, body: Mapping[str, Any]) -> SwitchStep | None:
        """A switch to a provider the bundle configures (its model by default)."""
        provider = body["provider"]
        if self.bundle is None:
            return SwitchStep(where, provider, body.get("model", ""))
        models = {s.provider: s.model for s in self.bundle.settings}
        if provider not in models:
            why = hint(provider, list(models), "configured providers")
            message = f"provider {provider!r} is not configured ({why}) ({self.note})"
            self.fail(f"{path}.provider", message)
            return None
        return SwitchStep(where, provider, body.get("model", models[provider]))

    # -- requests ------------------------------------------------------------------

    def request(self, index: int, kind: str, body: Mapping[str, Any]) -> AgentRunRequest | None:
        """The step's AgentRunRequest, or None (errors reported) if it is invalid."""
        if not self.can_build:
            return None
        given = f"$.steps[{index}].{kind}"
        base: Mapping[str, Any] = {}
        if kind in ("background", "injected", "note"):
            fields: dict[str, Any] = {"text": body["text"]}
        else:
            base = self.base
            own = {k: v for k, v in body.items() if k not in ("event", "tool_results")}
            fields = merge_base(base, own)
        value = {
            "conversation_id": self.value["conversation"],
            "event_id": body["event"],
            "kind": "injected" if kind == "note" else kind,  # a note is recorded as one
            **fields,
        }
        try:
            declared = self.bundle.context_schemas() if self.bundle is not None else None
            request = AgentRunRequest.from_value(value, file=self.doc.file, context_fields=declared)
        except SpecErrors as err:
            for error in err.errors:
                self.fail(_map_path(error.path, given, body, base), error.message)
            return None
        if kind == "user":
            self.check_mode(request, given, body)
            self.check_subagent_tools(given, body)
            self.check_time(request, given, body)
        # The steps of a long scenario mostly send the base's context: one text each.
        texts = self.texts
        return attrs.evolve(
            request,
            selected_context=texts.setdefault(request.selected_context, request.selected_context),
            open_files=texts.setdefault(request.open_files, request.open_files),
            action_context=texts.setdefault(request.action_context, request.action_context),
            context=texts.setdefault(request.context, request.context),
        )

    def check_time(self, request: AgentRunRequest, given: str, body: Mapping[str, Any]) -> None:
        """A user turn's timestamp is not earlier than the turn's before it: the cache
        simulator counts expiry from them and refuses a time that goes back."""
        self.time_before_turn = self.last_time
        stamp = request.timestamp
        if stamp is None:
            return
        now = seconds(stamp)
        last = self.last_time
        if last is not None and now < last[0]:
            self.fail(
                _map_path("$.timestamp", given, body, self.base),
                f"timestamp {stamp} is earlier than the turn's before it ({last[1]}, "
                f"{last[2]}): a scenario's times must not go back",
            )
            return
        self.last_time = (now, stamp, given)

    def check_result_times(
        self, path: str, results: Sequence[Mapping[str, Any]], *, before: bool = False
    ) -> str | None:
        """The latest timestamp of a batch of tool results (None: none has one). Like a
        turn's, it is not earlier than the turn's before it (the simulator dates the
        call by it); results sent with a user turn (``before``) come before the turn, so
        the turn's own time is checked after them (:meth:`check_time`) only when the
        turn has one -- here they are checked against the time before the turn."""
        latest: tuple[float, str] | None = None
        last = self.last_time if not before else self.time_before_turn
        for j, result in enumerate(results):
            stamp = result.get("timestamp")
            if not isinstance(stamp, str):
                continue
            now = seconds(stamp)
            if last is not None and now < last[0]:
                self.fail(
                    f"{path}[{j}].timestamp",
                    f"timestamp {stamp} is earlier than the turn's before it ({last[1]}, "
                    f"{last[2]}): a scenario's times must not go back",
                )
                continue
            if latest is None or now > latest[0]:
                latest = (now, stamp)
        if latest is None:
            return None
        if not before:
            self.last_time = (latest[0], latest[1], path)
        return latest[1]

    def check_mode(self, request: AgentRunRequest, given: str, body: Mapping[str, Any]) -> None:
        if self.bundle is None or request.mode is None:
            return
        names = [m.name for m in self.bundle.modes]
        if request.mode not in names:
            path = f"{given}.mode" if "mode" in body else "$.base.mode"
            why = hint(request.mode, names, "modes")
            self.fail(path, f"unknown mode {request.mode!r} ({why}) ({self.note})")

    def check_subagent_tools(self, given: str, body: Mapping[str, Any]) -> None:
        """A subagent's ``tools`` sent in the context must name tools of the bundle."""
        if self.bundle is None:
            return
        names = [tool.name for tool in self.bundle.tools]
        for where, context in ((given, body.get("context")), ("$.base", self.base.get("context"))):
            if not isinstance(context, Mapping) or "subagents" not in context:
                continue
            for i, subagent in enumerate(context["subagents"]):
                for j, name in enumerate(subagent.get("tools", ())):
                    if name not in names:
                        why = hint(name, names, "tools")
                        path = f"{where}.context.subagents[{i}].tools[{j}]"
                        self.fail(path, f"unknown tool {name!r} ({why}) ({self.note})")
            return  # a step's subagents replace the base's

    def check_tools(self, path: str, calls: Iterable[ToolCall]) -> None:
        if self.bundle is None:
            return
        names = [tool.name for tool in self.bundle.tools]
        for j, call in enumerate(calls):
            if call.name not in names:
                why = hint(call.name, names, "tools")
                message = f"unknown tool {call.name!r} ({why}) ({self.note})"
                self.fail(f"{path}.tool_calls[{j}].name", message)


#: Per provider family: the keys a thinking part may have besides ``provider``, and the
#: shapes it may take (each a set of keys that must all be given).
_THINKING_SHAPES: dict[str, tuple[frozenset[str], ...]] = {
    "anthropic": (frozenset({"text", "signature"}), frozenset({"redacted"})),
    # Claude on Bedrock's InvokeModel: the Messages API's blocks (its reader records
    # them under its own name: providers/readers/bedrock_anthropic.py)
    "bedrock-anthropic": (frozenset({"text", "signature"}), frozenset({"redacted"})),
    "bedrock-converse": (
        frozenset({"text", "signature"}),
        frozenset({"text"}),
        frozenset({"redacted"}),
    ),
    "openai-responses": (frozenset({"summary", "signature"}),),
    "gemini": (frozenset({"text", "signature"}), frozenset({"text"}), frozenset({"signature"})),
}

_SHAPE_WORDS = {
    "anthropic": "text and signature (a thinking block), or redacted (redacted_thinking)",
    "bedrock-anthropic": "text and signature (a thinking block), or redacted (redacted_thinking)",
    "bedrock-converse": "text with an optional signature (reasoningText), or redacted "
    "(redactedContent)",
    "openai-responses": "summary and signature (a reasoning item's encrypted_content)",
    "gemini": "text (a thought), signature (a thoughtSignature), or both",
}


def thinking_part(entry: Mapping[str, Any], path: str, fail: Fail) -> Part | None:
    """A scenario's thinking part as the named provider's reader records it
    (``docs/scenarios.md``, "Thinking"): an :class:`OpaquePart` holding the provider's
    own block -- Anthropic's (and Claude on Bedrock InvokeModel's)
    ``thinking`` / ``redacted_thinking``, a Bedrock Converse
    ``reasoningContent`` block, an OpenAI Responses ``reasoning`` item with its
    ``encrypted_content``, a Gemini ``thought`` part -- or, for a Gemini signature
    without text, the blank text part carrying the ``thoughtSignature`` (as Gemini sends
    it at the end of a part). None, with the problem reported, for a shape the provider
    does not have."""
    provider = entry["provider"]
    keys = frozenset(entry) - {"provider"}
    if keys not in _THINKING_SHAPES[provider]:
        fail(path, f"a {provider} thinking part has {_SHAPE_WORDS[provider]}; got {sorted(keys)}")
        return None
    text, signature, redacted = entry.get("text"), entry.get("signature"), entry.get("redacted")
    block: dict[str, Any]
    if provider in ("gemini", "bedrock-converse") and (
        (provider == "gemini" and signature is not None and not _base64(signature))
        or (provider == "bedrock-converse" and redacted is not None and not _base64(redacted))
    ):
        field = "signature" if provider == "gemini" else "redacted"
        fail(f"{path}.{field}", f"a {provider} {field} is base64 data, as the service sends it")
        return None
    if provider in ("anthropic", "bedrock-anthropic"):
        block = (
            {"type": "redacted_thinking", "data": redacted}
            if redacted is not None
            else {"type": "thinking", "thinking": text, "signature": signature}
        )
    elif provider == "bedrock-converse":
        if redacted is not None:
            block = {"reasoningContent": {"redactedContent": redacted}}
        else:
            inner = {"text": text} if signature is None else {"text": text, "signature": signature}
            block = {"reasoningContent": {"reasoningText": inner}}
    elif provider == "openai-responses":
        summary = [{"type": "summary_text", "text": t} for t in entry["summary"]]
        block = {"type": "reasoning", "summary": summary, "encrypted_content": signature}
    else:
        if text is None:
            return TextPart("", thought_signature=signature)
        block = {"text": text, "thought": True}
        if signature is not None:
            block["thoughtSignature"] = signature
    return OpaquePart(provider, canonical.dumps(block))


def _base64(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _results(raw: Iterable[Mapping[str, Any]]) -> tuple[ToolResult, ...]:
    return tuple(
        ToolResult(r["call_id"], r["output"], r.get("is_error", False), r.get("images", ()))
        for r in raw
    )


def _map_path(path: str, given: str, body: Mapping[str, Any], base: Mapping[str, Any]) -> str:
    """Where in the scenario the value at ``path`` of a built request came from."""
    match = _HEAD.match(path)
    if match is None:
        return given
    key, rest = match.groups()
    if key == "conversation_id":
        return "$.conversation" + rest
    if key == "event_id":
        return f"{given}.event{rest}"
    if key == "kind":
        return given
    if key == "context":
        sub = _HEAD.match("$" + rest)
        if sub is not None:
            name, tail = sub.groups()
            if name in body.get("context", {}):
                return f"{given}.context.{name}{tail}"
            if name in base.get("context", {}):
                return f"$.base.context.{name}{tail}"
    if key in body:
        return f"{given}.{key}{rest}"
    if key in base:
        return f"$.base.{key}{rest}"
    return given


# --- finding scenarios ---------------------------------------------------------------


def golden_scenarios(root: Path | str = ".") -> list[Path]:
    """The project's golden scenarios: ``golden/*/scenario.yaml``, sorted."""
    return sorted(Path(root).glob("golden/*/scenario.yaml"))


def scenario_files(paths: Sequence[Path]) -> list[Path]:
    """The scenario files ``paths`` name: files as given, a folder's own
    ``scenario.yaml`` or else its ``*/scenario.yaml``."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = [path / "scenario.yaml"] if (path / "scenario.yaml").is_file() else []
            found = found or sorted(path.glob("*/scenario.yaml"))
            if not found:
                raise InputError(f"{path}: no scenario.yaml in it or its subfolders")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise InputError(f"{path}: no such scenario file or folder")
    return files
