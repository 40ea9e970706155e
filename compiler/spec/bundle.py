"""The bundle: a spec root compiled into the stable parts every conversation starts from.

These are the values; :mod:`~prefixlock.spec.build` builds them from a spec root and
:mod:`~prefixlock.spec.outputs` writes and checks them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import attrs

from ..core import canonical
from ..core.errors import UnknownNameError
from ..core.model import ProviderSettings, ToolSpec
from ..core.names import hint
from .templates import CompiledTemplate

__all__ = ["Bundle", "BundlePart", "Mode"]


@attrs.frozen(eq=False)
class Mode:
    """A mode: its reminder (rendered as ``mode.reminder``) and its runtime template."""

    name: str
    reminder: str
    runtime: CompiledTemplate


@attrs.frozen(eq=False)
class BundlePart:
    """One output file: its name under the output folder and its exact bytes."""

    name: str
    data: bytes
    media_type: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def size(self) -> int:
        return len(self.data)


@attrs.frozen(eq=False)
class Bundle:
    """A compiled spec root. Tools and settings do not depend on the mode."""

    agent: str
    #: ``sha256:<hex>`` of the canonical JSON of the manifest's ``parts`` list.
    digest: str
    instructions: str
    #: sorted by name; ``parameters`` is canonical JSON text.
    tools: tuple[ToolSpec, ...]
    #: sorted by provider name.
    settings: tuple[ProviderSettings, ...]
    context_template: CompiledTemplate
    #: sorted by name.
    modes: tuple[Mode, ...]
    default_mode: str
    #: ``{"rules": [...], "skills": [...], "subagents": [...], "mcp": {"servers": [...]}}``
    defaults: Mapping[str, Any]
    #: the hashed parts, sorted by name (the manifest is not one of them).
    parts: tuple[BundlePart, ...]
    manifest: Mapping[str, Any]
    #: ``secrets.user_content: redact`` in ``agent.yaml``: user content (query,
    #: selections, event texts, tool outputs) is redacted by value before it is saved.
    #: Off by default; on, it is the ``policy.json`` part, so it is in the digest.
    redact_user_content: bool = False
    #: ``context_updates`` in ``agent.yaml``: ``whole`` (a changed context is sent again
    #: whole) or ``sections`` (only the changed sections of ``context_template``, whose
    #: :attr:`~CompiledTemplate.sections` name them in order). On ``sections``, it is the
    #: ``context-updates.json`` part, so it is in the digest.
    context_updates: str = "whole"

    @property
    def sections(self) -> tuple[str, ...]:
        """The request context's section names in order (none under ``whole``)."""
        return self.context_template.sections if self.context_updates == "sections" else ()

    def mode(self, name: str) -> Mode:
        for mode in self.modes:
            if mode.name == name:
                return mode
        known = [m.name for m in self.modes]
        raise UnknownNameError(f"unknown mode {name!r} ({hint(name, known, 'modes')})")

    def tool_prefix_json(self) -> str:
        """The tool prefix: canonical JSON of the tools in order (the ``tools.json`` part)."""
        return canonical.dumps([tool.to_json() for tool in self.tools])

    def manifest_bytes(self) -> bytes:
        """``manifest.json`` and the lock file: the manifest, pretty canonical JSON."""
        return canonical.dumps_pretty(self.manifest).encode("utf-8")

    def part(self, name: str) -> BundlePart:
        for part in self.parts:
            if part.name == name:
                return part
        raise KeyError(name)
