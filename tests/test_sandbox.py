"""The immutable, bounded template sandbox (issue 14).

Each payload used to hang a render, allocate gigabytes (at build time too, through
Jinja's constant folding) or mutate shared data; each is now a SpecErrors at the
template's line, raised by the build when the payload is constant.
"""

from __future__ import annotations

import shutil
import time
import tracemalloc
from pathlib import Path

import attrs
import jinja2.sandbox
import pytest
from conv_helpers import CONTEXT_A, REPO, context_ids, example_bundle, user
from prefixlock.core import canonical
from prefixlock.core.errors import SpecErrors
from prefixlock.runtime.conversation import Conversation
from prefixlock.spec.build import build_bundle
from prefixlock.spec.templates import compile_template
from prefixlock.spec.variables import CONVERSATION_VARIABLES, TURN_VARIABLES
from prefixlock.store.contract import MemoryStore

NAME = "t.j2"
LIMIT = "over the limit of 4194304"
STEPS = "template limit: more than 250000 loop iterations and calls in one render"
REPEAT = "template limit: repeating 1 items"
ARG = "got the argument 1000000000"
WIDTH = f"a width {LIMIT}"
SANDBOX = "refused by the sandbox: access to attribute"

#: source -> the error, raised by the build (constant payloads).
AT_BUILD = {
    "x\n{{ 'a' * 10**9 }}": f"{NAME}:2: {REPEAT} 1000000000 times is {LIMIT}",
    "{{ ([0] * 10**8) | length }}": f"{NAME}:1: {REPEAT} 100000000 times is {LIMIT}",
    "{{ 3 ** 1000000 }}": (
        f"{NAME}:1: template limit: 3 ** 1000000 has about 2000000 bits, over the limit of 4096"
    ),
    "{{ '%0999999999d' % 1 }}": f"{NAME}:1: template limit: operator '%': {WIDTH}",
    "{{ '%*d' % (999999999, 1) }}": f"{NAME}:1: template limit: operator '%': {WIDTH}",
}

NESTED_LOOPS = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
MACRO_BOMB = (
    "{% macro f(n) %}{% if n %}{{ f(n-1) }}{{ f(n-1) }}{% endif %}{% endmacro %}{{ f(40) }}"
)

#: source -> the error, raised when a turn renders it.
AT_RENDER = {
    NESTED_LOOPS: f"{NAME}:1: {STEPS}",
    MACRO_BOMB: f"{NAME}:1: {STEPS}",
    "{% set n = 10**9 %}{{ 'a' * n }}": f"{NAME}:1: {REPEAT} 1000000000 times is {LIMIT}",
    "{% set n = 10**8 %}{{ ([0] * n) | length }}": f"{NAME}:1: {REPEAT} 100000000 times is {LIMIT}",
    "{% set s = 'a' * 4000000 %}{{ s + s }}": (
        f"{NAME}:1: template limit: joining 4000000 and 4000000 items is {LIMIT}"
    ),
    "{{ query.ljust(10**9) }}": f"{NAME}:1: template limit: a call {ARG}, {LIMIT}",
    "{{ query | center(10**9) }}": f"{NAME}:1: template limit: filter 'center' {ARG}, {LIMIT}",
    "{{ query | indent(10**9) }}": f"{NAME}:1: template limit: filter 'indent' {ARG}, {LIMIT}",
    "{{ '{:>999999999}'.format(query) }}": f"{NAME}:1: template limit: format: {WIDTH}",
    "{{ '%0999999999d' | format(1) }}": f"{NAME}:1: template limit: filter 'format': {WIDTH}",
    "a\nb\n{% for i in range(100000) %}{{ query * 100 }}{% endfor %}": (
        f"{NAME}:3: template limit: output is {LIMIT} characters"
    ),
    "x\n{{ action_context.update({'a': 1}) }}": (
        f"{NAME}:2: {SANDBOX} 'update' of 'dict' object is unsafe."
    ),
    "{{ open_files.append(1) }}": f"{NAME}:1: {SANDBOX} 'append' of 'list' object is unsafe.",
}


def runtime(source: str) -> object:
    return compile_template(
        NAME, source, TURN_VARIABLES, CONVERSATION_VARIABLES, "conversation-level"
    )


@pytest.mark.parametrize("source", AT_BUILD)
def test_constant_payload_fails_the_build_at_its_line(source: str) -> None:
    started = time.monotonic()
    with pytest.raises(SpecErrors) as err:
        runtime(source)
    assert str(err.value) == AT_BUILD[source]
    assert time.monotonic() - started < 2


@pytest.mark.parametrize("source", AT_RENDER)
def test_render_payload_is_bounded_and_located(source: str) -> None:
    template = compile_template(
        NAME, source, TURN_VARIABLES, CONVERSATION_VARIABLES, "conversation-level"
    )
    variables = {"query": "q", "action_context": {}, "open_files": []}
    # CPU time of this process: the budget bounds the work, and a shared machine's load
    # must not fail the bound (wall time reached 12 s at a load of 8 on 2 cores).
    started = time.process_time()
    with pytest.raises(SpecErrors) as err:
        template.render(variables)
    assert str(err.value) == AT_RENDER[source]
    assert time.process_time() - started < 10
    assert variables == {"query": "q", "action_context": {}, "open_files": []}


def test_build_refuses_a_context_template_that_folds_unboundedly(tmp_path: Path) -> None:
    root = tmp_path / "spec"
    for folder in ("prompt", "rules"):
        shutil.copytree(REPO / folder, root / folder)
    template = root / "prompt/cursor/context.md.j2"
    template.write_text(
        template.read_text(encoding="utf-8") + "{{ 'a' * 10**9 }}\n", encoding="utf-8"
    )
    lines = template.read_text(encoding="utf-8").count("\n")
    with pytest.raises(SpecErrors) as err:
        build_bundle(root)
    assert str(err.value) == (
        f"prompt/cursor/context.md.j2:{lines}: template limit: repeating 1 items "
        f"1000000000 times is {LIMIT}"
    )


MUTATING = (
    "{%- set s = mcp.servers[0].tools[0].input_schema %}"
    "{{- s.update({'seen': s.get('seen', 0) + 1}) or '' }}{{ s | canonical }}"
)


def mutating_bundle() -> object:
    bundle = example_bundle()
    template = compile_template(
        "context.j2", MUTATING, CONVERSATION_VARIABLES, TURN_VARIABLES, "turn-level"
    )
    return attrs.evolve(bundle, context_template=template)


def test_template_mutation_is_refused_and_changes_nothing() -> None:
    bundle = mutating_bundle()
    defaults = canonical.dumps(bundle.defaults)  # type: ignore[attr-defined]
    store = MemoryStore()
    conv = Conversation.open(store, bundle, "conv-1")  # type: ignore[arg-type]
    for n in (1, 2, 3):
        with pytest.raises(SpecErrors) as err:
            conv.handle(user(f"u{n}", context=CONTEXT_A))
        assert str(err.value) == (
            "context.j2:1: refused by the sandbox: access to attribute 'update' of 'dict' "
            "object is unsafe."
        )
    assert canonical.dumps(bundle.defaults) == defaults  # type: ignore[attr-defined]
    stored = store.load("conv-1")
    assert stored is not None and stored.records == ()


def test_three_turns_append_one_request_context_even_past_a_sandbox_hole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Defence in depth: were the sandbox to let ``.update()`` through, every render
    still gets its own copy of the data, so the context does not drift between turns."""
    monkeypatch.setattr(
        jinja2.sandbox.ImmutableSandboxedEnvironment,
        "is_safe_attribute",
        jinja2.sandbox.SandboxedEnvironment.is_safe_attribute,
    )
    bundle = mutating_bundle()
    defaults = canonical.dumps(bundle.defaults)  # type: ignore[attr-defined]
    conv = Conversation.open(MemoryStore(), bundle, "conv-1")  # type: ignore[arg-type]
    for n in (1, 2, 3):
        request = conv.handle(user(f"u{n}", context=CONTEXT_A))
        if n < 3:
            conv.assistant(f"answer {n}")
    assert context_ids(request) == ["request-context:u1"]
    assert canonical.dumps(bundle.defaults) == defaults  # type: ignore[attr-defined]


BUILDS = "builds more than the limit of 4194304 characters"
DOUBLING = "{% set ns = namespace(s=query) %}\n{% for i in range(40) %}\n"

#: source -> the error: every string a template builds is metered before it is built
#: (issue 43): doubling a string forty times used to reach 23 GB before any check.
METERED = {
    DOUBLING + "{% set ns.s = ns.s ~ ns.s %}\n{% endfor %}": (
        f"{NAME}:3: template limit: operator '~' {BUILDS}"
    ),
    DOUBLING + "{% set ns.s %}{{ ns.s }}{{ ns.s }}{% endset %}\n{% endfor %}": (
        f"{NAME}:3: template limit: a captured block {BUILDS}"
    ),
    DOUBLING + "{% set ns.s = [ns.s, ns.s] | join %}\n{% endfor %}": (
        f"{NAME}:3: template limit: filter 'join' {BUILDS}"
    ),
    DOUBLING + "{% set ns.s = ns.s | replace('q', 'qq') %}\n{% endfor %}": (
        f"{NAME}:3: template limit: filter 'replace' {BUILDS}"
    ),
    DOUBLING + "{% set ns.s = '%s%s' % (ns.s, ns.s) %}\n{% endfor %}": (
        f"{NAME}:3: template limit: operator '%' {BUILDS}"
    ),
    DOUBLING + "{% set ns.s = '{0}{0}'.format(ns.s) %}\n{% endfor %}": (
        f"{NAME}:3: template limit: method 'format' {BUILDS}"
    ),
    DOUBLING + "{% set ns.s = '%s%s' | format(ns.s, ns.s) %}\n{% endfor %}": (
        f"{NAME}:3: template limit: filter 'format' {BUILDS}"
    ),
    DOUBLING + "{% set ns.s = [ns.s, ns.s] %}\n{% endfor %}{{ ns.s }}": (
        f"{NAME}:4: template limit: an output value {BUILDS}"
    ),
    "{% set s = 'a' * 4000000 %}\n{{ ([s] * 4000000) | join }}": (
        f"{NAME}:2: template limit: filter 'join' {BUILDS}"
    ),
    "{% set s = 'a' * 4000000 %}\n{{ ''.join([s] * 4000000) }}": (
        f"{NAME}:2: template limit: method 'join' {BUILDS}"
    ),
    "{% set s = 'a' * 4000000 %}\n{% set t = [s] * 4000000 %}{{ t | string | length }}": (
        f"{NAME}:2: template limit: filter 'string' {BUILDS}"
    ),
    "{% set s = ('\t' * 4000) %}\n{{ s.expandtabs(4000) }}": (
        f"{NAME}:2: template limit: method 'expandtabs' {BUILDS}"
    ),
    "{{ ([[[[[1]]]]] * 100) | tojson(indent=100000) }}": (
        f"{NAME}:1: template limit: filter 'tojson' {BUILDS}"
    ),
    "{% set f = '{0:>{1}}' * 100 %}\n{{ f.format('a', 4000000) }}": (
        f"{NAME}:2: template limit: method 'format' {BUILDS}"
    ),
    "{% set f = '%*s' * 100 %}\n{{ f % ((4000000, 'a') * 100) }}": (
        f"{NAME}:2: template limit: operator '%' {BUILDS}"
    ),
    "{% set s = 'a' * 3000000 %}\n{{ [s, s] }}": (
        f"{NAME}:2: template limit: an output value {BUILDS}"
    ),
}


@pytest.mark.parametrize("source", METERED)
def test_every_string_a_template_builds_is_metered_before_it_is_built(source: str) -> None:
    template = runtime(source)
    tracemalloc.start()
    try:
        with pytest.raises(SpecErrors) as err:
            template.render({"query": "q"})  # type: ignore[attr-defined]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(err.value) == METERED[source]
    # The largest allocations are the 4 MiB strings and four-million-item lists the
    # payloads build within the bounds; the refused string would need gigabytes.
    assert peak < 128 * 1024 * 1024


def test_metering_leaves_small_strings_alone() -> None:
    source = (
        "{% set ns = namespace(s='a') %}{% for i in range(5) %}{% set ns.s = ns.s ~ ns.s %}"
        "{% endfor %}{% set c %}[{{ ns.s }}]{% endset %}{{ c }}|{{ ['a', 'b'] | join(',') }}|"
        "{{ query | replace('q', 'x') }}|{{ '%s-%d' % ('a', 3) }}|{{ {'a': [1]} | tojson }}|"
        "{{ '{0}{0}'.format(query) }}|{{ 'a\tb'.expandtabs(2) }}|{{ [1, 2] | string }}"
    )
    assert runtime(source).render({"query": "q"}) == (  # type: ignore[attr-defined]
        '[aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa]|a,b|x|a-3|{"a": [1]}|qq|a b|[1, 2]'
    )
