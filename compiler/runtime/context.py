"""Request compilation: conversation-level data -> request context, turn-level -> runtime.

* :func:`conversation_context` merges the bundle's built-in context with what the client
  sent (the client wins on an equal name), puts every set-like collection in canonical
  order (rules, skills, subagents, MCP servers and their tools by name; globs and
  workspace roots sorted; JSON-Schema keys sorted by the canonical encoder), strips the
  body of agent-requested rules and redacts secrets by name and by value in every string
  (:mod:`prefixlock.runtime.redact`). The same
  context sent in another order therefore compiles to the same bytes.
* :func:`render_request_context` renders it with the bundle's context template, once
  per bundle and context (:func:`rendered_context`). Under ``context_updates: sections``
  :func:`request_sections` renders each section block alone instead (the texts the
  history compares, section by section), and :func:`render_sections` lays the chosen
  ones out in the template's frame with the ``update`` it describes.
* :func:`render_runtime` renders turn-level data with the mode's runtime template: the
  template is never given conversation-level data, so it cannot embed rules or MCP.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

from ..core import canonical
from ..core.errors import SpecError, SpecErrors
from ..spec.bundle import Bundle, Mode
from ..spec.sample import sample_context, sample_turn
from .redact import redact_mapping, redact_value
from .request import AgentRunRequest

_LISTS = ("rules", "skills", "subagents")


def _by_name(items: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    return {item["name"]: item for item in items}


def _merge_named(
    defaults: Iterable[Mapping[str, Any]], sent: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    merged = _by_name(defaults)
    merged.update(_by_name(sent))
    return [dict(merged[name]) for name in sorted(merged)]


def _rule(rule: dict[str, Any]) -> dict[str, Any]:
    if "globs" in rule:
        rule["globs"] = sorted(set(rule["globs"]))
    if rule["kind"] == "agent":
        # Agent-requested rules are offered by name and description; the model asks
        # for the body when it needs it.
        rule.pop("body", None)
    return rule


def _mcp_server(server: dict[str, Any]) -> dict[str, Any]:
    server["tools"] = [dict(t) for t in sorted(server.get("tools", []), key=lambda t: t["name"])]
    for tool in server["tools"]:
        # Rendered with the ``canonical`` filter: schema keys sorted, order sent is moot.
        tool.setdefault("input_schema", {})
    for key in ("env", "headers"):
        if key in server:
            server[key] = dict(sorted(redact_mapping(server[key]).items()))
    return server


def conversation_context(bundle: Bundle, sent: Mapping[str, Any]) -> dict[str, Any]:
    """The canonical, redacted conversation-level variables of the context template.

    A deep copy: nothing a render does to it (the sandbox refuses mutation anyway) can
    reach the bundle's defaults, the request or the next render.
    """
    bundle_defaults, sent = copy.deepcopy((dict(bundle.defaults), sent))
    out: dict[str, Any] = {}
    for key in _LISTS:
        out[key] = _merge_named(bundle_defaults.get(key, ()), sent.get(key, ()))
    out["rules"] = [_rule(r) for r in out["rules"]]
    for sub in out["subagents"]:
        if "tools" in sub:
            sub["tools"] = sorted(set(sub["tools"]))
    default_servers = bundle_defaults.get("mcp", {}).get("servers", ())
    sent_servers = sent.get("mcp", {}).get("servers", ())
    out["mcp"] = {"servers": [_mcp_server(s) for s in _merge_named(default_servers, sent_servers)]}
    environment = sent.get("environment")
    if environment is not None:
        environment = dict(environment)
        if "workspace_roots" in environment:
            environment["workspace_roots"] = sorted(set(environment["workspace_roots"]))
    out["environment"] = environment
    git = sent.get("git")
    if git is not None:
        git = dict(git)
    out["git"] = git
    # Every string, by value: rule bodies, descriptions, schemas, commands, URLs, env.
    redacted: dict[str, Any] = redact_value(out)
    return redacted


class _Renderings:
    """Rendered request contexts, most recently used last, bounded by count and size.

    The template sees nothing but the bundle and the context (:func:`conversation_context`;
    the sandbox gives it no clock and no state), so the text is a function of the two,
    and a turn that sends the context of an earlier turn, as most do, gets the text
    rendered then: a user turn of the bench took 1.0 ms, most of it this rendering, where a
    tool-loop call takes 0.2 ms. Bundles compare by identity (a bundle is immutable, and
    a new deploy is a new one), contexts by their canonical text (the same context sent
    in another order is the same text). A refusal is not remembered: it is raised again.

    At most ``count`` renderings and ``chars`` characters (context and text) are kept; a
    rendering larger than ``largest`` is not kept at all, so a huge context costs a render
    per turn, as before, instead of memory. Safe to share between threads (two threads
    may render the same context at once; both get the same text).
    """

    def __init__(self, count: int, chars: int, largest: int) -> None:
        self.count, self.chars, self.largest = count, chars, largest
        self._items: OrderedDict[tuple[Bundle, str], tuple[str, ...]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def __call__(self, bundle: Bundle, context: str) -> tuple[str, ...]:
        """The request-context text of ``context`` (a request's canonical JSON text), or
        under ``context_updates: sections`` the text of each section in order."""
        key = (bundle, context)
        with self._lock:
            texts = self._items.get(key)
            if texts is not None:
                self._items.move_to_end(key)
                return texts
        variables = conversation_context(bundle, canonical.loads(context))
        template = bundle.context_template
        if bundle.sections:
            texts = tuple(template.render_section(name, variables) for name in bundle.sections)
        else:
            texts = (template.render({**variables, "update": None}),)
        size = len(context) + sum(map(len, texts))
        if size <= self.largest:
            with self._lock:
                if key not in self._items:
                    self._items[key] = texts
                    self._size += size
                    while len(self._items) > self.count or self._size > self.chars:
                        (_, kept), dropped = self._items.popitem(last=False)
                        self._size -= len(kept) + sum(map(len, dropped))
        return texts

    @property
    def size(self) -> tuple[int, int]:
        """How many renderings are kept, and their characters (context and text)."""
        with self._lock:
            return len(self._items), self._size

    def cache_clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._size = 0


#: The request contexts of recent turns (see :class:`_Renderings`): 32 renderings,
#: 8 Mi characters in all, none over 1 Mi (a context of the bench workload and its text
#: are about 12 Ki characters).
rendered_context = _Renderings(count=32, chars=8 * 1024 * 1024, largest=1024 * 1024)


def render_request_context(bundle: Bundle, request: AgentRunRequest) -> str:
    """The whole request-context text (``context_updates: whole``)."""
    return rendered_context(bundle, request.context)[0]


def request_sections(bundle: Bundle, request: AgentRunRequest) -> dict[str, str]:
    """Each section's text by name, in section order (``context_updates: sections``); a
    section whose text is blank is empty (``""``): it has nothing in force."""
    texts = rendered_context(bundle, request.context)
    return {
        name: text if text.strip() else ""
        for name, text in zip(bundle.sections, texts, strict=True)
    }


def render_sections(
    bundle: Bundle, texts: Mapping[str, str], update: Mapping[str, Any] | None
) -> str:
    """The request-context message text of ``texts`` (the sections it carries) laid out
    in the template's frame, which reads ``update``: ``{"full": true, "sections": [the
    non-empty ones], "cleared": []}`` for the full context, else ``{"full": false,
    "sections": [the ones it replaces], "cleared": [those of them now empty]}`` (names
    in section order). Under ``context_updates: whole`` it is None."""
    return bundle.context_template.render_frame({"update": update}, texts)


def turn_variables(mode: Mode, request: AgentRunRequest) -> dict[str, Any]:
    """The only variables a runtime template ever sees."""
    return {
        "query": request.query or "",
        "selected_context": canonical.loads(request.selected_context),
        "open_files": canonical.loads(request.open_files),
        "action_context": canonical.loads(request.action_context),
        "timestamp": request.timestamp,
        "mode": {"name": mode.name, "reminder": mode.reminder},
    }


def render_runtime(bundle: Bundle, request: AgentRunRequest) -> str:
    mode = bundle.mode(request.mode or bundle.default_mode)
    return mode.runtime.render(turn_variables(mode, request))


def full_context(bundle: Bundle, request: AgentRunRequest) -> str:
    """The whole request context of ``request``: under ``context_updates: sections`` the
    message a first turn (or an automatic compaction) sends, every non-empty section in
    order; else the one text. What a harness without updates would resend (the naive
    yardstick of ``verify``)."""
    if not bundle.sections:
        return render_request_context(bundle, request)
    texts = request_sections(bundle, request)
    carried = {name: text for name, text in texts.items() if text}
    return render_sections(bundle, carried, full_update(carried))


def section_digests(bundle: Bundle, request: AgentRunRequest) -> dict[str, str | None]:
    """Each section's ``sha256:`` digest in ``request``'s context (None: empty), in order:
    what the history compares and records (``context_updates: sections``)."""
    return digests_of(request_sections(bundle, request))


def digests_of(texts: Mapping[str, str]) -> dict[str, str | None]:
    """Each section's ``sha256:`` digest of ``texts`` (None: empty)."""
    return {name: canonical.sha256_hex(text) if text else None for name, text in texts.items()}


def full_update(carried: Mapping[str, str]) -> dict[str, Any]:
    """The ``update`` of a full context carrying ``carried`` (in section order)."""
    return {"full": True, "sections": list(carried), "cleared": []}


def check_templates(bundle: Bundle) -> list[SpecError]:
    """Render the context template and every mode's runtime template once with a
    representative sample (:mod:`prefixlock.spec.sample`: every declared variable
    present), through the same variable building a turn uses; the problems, located at
    their template lines (a misspelled ``{{ mode.remindr }}`` fails here, not at the first
    turn that reaches it)."""
    found: list[SpecError] = []
    context = conversation_context(bundle, sample_context())
    renders: list[tuple[Any, dict[str, Any]]] = []
    if not bundle.sections:
        renders.append((bundle.context_template.render, {**context, "update": None}))
    renders += [
        (mode.runtime.render, sample_turn(mode.name, mode.reminder)) for mode in bundle.modes
    ]
    for render, variables in renders:
        try:
            render(variables)
        except SpecErrors as err:
            found.extend(err.errors)
    if bundle.sections:
        template, names = bundle.context_template, list(bundle.sections)
        try:
            texts = {name: template.render_section(name, context) for name in names}
            # The full context, and an update that replaces every section and clears one.
            full = {"full": True, "sections": names, "cleared": []}
            template.render_frame({"update": full}, texts)
            update = {"full": False, "sections": names, "cleared": names[-1:]}
            template.render_frame({"update": update}, {**texts, names[-1]: ""})
        except SpecErrors as err:
            found.extend(err.errors)
    return found
