"""Declared extra context: ``context_fields`` in agent.yaml (name, JSON Schema, the section
that renders it) -- validated in every request, canonically ordered, rendered like the
built-in fields; an undeclared field stays an error with "did you mean"."""

from __future__ import annotations

from pathlib import Path

import pytest
from prefixlock.core.errors import SpecErrors
from prefixlock.core.messages import MessageKind, TextPart
from prefixlock.runtime.conversation import Conversation
from prefixlock.runtime.request import AgentRunRequest
from prefixlock.spec.build import build_bundle, write_outputs
from prefixlock.spec.bundle import Bundle
from prefixlock.store.contract import MemoryStore

DECLARATION = """
context_fields:
  terminal:
    section: terminal
    description: The user's open terminal.
    schema:
      type: object
      additionalProperties: false
      required: [cwd]
      properties:
        cwd: {type: string}
        last_command: {type: string}
        exit_code: {type: integer}
"""

BLOCK = """
{%- block terminal %}
{%- if terminal %}

<terminal>
cwd: {{ terminal.cwd }}
{%- if "last_command" in terminal %}; last command: {{ terminal.last_command }}
{%- endif %}{% if "exit_code" in terminal %} (exit {{ terminal.exit_code }}){% endif %}
</terminal>
{%- endif %}
{%- endblock %}
</request_context>"""


def _declare(root: Path, declaration: str = DECLARATION, block: str = BLOCK) -> None:
    agent = root / "rules" / "agent.yaml"
    agent.write_text(agent.read_text(encoding="utf-8") + declaration, encoding="utf-8")
    template = root / "prompt" / "cursor" / "context.md.j2"
    text = template.read_text(encoding="utf-8")
    template.write_text(text.replace("\n</request_context>", block, 1), encoding="utf-8")


def _context_text(conv: Conversation) -> str:
    (message,) = [m for m in conv.history.messages if m.kind is MessageKind.REQUEST_CONTEXT]
    (part,) = message.parts
    assert isinstance(part, TextPart)
    return part.text


def test_a_declared_field_is_validated_ordered_and_rendered(project: Path) -> None:
    _declare(project)
    bundle = build_bundle(project)
    assert dict(bundle.context_fields)["terminal"]["section"] == "terminal"
    assert "context-fields.json" in [p.name for p in bundle.parts]
    texts = []
    for terminal in (
        {"cwd": "/app", "last_command": "pytest", "exit_code": 1},
        {"exit_code": 1, "last_command": "pytest", "cwd": "/app"},  # another order
    ):
        conv = Conversation.open(MemoryStore(), bundle, "c")
        conv.user_turn("u1", "why did it fail?", context={"terminal": terminal})
        texts.append(_context_text(conv))
    assert texts[0] == texts[1]
    assert texts[0].endswith(
        "\n\n<terminal>\ncwd: /app; last command: pytest (exit 1)\n</terminal>\n"
        "</request_context>\n"
    )


def test_a_declared_field_has_its_schema(project: Path) -> None:
    _declare(project)
    conv = Conversation.open(MemoryStore(), build_bundle(project), "c")
    with pytest.raises(SpecErrors) as caught:
        conv.user_turn("u1", "q", context={"terminal": {"cwd": 3, "shell": "zsh"}})
    assert str(caught.value).splitlines() == [
        "user_turn 'u1': $.context.terminal: unknown key 'shell' (expected one of: cwd, "
        "exit_code, last_command)",
        "user_turn 'u1': $.context.terminal.cwd: expected a string, got an integer",
    ]
    assert conv.history.seq == 0


def test_an_undeclared_field_is_refused_with_did_you_mean(project: Path) -> None:
    _declare(project)
    bundle = build_bundle(project)
    value = {"event_id": "u1", "kind": "user", "query": "q", "context": {"termnal": {}}}
    with pytest.raises(SpecErrors) as caught:
        AgentRunRequest.from_value(value, context_fields=bundle.context_schemas())
    (error,) = caught.value.errors
    assert error.path == "$.context"
    assert "unknown key 'termnal'" in error.message
    assert error.message.endswith("(did you mean 'terminal'?)")
    # Without the bundle's declarations a request knows only the built-in fields.
    with pytest.raises(SpecErrors):
        AgentRunRequest.from_value({**value, "context": {"terminal": {"cwd": "/"}}})


@pytest.mark.parametrize(
    ("declaration", "block", "offset", "expected"),
    [
        (
            "context_fields:\n  git:\n    section: git\n    schema: {type: object}\n",
            "\n</request_context>",
            2,  # the line of the field's key, after the file's own lines
            "rules/agent.yaml:{line}:3: $.context_fields.git: 'git' is a built-in template "
            "variable; a declared field needs its own name",
        ),
        (
            "context_fields:\n  terminal:\n    section: terminal\n    schema: {type: strng}\n",
            "{% block terminal %}{{ terminal }}{% endblock %}\n</request_context>",
            4,
            "rules/agent.yaml:{line}:13: $.context_fields.terminal.schema: 'strng' is not "
            "valid under any of the given schemas",
        ),
        (
            DECLARATION,
            "{% block terminal %}{% endblock %}\n</request_context>",
            3,
            "rules/agent.yaml:{line}:3: $.context_fields.terminal: declared context field "
            "'terminal' is not rendered by prompt/cursor/context.md.j2",
        ),
    ],
)
def test_a_declaration_the_build_refuses(
    project: Path, declaration: str, block: str, offset: int, expected: str
) -> None:
    lines = (project / "rules" / "agent.yaml").read_text(encoding="utf-8").count("\n")
    _declare(project, declaration, block)
    with pytest.raises(SpecErrors) as caught:
        build_bundle(project)
    assert [str(e) for e in caught.value.errors] == [expected.format(line=lines + offset)]


def test_a_declared_section_must_be_a_block_of_the_template(project: Path) -> None:
    lines = (project / "rules" / "agent.yaml").read_text(encoding="utf-8").count("\n")
    _declare(project, DECLARATION.replace("section: terminal", "section: termnal"))
    with pytest.raises(SpecErrors) as caught:
        build_bundle(project)
    (error,) = caught.value.errors
    assert str(error).startswith(
        f"rules/agent.yaml:{lines + 4}:14: $.context_fields.terminal.section: section "
        "'termnal' is not a section block of prompt/cursor/context.md.j2 ("
    )
    assert "did you mean 'terminal'?" in str(error)


def test_a_declared_field_changing_is_an_update_of_its_section_alone(project: Path) -> None:
    _declare(project)
    conv = Conversation.open(MemoryStore(), build_bundle(project), "c")
    conv.user_turn("u1", "q", context={"terminal": {"cwd": "/a"}})
    conv.assistant("ok")
    conv.user_turn("u2", "q", context={"terminal": {"cwd": "/b"}})
    contexts = [m for m in conv.history.messages if m.kind is MessageKind.REQUEST_CONTEXT]
    assert len(contexts) == 2
    (part,) = contexts[1].parts
    assert isinstance(part, TextPart)
    assert "It replaces these sections: terminal." in part.text
    assert "<terminal>\ncwd: /b\n</terminal>" in part.text
    assert "<rules>" not in part.text


def test_a_runtime_template_may_not_read_a_declared_field(project: Path) -> None:
    _declare(project)
    runtime = project / "prompt" / "cursor" / "ask" / "runtime.md.j2"
    runtime.write_text(runtime.read_text(encoding="utf-8") + "{{ terminal }}\n", encoding="utf-8")
    with pytest.raises(SpecErrors) as caught:
        build_bundle(project)
    assert [e.message for e in caught.value.errors] == [
        "runtime template uses conversation-level variable 'terminal' (runtime templates may "
        "use only: action_context, mode, open_files, query, selected_context, timestamp)"
    ]


def test_a_bundle_with_declared_fields_loads_from_build(project: Path) -> None:
    _declare(project)
    bundle = build_bundle(project)
    write_outputs(bundle, project, project / "build")
    loaded = Bundle.load(project / "build")
    assert loaded.digest == bundle.digest
    assert dict(loaded.context_fields) == dict(bundle.context_fields)


def test_a_scenario_sends_a_declared_field(project: Path) -> None:
    from prefixlock.review.replay import replay
    from prefixlock.review.scenario import load_scenario

    _declare(project)
    path = project / "terminal.yaml"
    path.write_text(
        "name: terminal context\n"
        "conversation: conv-terminal\n"
        "steps:\n"
        "  - user:\n"
        "      event: u1\n"
        "      query: why did it fail?\n"
        "      context: {terminal: {cwd: /app, last_command: make, exit_code: 2}}\n",
        encoding="utf-8",
    )
    (call,) = replay(load_scenario(path, bundle=build_bundle(project)))
    texts = [m.parts[0] for m in call.request.messages if m.kind is MessageKind.REQUEST_CONTEXT]
    assert isinstance(texts[0], TextPart)
    assert "<terminal>\ncwd: /app; last command: make (exit 2)\n</terminal>" in texts[0].text
