"""Building a bundle from a spec root.

:func:`build_bundle` reads a spec root (``docs/specs.md``), validates every file against
its schema, checks what the schemas cannot (paths stay inside the root and exist, templates) and
collects the problems of *all* files before raising one :class:`SpecErrors`. Nothing is
written; :func:`write_outputs` writes a built bundle atomically and :func:`check_outputs`
compares it with what is on disk (both in :mod:`prefixlock.spec.outputs`, re-exported here).

Parts (files under ``--out``, default ``<root>/build``), each pinned in the manifest by
sha256 and size:

=========================  ==========================================================
``instructions.md``        the system instructions, verbatim
``tools.json``             the tool prefix: canonical JSON, tools sorted by name
``settings.json``          provider settings, sorted by provider
``context-defaults.json``  built-in rules, skills, subagents and MCP servers
``modes.json``             default mode; each mode's name, reminder, runtime template
``templates/<path>``       the source of the context and every runtime template
``context-updates.json``   ``context_updates: sections`` and the section names in order
                           (only then: a spec of ``whole`` keeps its digest)
=========================  ==========================================================

``manifest.json`` lists the parts sorted by name; the bundle digest is the digest of
that list's canonical JSON, so it depends on the parts' bytes and names only (never on
the absolute root, the order of files on disk, the hash seed, time zone or locale). The
same manifest, pretty-printed, is the lock file ``<root>/prefixlock.lock``.
"""

from __future__ import annotations

import difflib
import os
import posixpath
import types
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core import canonical
from ..core.errors import BuildError, Location, SpecError, SpecErrors
from ..core.jsonpath import json_path
from ..core.limits import MAX_INSTRUCTIONS_BYTES, settings_problems
from ..core.model import ProviderSettings, ToolSpec
from ..core.models import model_warning
from ..core.names import hint
from ..core.resources import example_dir
from .bundle import Bundle, BundlePart, Mode
from .loader import DocumentErrors, LoadedDocument, load_yaml_file, read_text_file
from .outputs import (
    LOCK_FILE,
    MANIFEST,
    check_outputs,
    diff_outputs,
    locked_digest,
    write_lock,
    write_outputs,
)
from .templates import CompiledTemplate, compile_template
from .validate import context_field_problems, validate_document
from .variables import CONVERSATION_VARIABLES, TURN_VARIABLES

__all__ = [
    "LOCK_FILE",
    "MANIFEST",
    "build_bundle",
    "build_warnings",
    "check_outputs",
    "compile_spec_template",
    "diff_outputs",
    "find_example_root",
    "locked_digest",
    "write_lock",
    "write_outputs",
]

MANIFEST_FORMAT = 1

#: (file, schema) of the files every spec root must have.
_REQUIRED = (
    ("rules/agent.yaml", "agent"),
    ("rules/tools.yaml", "tools"),
    ("rules/providers.yaml", "providers"),
)
#: (file, schema, key) of the conversation-level defaults; a missing file is empty.
_DEFAULTS = (
    ("rules/rules.yaml", "rules", "rules"),
    ("rules/skills.yaml", "skills", "skills"),
    ("rules/subagents.yaml", "subagents", "subagents"),
    ("rules/mcp.yaml", "mcp", "servers"),
)


# --- building -----------------------------------------------------------------------------


class _Builder:
    """Collects the errors of every file while the bundle's pieces are checked."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.resolved_root = root.resolve()
        self.errors: list[SpecError] = []
        #: file -> JSON paths where its schema found a problem
        self.invalid: dict[str, frozenset[str]] = {}

    def add(self, errors: Iterable[SpecError]) -> None:
        self.errors.extend(errors)

    def fail(self, doc: LoadedDocument, parts: Sequence[str | int], message: str) -> None:
        path = json_path(parts)
        self.errors.append(SpecError(doc.location(path), path, message))

    def load(self, file: str, schema: str, *, required: bool) -> LoadedDocument | None:
        """Load and validate one YAML file; None if it is missing or does not parse.

        Schema violations are recorded (see :meth:`reported`) but the document is still
        returned, so that its paths and templates are checked too.
        """
        path = self.root / file
        problem = _entry_problem(path, self.resolved_root)
        if problem is not None:
            # Only a file with no directory entry at all is absent; a folder or a broken
            # link where a spec file belongs is a mistake, required or not.
            if problem != _ABSENT or required:
                message = "required file is missing" if problem == _ABSENT else problem
                self.errors.append(SpecError(Location(file), "", message))
            return None
        covered: DocumentErrors | None = None
        try:
            doc = load_yaml_file(path, file, root=self.resolved_root)
        except DocumentErrors as err:
            # The file parsed: what was read of it is validated too, so that one build
            # names all its problems (the build fails all the same).
            self.add(err.errors)
            doc, covered = err.document, err
        except SpecErrors as err:
            self.add(err.errors)
            return None
        problems = [
            p
            for p in validate_document(doc, schema)
            if covered is None or not covered.covers(p.path)
        ]
        self.add(problems)
        self.invalid[file] = frozenset(p.path for p in problems)
        return doc

    def reported(self, doc: LoadedDocument, parts: Sequence[str | int]) -> bool:
        """Whether the schema already reported a problem with the value at ``parts``."""
        return json_path(parts) in self.invalid.get(doc.file, frozenset())

    def path(self, doc: LoadedDocument, parts: Sequence[str | int]) -> str | None:
        """The root-relative path at ``parts`` of ``doc``, checked to be a file inside.

        None if it is not (reported) or if it is absent or not a string (which the
        schema reports).
        """
        value = _get(doc.value, parts)
        if not isinstance(value, str) or not value or self.reported(doc, parts):
            return None
        normal = posixpath.normpath(value)
        if posixpath.isabs(value) or normal == ".." or normal.startswith("../"):
            self.fail(doc, parts, f"path {value!r} leaves the spec root")
            return None
        full = self.root / normal
        if not full.resolve().is_relative_to(self.resolved_root):
            self.fail(doc, parts, f"path {value!r} leads outside the spec root (symbolic link)")
            return None
        if not full.is_file():
            problem = (
                f"path {value!r} is not a file"
                if full.exists()
                else f"file {value!r} does not exist"
            )
            self.fail(doc, parts, problem)
            return None
        return normal

    def text(self, name: str) -> str | None:
        try:
            return read_text_file(self.root / name, name, root=self.resolved_root)
        except SpecErrors as err:
            self.add(err.errors)
            return None

    def template(
        self,
        name: str,
        *,
        runtime: bool,
        sections: bool = False,
        declared: frozenset[str] = frozenset(),
    ) -> CompiledTemplate | None:
        """``declared``: the spec's declared context fields, conversation-level names."""
        source = self.text(name)
        if source is None:
            return None
        try:
            return compile_spec_template(
                name, source, runtime=runtime, declared=declared, sections=sections
            )
        except SpecErrors as err:
            self.add(err.errors)
            return None


def compile_spec_template(
    name: str, source: str, *, runtime: bool, declared: frozenset[str], sections: bool
) -> CompiledTemplate:
    """Compile a runtime template (turn-level variables only) or the request-context
    template (conversation-level ones and ``declared`` context fields; with
    ``sections``, its section blocks checked too), as the build does and as a built
    bundle is loaded again (:mod:`prefixlock.spec.load`): one set of arguments, so the
    two can never compile a template differently."""
    if runtime:
        return compile_template(
            name,
            source,
            TURN_VARIABLES,
            CONVERSATION_VARIABLES | declared,
            "conversation-level",
            template_kind="runtime",
        )
    return compile_template(
        name,
        source,
        # ``update``: None for the whole context, else what an update replaces.
        CONVERSATION_VARIABLES | declared | {"update"},
        TURN_VARIABLES,
        "turn-level",
        template_kind="request-context",
        sections=CONVERSATION_VARIABLES | declared if sections else None,
    )


_ABSENT = "absent"


def _entry_problem(path: Path, resolved_root: Path) -> str | None:
    """Why the spec file at ``path`` cannot be read (:data:`_ABSENT` when there is no
    directory entry at all), None if it is a regular file inside the root."""
    if not path.is_symlink() and not path.exists():
        return _ABSENT
    try:
        resolved = path.resolve(strict=True)
    except (OSError, RuntimeError):  # a dangling link or a loop of links
        return f"broken symbolic link (to {os.readlink(path)})"
    if not resolved.is_relative_to(resolved_root):
        # As for the paths a spec names (see :meth:`_Builder.path`): a build reads nothing
        # from outside its root, so the root alone determines the bundle.
        return "file leads outside the spec root (symbolic link)"
    if resolved.is_dir():
        return "is a folder, not a file"
    if not resolved.is_file():
        return "is not a regular file"
    return None


def _get(value: Any, parts: Sequence[str | int]) -> Any:
    """The value at ``parts``, or None where the document has no such member."""
    for part in parts:
        if isinstance(value, Mapping) and isinstance(part, str):
            value = value.get(part)
        elif isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value):
            value = value[part]
        else:
            return None
    return value


def build_bundle(root: Path | str) -> Bundle:
    """Validate and compile the spec root ``root``.

    Raises :class:`SpecErrors` listing every problem of every file (nothing stops at the
    first file), or :class:`BuildError` if ``root`` is not a folder.
    """
    root = Path(root)
    if not root.is_dir():
        raise BuildError(f"spec root {str(root)!r} is not a folder")
    b = _Builder(root)
    agent_doc, tools_doc, providers_doc = (
        b.load(file, schema, required=True) for file, schema in _REQUIRED
    )
    defaults_docs = [(b.load(file, schema, required=False), key) for file, schema, key in _DEFAULTS]
    instructions, context_template, runtimes = _agent_files(b, agent_doc)
    # A stray prompt file is reported once agent.yaml's own paths are right; before,
    # the file it meant to name would show as stray too.
    used = _used_prompt_files(agent_doc) if agent_doc is not None and not b.errors else None
    b.add(_stray_files(root, used))
    if b.errors:
        raise SpecErrors(b.errors)
    assert agent_doc is not None and tools_doc is not None and providers_doc is not None
    b.add(_subagent_tools(defaults_docs, [tool["name"] for tool in tools_doc.value["tools"]]))
    if b.errors:
        raise SpecErrors(b.errors)

    assert instructions is not None and context_template is not None
    agent = agent_doc.value
    modes = []
    for mode_name, spec in sorted(agent["modes"].items()):
        runtime = runtimes[posixpath.normpath(spec["runtime"])]
        assert runtime is not None
        modes.append(Mode(name=mode_name, reminder=spec["reminder"], runtime=runtime))
    tools = [
        ToolSpec(
            name=tool["name"],
            description=tool["description"],
            parameters=canonical.dumps(tool["parameters"]),
        )
        for tool in tools_doc.value["tools"]
    ]
    settings = [
        ProviderSettings(
            provider=provider,
            model=item["model"],
            max_tokens=item["max_tokens"],
            options=canonical.dumps(item.get("options", {})),
        )
        for provider, item in providers_doc.value["providers"].items()
    ]
    b.add(_settings_problems(providers_doc, settings))
    context_fields = _declared_fields(agent_doc)
    b.add(_context_field_problems(agent_doc, context_fields, context_template))
    if b.errors:
        raise SpecErrors(b.errors)
    defaults: dict[str, Any] = {"rules": [], "skills": [], "subagents": [], "mcp": {"servers": []}}
    for doc, key in defaults_docs:
        if doc is not None:
            if key == "servers":
                defaults["mcp"] = {"servers": doc.value["servers"]}
            else:
                defaults[key] = doc.value[key]
    return _assemble(
        agent=agent["name"],
        instructions=instructions,
        tools=tuple(sorted(tools, key=lambda t: t.name)),
        settings=tuple(sorted(settings, key=lambda s: s.provider)),
        context_template=context_template,
        modes=tuple(modes),
        default_mode=agent["default_mode"],
        defaults=defaults,
        user_content=agent.get("secrets", {}).get("user_content", "keep"),
        context_fields=context_fields,
        context_updates=agent.get("context_updates", "whole"),
    )


def _declared_fields(doc: LoadedDocument | None) -> dict[str, Any]:
    """``context_fields`` of ``agent.yaml`` (schema-checked), sorted by name."""
    value = doc.value if doc is not None and isinstance(doc.value, Mapping) else {}
    fields = value.get("context_fields")
    if not isinstance(fields, Mapping):
        return {}
    return {name: fields[name] for name in sorted(fields) if isinstance(name, str)}


#: Names a declared context field may not take: the built-in variables of the templates.
_RESERVED_FIELDS = CONVERSATION_VARIABLES | TURN_VARIABLES | {"update"}


def _context_field_problems(
    doc: LoadedDocument, fields: Mapping[str, Any], template: CompiledTemplate
) -> list[SpecError]:
    """A declared field must not shadow a built-in one, must have a usable schema, and
    the request-context template must render it (else it would be sent for nothing)."""
    found: list[SpecError] = []
    for name, field in fields.items():
        path = json_path(("context_fields", name))
        if name in _RESERVED_FIELDS:
            message = (
                f"{name!r} is a built-in template variable; a declared field needs its own name"
            )
            found.append(SpecError(doc.key_location(path), path, message))
            continue
        for why in context_field_problems(field["schema"]):
            where = json_path(("context_fields", name, "schema"))
            found.append(SpecError(doc.location(where), where, why))
        if name not in template.variables:
            message = f"declared context field {name!r} is not rendered by {template.name}"
            found.append(SpecError(doc.key_location(path), path, message))
        section = field["section"]
        if template.sections and section not in template.sections:
            # context_updates: sections: the field is compared and sent with its block.
            where = json_path(("context_fields", name, "section"))
            message = (
                f"section {section!r} is not a section block of {template.name} "
                f"({hint(section, template.sections, 'sections')})"
            )
            found.append(SpecError(doc.location(where), where, message))
    return found


def build_warnings(root: Path | str) -> list[str]:
    """Warnings about a spec root that builds: a retired or unknown ``model`` in
    ``rules/providers.yaml`` (:func:`prefixlock.core.models.model_warning`), each as
    ``file:line:col: warning: $.path: why``, in provider order. Empty when the file does
    not load (the build reports that)."""
    path = Path(root) / "rules" / "providers.yaml"
    try:
        doc = load_yaml_file(path, root=Path(root).resolve())
    except (SpecErrors, OSError):
        return []
    providers_value = doc.value.get("providers") if isinstance(doc.value, dict) else None
    if not isinstance(providers_value, dict):
        return []
    out = []
    for provider in sorted(providers_value):
        entry = providers_value[provider]
        model = entry.get("model") if isinstance(entry, dict) else None
        why = model_warning(provider, model) if isinstance(model, str) else None
        if why is not None:
            where = json_path(("providers", provider, "model"))
            out.append(f"{doc.location(where)}: warning: {where}: {why}")
    return out


def _settings_problems(
    doc: LoadedDocument, settings: Sequence[ProviderSettings]
) -> list[SpecError]:
    """What each provider's service refuses in its settings beyond their schema
    (:func:`prefixlock.core.limits.settings_problems`: a one-hour cache TTL on a model
    without it)."""
    found: list[SpecError] = []
    for item in settings:
        for field, why in settings_problems(item.provider, item.model, item.options_value):
            path = json_path(("providers", item.provider, *field))
            found.append(SpecError(doc.location(path), path, why))
    return found


def _subagent_tools(
    docs: Sequence[tuple[LoadedDocument | None, str]], names: Sequence[str]
) -> list[SpecError]:
    """A subagent's ``tools`` must name tools of ``rules/tools.yaml``."""
    found: list[SpecError] = []
    for doc, key in docs:
        if doc is None or key != "subagents":
            continue
        for i, subagent in enumerate(doc.value["subagents"]):
            for j, name in enumerate(subagent.get("tools", ())):
                if name not in names:
                    path = json_path(("subagents", i, "tools", j))
                    message = f"unknown tool {name!r} ({hint(name, names, 'tools')})"
                    found.append(SpecError(doc.location(path), path, message))
    return found


#: Files in a spec folder that are never spec files (documentation, editor metadata).
_IGNORED = ("README", "readme", ".")


def _used_prompt_files(doc: LoadedDocument) -> set[str]:
    """The ``prompt/`` files ``agent.yaml`` names, normalized."""
    value = doc.value if isinstance(doc.value, Mapping) else {}
    names = [value.get("instructions"), value.get("context_template")]
    modes = value.get("modes")
    for spec in modes.values() if isinstance(modes, Mapping) else ():
        names.append(spec.get("runtime") if isinstance(spec, Mapping) else None)
    return {posixpath.normpath(n) for n in names if isinstance(n, str)}


def _stray_files(root: Path, used: set[str] | None) -> list[SpecError]:
    """A file under ``rules/`` that is no spec file, or under ``prompt/`` that
    ``agent.yaml`` does not use, is a mistake (a misnamed ``subagents.yml``, a template of
    a mode nobody declared): an error with the closest expected name."""
    known = sorted(file for file, *_ in (*_REQUIRED, *_DEFAULTS))
    found: list[SpecError] = []
    checks = [("rules", known, "not a spec file")]
    if used is not None:
        checks.append(("prompt", sorted(used), "not used by rules/agent.yaml"))
    for folder, expected, why in checks:
        base = root / folder
        files = sorted(p for p in base.rglob("*") if p.is_file()) if base.is_dir() else []
        for path in files:
            name = path.relative_to(root).as_posix()
            if name in expected or path.name.startswith(_IGNORED):
                continue
            parts = name.split("/")
            if folder == "prompt" and len(parts) == 4 and parts[3] == "runtime.md.j2":
                hint = f"the runtime template of a mode {parts[2]!r} that it does not declare"
            else:
                close = difflib.get_close_matches(name, expected, n=1, cutoff=0.6)
                hint = (
                    f"did you mean {close[0]!r}?" if close else f"expected: {', '.join(expected)}"
                )
            found.append(SpecError(Location(name), "", f"{why} ({hint})"))
    return found


def _agent_files(
    b: _Builder, doc: LoadedDocument | None
) -> tuple[str | None, CompiledTemplate | None, dict[str, CompiledTemplate | None]]:
    """Read the instructions and compile the templates ``agent.yaml`` names.

    Done even when ``agent.yaml`` has schema errors elsewhere, so that one build reports
    the problems of every file; runtime templates are keyed by normalized path.
    """
    instructions: str | None = None
    context_template: CompiledTemplate | None = None
    runtimes: dict[str, CompiledTemplate | None] = {}
    if doc is None:
        return instructions, context_template, runtimes
    name = b.path(doc, ("instructions",))
    if name is not None:
        instructions = b.text(name)
        size = 0 if instructions is None else len(instructions.encode("utf-8", "replace"))
        if size > MAX_INSTRUCTIONS_BYTES:  # every request repeats them (docs/limits.md)
            b.add(
                [
                    SpecError(
                        Location(name),
                        "",
                        f"the instructions are {size} bytes, over the limit of "
                        f"{MAX_INSTRUCTIONS_BYTES} bytes",
                    )
                ]
            )
    declared = frozenset(_declared_fields(doc))
    name = b.path(doc, ("context_template",))
    if name is not None:
        sections = _get(doc.value, ("context_updates",)) == "sections"
        context_template = b.template(name, runtime=False, sections=sections, declared=declared)
    modes = _get(doc.value, ("modes",))
    for mode_name in sorted(modes) if isinstance(modes, Mapping) else ():
        name = b.path(doc, ("modes", mode_name, "runtime"))
        if name is not None and name not in runtimes:
            runtimes[name] = b.template(name, runtime=True, declared=declared)
    return instructions, context_template, runtimes


def _assemble(
    *,
    agent: str,
    instructions: str,
    tools: tuple[ToolSpec, ...],
    settings: tuple[ProviderSettings, ...],
    context_template: CompiledTemplate,
    modes: tuple[Mode, ...],
    default_mode: str,
    defaults: dict[str, Any],
    user_content: str = "keep",
    context_updates: str = "whole",
    context_fields: Mapping[str, Any] | None = None,
) -> Bundle:
    """Lay out the parts of checked pieces and compute the manifest and digest."""
    json_type = "application/json"
    parts: dict[str, BundlePart] = {}

    def add(name: str, data: bytes, media_type: str) -> None:
        parts[name] = BundlePart(name=name, data=data, media_type=media_type)

    add("instructions.md", instructions.encode("utf-8"), "text/markdown")
    add("tools.json", canonical.dumpb([t.to_json() for t in tools]), json_type)
    add("settings.json", canonical.dumpb([s.to_json() for s in settings]), json_type)
    add("context-defaults.json", canonical.dumpb(defaults), json_type)
    modes_value = {
        "default_mode": default_mode,
        "modes": [
            {"name": m.name, "reminder": m.reminder, "template": _template_part(m.runtime)}
            for m in modes
        ],
    }
    add("modes.json", canonical.dumpb(modes_value), json_type)
    for template in (context_template, *(m.runtime for m in modes)):
        add(_template_part(template), template.source.encode("utf-8"), "text/x-jinja2")
    if context_fields:
        # Only a spec that declares fields has the part: every other digest stays the same.
        add("context-fields.json", canonical.dumpb(dict(context_fields)), json_type)
    if user_content != "keep":
        # Only a policy other than the default is a part: the digest (and so every
        # existing lock and body) of a spec that does not set it stays the same.
        add("policy.json", canonical.dumpb({"secrets": {"user_content": user_content}}), json_type)
    if context_updates != "whole":
        # As policy.json: only the non-default is a part, so a spec that does not set
        # it keeps its digest, its lock and every body.
        sections = {"context_updates": context_updates, "sections": list(context_template.sections)}
        add("context-updates.json", canonical.dumpb(sections), json_type)

    ordered = tuple(parts[name] for name in sorted(parts))
    listed = [{"name": p.name, "sha256": p.sha256, "size": p.size} for p in ordered]
    digest = canonical.digest(listed)
    manifest = {
        "format": MANIFEST_FORMAT,
        "agent": agent,
        "digest": digest,
        "parts": listed,
        "tools": [t.name for t in tools],
    }
    return Bundle(
        agent=agent,
        digest=digest,
        instructions=instructions,
        tools=tools,
        settings=settings,
        context_template=context_template,
        modes=modes,
        default_mode=default_mode,
        defaults=types.MappingProxyType(defaults),
        parts=ordered,
        manifest=types.MappingProxyType(manifest),
        redact_user_content=user_content == "redact",
        context_updates=context_updates,
        context_fields=types.MappingProxyType(dict(context_fields or {})),
    )


def _template_part(template: CompiledTemplate) -> str:
    return f"templates/{template.name}"


def find_example_root() -> Path:
    """The bundled example spec root (``prefixlock init`` copies it).

    It ships as ``<package>/_example``. In a checkout, ``_example/rules`` and
    ``_example/prompt`` are symlinks to the repository's own folders, and the root is the
    repository itself (the build refuses paths that leave the root through a link).
    """
    root = (example_dir() / "rules").resolve().parent
    if (root / "rules" / "agent.yaml").is_file() and (root / "prompt").is_dir():
        return root
    raise BuildError("the bundled example spec root is not installed")
