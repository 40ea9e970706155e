"""Transcript converters: real agent sessions as scenarios (``prefixlock convert``).

One module per source format (:mod:`.claude_code`, :mod:`.codex`), each writing the
public scenario format (``docs/scenarios.md``) and nothing else, through the shared
:class:`~.common.Builder`. :func:`convert` reads a transcript; :func:`write_converted`
writes ``s.yaml`` and ``s.usage.json`` beside it, both or neither.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ...core.atomic import staged_file
from ...core.errors import SpecError, SpecErrors, UnknownNameError
from ...core.names import hint
from ...spec.loader import load_yaml_file
from .claude_code import DEFAULT_TOOLS as CLAUDE_TOOLS
from .claude_code import convert_claude_code
from .codex import DEFAULT_TOOLS as CODEX_TOOLS
from .codex import convert_codex
from .common import USAGE_FORMAT, Converted, ToolMap

__all__ = [
    "FORMATS",
    "USAGE_FORMAT",
    "Converted",
    "convert",
    "sidechain_path",
    "usage_path",
    "write_converted",
]

#: Source format -> (converter, its default tool map).
FORMATS: dict[str, tuple[Callable[[Path, str | None, ToolMap], Converted], ToolMap]] = {
    "claude-code": (convert_claude_code, CLAUDE_TOOLS),
    "codex": (convert_codex, CODEX_TOOLS),
}


def convert(source: str, path: Path, *, tools: Path | None = None) -> Converted:
    """Convert the transcript ``path`` of format ``source`` (a key of :data:`FORMATS`).
    ``tools``: a mapping file (YAML or JSON) ``{tools: {SourceName: bundle_tool},
    fallback: bundle_tool}`` over the format's defaults."""
    if source not in FORMATS:
        raise UnknownNameError(
            f"unknown transcript format {source!r} ({hint(source, FORMATS, 'formats')})"
        )
    converter, defaults = FORMATS[source]
    mapping = defaults
    if tools is not None:
        doc = load_yaml_file(tools)
        value = doc.value
        errors = []
        if not isinstance(value, dict) or set(value) - {"tools", "fallback"}:
            errors.append(
                SpecError(doc.location("$"), "$", "a tool map has only the keys tools and fallback")
            )
        elif not isinstance(value.get("tools", {}), dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.get("tools", {}).items()
        ):
            errors.append(
                SpecError(
                    doc.location("$.tools"),
                    "$.tools",
                    "expected a mapping of tool name to bundle tool name",
                )
            )
        elif not isinstance(value.get("fallback", ""), str):
            errors.append(
                SpecError(doc.location("$.fallback"), "$.fallback", "expected a bundle tool name")
            )
        if errors:
            raise SpecErrors(errors)
        assert isinstance(value, dict)
        mapping = defaults.overridden(value)
    return converter(path, str(path), mapping)


def usage_path(scenario: Path) -> Path:
    """``s.yaml`` -> ``s.usage.json``: where the observed usage goes beside a scenario."""
    return scenario.with_name(scenario.stem + ".usage.json")


def sidechain_path(scenario: Path, agent: str) -> Path:
    """``s.yaml`` -> ``s.agent-<id>.yaml``: where a sub-agent's scenario goes."""
    return scenario.with_name(f"{scenario.stem}.agent-{agent}{scenario.suffix}")


def write_converted(converted: Converted, out: Path) -> list[Path]:
    """Write the scenario to ``out``, the usage beside it, and each sub-agent's scenario
    and usage beside them (:func:`sidechain_path`); all are staged first, so a failure
    leaves none changed. Returns the paths written, in that order."""
    files = [(out, converted.scenario_bytes()), (usage_path(out), converted.usage_bytes())]
    for agent, side in converted.sidechains:
        path = sidechain_path(out, agent)
        files += [(path, side.scenario_bytes()), (usage_path(path), side.usage_bytes())]
    staged: list[Path] = []
    try:
        for path, data in files:
            staged.append(staged_file(path, data))
        for temp, (path, _) in zip(staged, files, strict=True):
            temp.replace(path)
    finally:
        for temp in staged:
            temp.unlink(missing_ok=True)
    return [path for path, _ in files]
