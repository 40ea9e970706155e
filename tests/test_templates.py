"""The deterministic, sandboxed template environment (prefixlock.spec.templates)."""

from __future__ import annotations

from typing import Any

import pytest
from prefixlock.core.errors import Location, SpecErrors
from prefixlock.spec.templates import CompiledTemplate, compile_template
from prefixlock.spec.variables import CONVERSATION_VARIABLES, TURN_VARIABLES

RUNTIME = "prompt/cursor/agent/runtime.md.j2"
CONTEXT = "prompt/cursor/context.md.j2"
RUNTIME_MAY_USE = "action_context, mode, open_files, query, selected_context, timestamp"
CONTEXT_MAY_USE = "environment, git, mcp, rules, skills, subagents"
PRIVATE = "(names starting with '_' are refused)"


def runtime(source: str) -> CompiledTemplate:
    return compile_template(
        RUNTIME,
        source,
        TURN_VARIABLES,
        CONVERSATION_VARIABLES,
        "conversation-level",
        template_kind="runtime",
    )


def context(source: str) -> CompiledTemplate:
    return compile_template(
        CONTEXT,
        source,
        CONVERSATION_VARIABLES,
        TURN_VARIABLES,
        "turn-level",
        template_kind="request-context",
    )


def at(name: str, line: int) -> str:
    """How an error location prints (the format belongs to prefixlock.core.errors.Location)."""
    return str(Location(name, line))


def errors_of(source: str, **variables: Any) -> list[str]:
    with pytest.raises(SpecErrors) as info:
        runtime(source).render(variables)
    return [str(e) for e in info.value.errors]


def compile_errors(template: Any, source: str) -> list[str]:
    with pytest.raises(SpecErrors) as info:
        template(source)
    return [str(e) for e in info.value.errors]


# --- build time ---------------------------------------------------------------------------


def test_syntax_error_names_template_and_line() -> None:
    assert compile_errors(runtime, "ok\n\n{{ query }\n") == [
        f"{at(RUNTIME, 3)}: template syntax error: unexpected '}}'"
    ]


def test_unclosed_block_is_a_syntax_error() -> None:
    assert compile_errors(runtime, "{% if query %}\nx\n") == [
        f"{at(RUNTIME, 1)}: template syntax error: Unexpected end of template."
        " Jinja was looking for the following tags: 'elif' or 'else' or 'endif'."
        " The innermost block that needs to be closed is 'if'."
    ]


def test_runtime_template_refuses_conversation_level_variable_at_its_line() -> None:
    source = "{{ query }}\n\n{% for rule in rules %}\n{{ rule.body }}\n{% endfor %}\n{{ mcp }}\n"
    assert compile_errors(runtime, source) == [
        f"{at(RUNTIME, 3)}: runtime template uses conversation-level variable 'rules'"
        f" (runtime templates may use only: {RUNTIME_MAY_USE})",
        f"{at(RUNTIME, 6)}: runtime template uses conversation-level variable 'mcp'"
        f" (runtime templates may use only: {RUNTIME_MAY_USE})",
    ]


def test_context_template_refuses_turn_level_variable_at_its_line() -> None:
    source = "{{ rules|canonical }}\n{{ timestamp }}\n"
    assert compile_errors(context, source) == [
        f"{at(CONTEXT, 2)}: request-context template uses turn-level variable 'timestamp'"
        f" (request-context templates may use only: {CONTEXT_MAY_USE})"
    ]


def test_unknown_variable_is_refused() -> None:
    assert compile_errors(runtime, "{{ query }}\n{{ user_name }}\n") == [
        f"{at(RUNTIME, 2)}: runtime template uses unknown variable 'user_name'"
        f" (runtime templates may use only: {RUNTIME_MAY_USE})"
    ]


def test_all_errors_of_a_template_are_reported_sorted() -> None:
    source = "{{ git }}\n{{ foo }}\n{{ x|nope }}\n{{ query.__class__ }}\n"
    assert compile_errors(runtime, source) == [
        f"{at(RUNTIME, 1)}: runtime template uses conversation-level variable 'git'"
        f" (runtime templates may use only: {RUNTIME_MAY_USE})",
        f"{at(RUNTIME, 2)}: runtime template uses unknown variable 'foo'"
        f" (runtime templates may use only: {RUNTIME_MAY_USE})",
        f"{at(RUNTIME, 3)}: runtime template uses unknown variable 'x'"
        f" (runtime templates may use only: {RUNTIME_MAY_USE})",
        f"{at(RUNTIME, 3)}: template uses unknown filter 'nope'",
        f"{at(RUNTIME, 4)}: template uses attribute '__class__'"
        " (names starting with '_' are refused)",
    ]


def test_locally_bound_names_are_not_variables() -> None:
    template = runtime(
        "{% set greeting = 'hi' %}{% for f in open_files %}{{ loop.index }}{{ f.path }}"
        "{% endfor %}{% macro m(x) %}{{ x }}{% endmacro %}{{ m(greeting) }}{{ range(2)|list }}"
    )
    assert template.variables == frozenset({"open_files"})
    assert template.render({"open_files": [{"path": "a.py"}]}) == "1a.pyhi[0, 1]"


def test_variables_are_proven_at_build_time() -> None:
    template = runtime("{{ mode.reminder }}{% if selected_context %}{{ query }}{% endif %}")
    assert template.variables == frozenset({"mode", "selected_context", "query"})


@pytest.mark.parametrize(
    ("source", "tag"),
    [
        ("{% include 'other.j2' %}", "include"),
        ("{% extends 'base.j2' %}", "extends"),
        ("{% import 'macros.j2' as m %}", "import"),
        ("{% from 'macros.j2' import m %}", "import"),
    ],
)
def test_templates_must_be_self_contained(source: str, tag: str) -> None:
    assert compile_errors(runtime, source) == [
        f"{at(RUNTIME, 1)}: template uses {{% {tag} %}}: templates must be self-contained"
    ]


def test_sandbox_escape_is_refused_at_build_time() -> None:
    assert compile_errors(runtime, "{{ ''.__class__.__mro__ }}") == [
        f"{at(RUNTIME, 1)}: template uses attribute '__class__' {PRIVATE}",
        f"{at(RUNTIME, 1)}: template uses attribute '__mro__' {PRIVATE}",
    ]
    assert compile_errors(runtime, "{{ query['__class__'] }}") == [
        f"{at(RUNTIME, 1)}: template uses item '__class__' (names starting with '_' are refused)"
    ]


def test_sandbox_escape_is_refused_at_render_time() -> None:
    # The name is only known at render time, so the build cannot see it: the sandbox does.
    assert errors_of("\n{{ query|attr(timestamp) }}", query="x", timestamp="__class__") == [
        f"{at(RUNTIME, 2)}: refused by the sandbox:"
        " access to attribute '__class__' of 'str' object is unsafe."
    ]


def test_lipsum_and_random_are_absent() -> None:
    assert compile_errors(runtime, "{{ lipsum() }}") == [
        f"{at(RUNTIME, 1)}: runtime template uses unknown variable 'lipsum'"
        f" (runtime templates may use only: {RUNTIME_MAY_USE})"
    ]
    assert compile_errors(runtime, "{{ open_files|random }}") == [
        f"{at(RUNTIME, 1)}: template uses unknown filter 'random'"
    ]


def test_range_is_bounded() -> None:
    [message] = errors_of("{{ range(10**9)|list|length }}")
    assert message.startswith(f"{at(RUNTIME, 1)}: template error: OverflowError: Range too big.")


# --- render time --------------------------------------------------------------------------


def test_undefined_variable_at_render_names_template_and_line() -> None:
    assert errors_of("hello\n{{ query }}\n") == [
        f"{at(RUNTIME, 2)}: undefined value: 'query' is undefined"
    ]


def test_undefined_attribute_at_render_names_template_and_line() -> None:
    assert errors_of("a\nb\n{{ mode.name }} {{ mode.nope }}\n", mode={"name": "ask"}) == [
        f"{at(RUNTIME, 3)}: undefined value: 'dict object' has no attribute 'nope'"
    ]


def test_strict_undefined_refuses_truthiness_of_missing_value() -> None:
    assert errors_of("{% if query %}x{% endif %}") == [
        f"{at(RUNTIME, 1)}: undefined value: 'query' is undefined"
    ]


def test_other_render_failure_names_template_and_line() -> None:
    assert errors_of("\n\n\n{{ query / 0 }}", query=1) == [
        f"{at(RUNTIME, 4)}: template error: ZeroDivisionError: division by zero"
    ]


def test_output_uses_newlines_and_keeps_trailing_newline() -> None:
    template = runtime("{{ query }}\n\n{% if mode %}x{% endif %}\n")
    assert template.render({"query": "q", "mode": {}}) == "q\n\n\n"
    assert runtime("{{ query }}\n").render({"query": "line\nline"}) == "line\nline\n"


def test_no_autoescape() -> None:
    assert runtime("{{ query }}").render({"query": "<a href='x'>&</a>"}) == "<a href='x'>&</a>"


def test_render_is_repeatable() -> None:
    template = runtime("{% for f in open_files %}{{ f.path }};{% endfor %}{{ query }}\n")
    variables = {"open_files": [{"path": "b"}, {"path": "a"}], "query": "q"}
    assert template.render(variables) == template.render(variables) == "b;a;q\n"


# --- filters ------------------------------------------------------------------------------


def test_canonical_filter_is_the_canonical_encoder() -> None:
    out = context("{{ rules|canonical }}").render({"rules": {"b": [1.5, "é"], "a": None}})
    assert out == '{"a":null,"b":[1.5,"é"]}'


def test_canonical_filter_error_names_the_line() -> None:
    template = context("x\n{{ git|canonical }}")
    with pytest.raises(SpecErrors) as info:
        template.render({"git": {1: 2}})
    assert str(info.value) == (
        f"{at(CONTEXT, 2)}: template error: CanonicalJSONError: $: object key 1 is not a string"
    )


def test_sortby_sorts_mappings_by_key_stably_in_code_point_order() -> None:
    template = context("{% for s in skills|sortby('name') %}{{ s.name }}{{ s.n }} {% endfor %}")
    skills = [
        {"name": "b", "n": 1},
        {"name": "B", "n": 2},
        {"name": "a", "n": 3},
        {"name": "b", "n": 4},
        {"name": "é", "n": 5},
    ]
    assert template.render({"skills": skills}) == "B2 a3 b1 b4 é5 "


def test_sortby_without_key_sorts_scalars() -> None:
    assert context("{{ skills|sortby|join(',') }}").render({"skills": ["b", "a", "C"]}) == "C,a,b"


def test_sortby_missing_key_names_the_line() -> None:
    template = context("\n{{ skills|sortby('name') }}")
    with pytest.raises(SpecErrors) as info:
        template.render({"skills": [{"name": "a"}, {"title": "b"}]})
    assert str(info.value) == f"{at(CONTEXT, 2)}: template error: sortby: item 1 has no key 'name'"
