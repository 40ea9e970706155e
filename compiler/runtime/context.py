"""Request compilation: conversation-level data -> request context, turn-level -> runtime.

* :func:`conversation_context` merges the bundle's built-in context with what the client
  sent (the client wins on an equal name), puts every set-like collection in canonical
  order (rules, skills, subagents, MCP servers and their tools by name; globs and
  workspace roots sorted; JSON-Schema keys sorted by the canonical encoder), strips the
  body of agent-requested rules and redacts secrets by name and by value in every string
  (:mod:`prefixlock.runtime.redact`). The same
  context sent in another order therefore compiles to the same bytes.
* :func:`render_request_context` renders it with the bundle's context template, once
  per bundle and context (:func:`rendered_context`).
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
    for name in bundle.context_fields:  # declared by the spec: as sent (keys sorted), or none
        out[name] = sent.get(name)
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
        self._items: OrderedDict[tuple[Bundle, str], str] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def __call__(self, bundle: Bundle, context: str) -> str:
        """The request-context text of ``context`` (a request's canonical JSON text)."""
        key = (bundle, context)
        with self._lock:
            text = self._items.get(key)
            if text is not None:
                self._items.move_to_end(key)
                return text
        variables = conversation_context(bundle, canonical.loads(context))
        text = bundle.context_template.render(variables)
        size = len(context) + len(text)
        if size <= self.largest:
            with self._lock:
                if key not in self._items:
                    self._items[key] = text
                    self._size += size
                    while len(self._items) > self.count or self._size > self.chars:
                        (_, kept), dropped = self._items.popitem(last=False)
                        self._size -= len(kept) + len(dropped)
        return text

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
    return rendered_context(bundle, request.context)


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


def check_templates(bundle: Bundle) -> list[SpecError]:
    """Render the context template and every mode's runtime template once with a
    representative sample (:mod:`prefixlock.spec.sample`: every declared variable
    present), through the same variable building a turn uses; the problems, located at
    their template lines (a misspelled ``{{ mode.remindr }}`` fails here, not at the first
    turn that reaches it)."""
    found: list[SpecError] = []
    renders: list[tuple[Any, dict[str, Any]]] = [
        (bundle.context_template, conversation_context(bundle, sample_context()))
    ]
    renders += [(mode.runtime, sample_turn(mode.name, mode.reminder)) for mode in bundle.modes]
    for template, variables in renders:
        try:
            template.render(variables)
        except SpecErrors as err:
            found.extend(err.errors)
    return found
