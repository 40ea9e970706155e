"""The YAML loader: positions, JSON-only values, and every kind of bad input."""

from __future__ import annotations

import ast
import tracemalloc
from pathlib import Path

import pytest
from prefixlock.core.errors import Location, SpecError, SpecErrors
from prefixlock.core.jsonpath import json_path
from prefixlock.spec import loader
from prefixlock.spec.loader import (
    ALIAS_NODE_BUDGET,
    MAX_DEPTH,
    LoadedDocument,
    load_yaml_bytes,
    load_yaml_file,
    load_yaml_text,
    read_text_file,
)

ROOT = Path(__file__).resolve().parent.parent


def errors_of(text: str, file: str = "x.yaml") -> list[str]:
    with pytest.raises(SpecErrors) as info:
        load_yaml_text(text, file)
    return [str(e) for e in info.value.errors]


def loc(line: int, column: int, file: str = "x.yaml") -> Location:
    return Location(file, line, column)


# --------------------------------------------------------------------------- json paths


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        ((), "$"),
        (("rules", 2, "kind"), "$.rules[2].kind"),
        (("a b",), '$["a b"]'),
        (("openai-responses", "model"), '$["openai-responses"].model'),
        (("_x1", 0, 0), "$._x1[0][0]"),
        (("1a",), '$["1a"]'),
        (('q"uote',), '$["q\\"uote"]'),
        (("",), '$[""]'),
        (("ünï",), '$["ünï"]'),
    ],
)
def test_json_path(parts: tuple[str | int, ...], expected: str) -> None:
    assert json_path(parts) == expected


# --------------------------------------------------------------------------- positions


NESTED = """\
name: cursor
rules:
  - name: a
    kind: always
  - {name: b, kind: auto, globs: ["*.py"]}
modes:
  agent:
    reminder: |
      hello
"openai-chat": {model: x}
empty:
"""


def test_positions_of_nested_nodes() -> None:
    doc = load_yaml_text(NESTED, "rules/agent.yaml")
    assert doc.file == "rules/agent.yaml"
    assert doc.value == {
        "name": "cursor",
        "rules": [
            {"name": "a", "kind": "always"},
            {"name": "b", "kind": "auto", "globs": ["*.py"]},
        ],
        "modes": {"agent": {"reminder": "hello\n"}},
        "openai-chat": {"model": "x"},
        "empty": None,
    }

    def at(path: str) -> tuple[int, int]:
        location = doc.locations[path]
        assert location.file == "rules/agent.yaml"
        return location.line, location.column

    assert at("$") == (1, 1)
    assert at("$.name") == (1, 7)
    assert at("$.rules") == (3, 3)
    assert at("$.rules[0]") == (3, 5)
    assert at("$.rules[0].kind") == (4, 11)
    assert at("$.rules[1]") == (5, 5)
    assert at("$.rules[1].kind") == (5, 21)
    assert at("$.rules[1].globs[0]") == (5, 35)
    assert at("$.modes.agent.reminder") == (8, 15)
    assert at('$["openai-chat"].model') == (10, 24)
    assert at("$.empty") == (11, 7)


def test_key_locations_point_at_the_key() -> None:
    doc = load_yaml_text(NESTED, "a.yaml")
    assert doc.key_location("$.rules[0].kind") == Location("a.yaml", 4, 5)
    assert doc.key_location("$.modes.agent") == Location("a.yaml", 7, 3)
    assert doc.key_location('$["openai-chat"]') == Location("a.yaml", 10, 1)
    # Not a mapping member: falls back to the node's own location.
    assert doc.key_location("$.rules[1]") == Location("a.yaml", 5, 5)


def test_locations_read_as_mappings_of_every_node_and_every_key() -> None:
    """Nodes and keys are kept packed, one entry per path; read, they are two plain
    ``path -> Location`` mappings: the keys' only has the mapping members."""
    doc = load_yaml_text("a: [1, {b: x}]\nc: {}\n", "m.yaml")
    nodes, keys = doc.locations, doc.key_locations
    assert dict(nodes) == {
        "$": loc(1, 1, "m.yaml"),
        "$.a": loc(1, 4, "m.yaml"),
        "$.a[0]": loc(1, 5, "m.yaml"),
        "$.a[1]": loc(1, 8, "m.yaml"),
        "$.a[1].b": loc(1, 12, "m.yaml"),
        "$.c": loc(2, 4, "m.yaml"),
    }
    assert dict(keys) == {
        "$.a": loc(1, 1, "m.yaml"),
        "$.a[1].b": loc(1, 9, "m.yaml"),
        "$.c": loc(2, 1, "m.yaml"),
    }
    assert (len(nodes), len(keys), sorted(keys)) == (6, 3, ["$.a", "$.a[1].b", "$.c"])
    assert "$.a[0]" in nodes and "$.a[0]" not in keys and 3 not in nodes
    assert keys.get("$.a[0]") is None and keys.get("$", "none") == "none"
    with pytest.raises(KeyError):
        keys["$"]
    assert nodes == dict(nodes) and keys != nodes


def test_location_falls_back_to_the_nearest_ancestor_then_the_file_start() -> None:
    doc = load_yaml_text(NESTED, "a.yaml")
    assert doc.location("$.rules[0].missing") == doc.locations["$.rules[0]"]
    assert doc.location("$.rules[7].x[3]") == doc.locations["$.rules"]
    assert doc.location('$.modes["no such"].runtime') == doc.locations["$.modes"]
    bare = LoadedDocument("b.yaml", None, {})
    assert bare.location("$.a.b") == Location("b.yaml", 1, 1)
    assert bare.location("$") == Location("b.yaml", 1, 1)


def test_columns_count_code_points() -> None:
    doc = load_yaml_text("ä: é\nb: [ü, x]\n", "u.yaml")
    assert doc.locations["$.b[1]"] == Location("u.yaml", 2, 8)
    assert doc.locations['$["ä"]'] == Location("u.yaml", 1, 4)


def test_json_is_read_as_yaml() -> None:
    doc = load_yaml_text('{"a":1,"b":[1.5,{"c":"\\/"}],"d":1e5,"e":null,"f":true}', "r.json")
    assert doc.value == {"a": 1, "b": [1.5, {"c": "/"}], "d": 100000.0, "e": None, "f": True}
    assert doc.locations["$.b[1].c"] == Location("r.json", 1, 22)


# --------------------------------------------------------------------------- scalars


def test_scalars_follow_the_yaml_1_2_core_schema() -> None:
    doc = load_yaml_text(
        "\n".join(
            [
                "s: yes",
                "o: off",
                "t: 2026-12-02T10:00:00Z",
                "d: 2026-12-02",
                "b: [true, False, TRUE]",
                "n: [~, null, NULL, !!null '']",
                "i: [0, -7, +3, 0o17, 0x1F, 012]",
                "f: [1.5, -0.25, 1e5, .5, 2.]",
                "sexagesimal: 1:30",
                "underscore: 1_000",
                "quoted: '12'",
                "tagged: [!!str 12, !!int '7', !!float 1, !!bool 'true', !!null '', ! 12]",
                "model: anthropic.claude-sonnet-4-5-v1:0",
            ]
        ),
        "s.yaml",
    )
    assert doc.value == {
        "s": "yes",
        "o": "off",
        "t": "2026-12-02T10:00:00Z",
        "d": "2026-12-02",
        "b": [True, False, True],
        "n": [None, None, None, None],
        "i": [0, -7, 3, 15, 31, 12],
        "f": [1.5, -0.25, 100000.0, 0.5, 2.0],
        "sexagesimal": "1:30",
        "underscore": "1_000",
        "quoted": "12",
        "tagged": ["12", 7, 1.0, True, None, "12"],
        "model": "anthropic.claude-sonnet-4-5-v1:0",
    }
    assert type(doc.value["f"][1]) is float


def test_surrogate_pairs_from_json_escapes_form_one_character() -> None:
    doc = load_yaml_text('a: "\\ud83d\\ude00"\n', "e.yaml")
    assert doc.value == {"a": "\U0001f600"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: .inf\n", "x.yaml:1:4: $.a: number .inf is not finite; JSON has no infinity or NaN"),
        ("a: -.Inf\n", "x.yaml:1:4: $.a: number -.Inf is not finite; JSON has no infinity or NaN"),
        ("a: .nan\n", "x.yaml:1:4: $.a: number .nan is not finite; JSON has no infinity or NaN"),
        ("a: 1e999\n", "x.yaml:1:4: $.a: number 1e999 is not finite; JSON has no infinity or NaN"),
        ("a: !!int x\n", "x.yaml:1:4: $.a: 'x' is not a valid !!int"),
        ("a: !!float x\n", "x.yaml:1:4: $.a: 'x' is not a valid !!float"),
        ("a: !!bool yes\n", "x.yaml:1:4: $.a: 'yes' is not a valid !!bool (use true or false)"),
        ("a: !!null x\n", "x.yaml:1:4: $.a: 'x' is not a valid !!null"),
        ('a: "\\ud800"\n', "x.yaml:1:4: $.a: string contains a lone surrogate U+D800"),
    ],
)
def test_scalars_without_a_json_value_are_refused(text: str, message: str) -> None:
    assert errors_of(text) == [message]


HINT = "(only JSON-compatible values: !!str, !!int, !!float, !!bool, !!null, !!map, !!seq)"


@pytest.mark.parametrize(
    ("text", "tag", "column"),
    [
        ("a: !!binary aGVsbG8=\n", "!!binary", 4),
        ("a: !!timestamp 2026-12-02\n", "!!timestamp", 4),
        ("a: !!set {x}\n", "!!set", 4),
        ("a: !!omap [{x: 1}]\n", "!!omap", 4),
        ("a: !!python/object:os.system {}\n", "!!python/object:os.system", 4),
        ("a: !!python/name:os.system\n", "!!python/name:os.system", 4),
        ("a: !custom x\n", "!custom", 4),
    ],
)
def test_only_core_tags_are_allowed(text: str, tag: str, column: int) -> None:
    assert errors_of(text) == [f"x.yaml:1:{column}: $.a: unsupported tag {tag} {HINT}"]


# --------------------------------------------------------------------------- syntax


def test_syntax_error_names_the_mark_and_what_was_expected() -> None:
    text = "rules:\n  - name: a\n - name: b\n"
    assert errors_of(text, "rules/x.yaml") == [
        "rules/x.yaml:3:2: $: YAML syntax error: expected <block end>, but found "
        "'<block sequence start>' (while parsing a block mapping at line 1, column 1)"
    ]


def test_syntax_error_of_an_unclosed_flow_sequence() -> None:
    assert errors_of("a: [1, 2\nb: 3\n") == [
        "x.yaml:2:2: $: YAML syntax error: expected ',' or ']', but got ':' "
        "(while parsing a flow sequence at line 1, column 4)"
    ]


def test_tab_indentation_is_a_syntax_error() -> None:
    assert errors_of("a:\n\tb: 1\n") == [
        "x.yaml:2:1: $: YAML syntax error: found character '\\t' that cannot start any token "
        "(while scanning for the next token)"
    ]


def test_a_syntax_error_is_reported_alone() -> None:
    # The duplicate key before the syntax error is not reported: parsing stopped.
    assert errors_of("a: 1\na: 2\nb: [\n") == [
        "x.yaml:4:1: $: YAML syntax error: expected the node content, but found '<stream end>' "
        "(while parsing a flow node at line 4, column 1)"
    ]


def test_control_characters_are_refused_with_their_position() -> None:
    assert errors_of("a: 1\nb: x\x07y\n") == ["x.yaml:2:5: character U+0007 is not allowed in YAML"]


# --------------------------------------------------------------------------- keys


def test_duplicate_key_names_the_first_line() -> None:
    text = "tools:\n  - x: 0\n  - name: a\n    description: d\n    name: b\n"
    assert errors_of(text, "rules/tools.yaml") == [
        "rules/tools.yaml:5:5: $.tools[1].name: duplicate key 'name' (first defined at line 3)"
    ]


def test_duplicate_key_in_a_flow_mapping() -> None:
    assert errors_of("a: {b: 1, b: 2}\n") == [
        "x.yaml:1:11: $.a.b: duplicate key 'b' (first defined at line 1)"
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1: x\n", "key must be a string, got an integer: 1 (quote it to make it a string)"),
        ("1.5: x\n", "key must be a string, got a number: 1.5 (quote it to make it a string)"),
        ("true: x\n", "key must be a string, got a boolean: true (quote it to make it a string)"),
        ("~: x\n", "key must be a string, got null: ~ (quote it to make it a string)"),
        ("? [a]\n: x\n", "key must be a string, got an array"),
        ("? {a: 1}\n: x\n", "key must be a string, got an object"),
    ],
)
def test_keys_must_be_strings(text: str, message: str) -> None:
    column = 3 if text.startswith("?") else 1
    assert errors_of(text) == [f"x.yaml:1:{column}: $: {message}"]


def test_an_empty_key_is_null() -> None:
    assert errors_of("? \n: x\n") == [
        "x.yaml:1:2: $: key must be a string, got null (quote it to make it a string)"
    ]


def test_quoted_keys_are_strings() -> None:
    assert load_yaml_text("'1': a\n\"true\": b\n", "k.yaml").value == {"1": "a", "true": "b"}


def test_all_errors_of_a_file_are_reported_together_sorted() -> None:
    text = "\n".join(
        [
            "rules:",
            "  - name: a",
            "    kind: !!binary aGk=",
            "    name: b",
            "  - 7: x",
            "top: .nan",
            "top: 2",
            "",
        ]
    )
    with pytest.raises(SpecErrors) as info:
        load_yaml_text(text, "rules/rules.yaml")
    assert [str(e) for e in info.value.errors] == [
        f"rules/rules.yaml:3:11: $.rules[0].kind: unsupported tag !!binary {HINT}",
        "rules/rules.yaml:4:5: $.rules[0].name: duplicate key 'name' (first defined at line 2)",
        "rules/rules.yaml:5:5: $.rules[1]: key must be a string, got an integer: 7 "
        "(quote it to make it a string)",
        "rules/rules.yaml:6:6: $.top: number .nan is not finite; JSON has no infinity or NaN",
        "rules/rules.yaml:7:1: $.top: duplicate key 'top' (first defined at line 6)",
    ]
    assert list(info.value.errors) == sorted(info.value.errors)
    assert str(info.value) == "\n".join(str(e) for e in info.value.errors)


# --------------------------------------------------------------------------- documents


def test_multiple_documents_are_refused() -> None:
    assert errors_of("a: 1\n---\nb: 2\n") == [
        "x.yaml:2:1: $: a second YAML document starts here; a spec file holds exactly one document"
    ]


def test_multiple_documents_are_reported_with_the_first_documents_errors() -> None:
    assert errors_of("a: 1\na: 2\n---\nb: 2\n") == [
        "x.yaml:2:1: $.a: duplicate key 'a' (first defined at line 1)",
        "x.yaml:3:1: $: a second YAML document starts here; a spec file holds exactly one document",
    ]


def test_one_explicit_document_is_fine() -> None:
    assert load_yaml_text("---\na: 1\n...\n", "d.yaml").value == {"a": 1}


@pytest.mark.parametrize("text", ["", "\n\n", "# yaml-language-server: $schema=x.json\n"])
def test_empty_file_is_none(text: str) -> None:
    doc = load_yaml_text(text, "e.yaml")
    assert doc.value is None
    assert doc.location("$") == Location("e.yaml", 1, 1)


def test_nesting_depth_is_bounded() -> None:
    deep = "a: " + "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5) + "\n"
    assert errors_of(deep) == [f"x.yaml:1:{MAX_DEPTH + 3}: $: nesting deeper than 100 levels"]
    fine = "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)
    assert load_yaml_text(f"a: {fine}\n", "d.yaml").value is not None


def test_nesting_depth_is_bounded_after_alias_expansion() -> None:
    # Each line nests 60 deep; the alias chain makes it 120 deep.
    text = "a: &a " + "[" * 60 + "1" + "]" * 60 + "\nb: " + "[" * 60 + "*a" + "]" * 60 + "\n"
    # b's mapping and 60 lists enclose the alias; the anchor's 40th list is the 101st level.
    assert errors_of(text) == [f"x.yaml:1:46: $.b{'[0]' * 99}: nesting deeper than 100 levels"]


# --------------------------------------------------------------------------- anchors


def test_aliases_and_merge_keys_expand() -> None:
    text = "\n".join(
        [
            "base: &base {model: m, max_tokens: 10}",
            "list: &list [1, 2]",
            "a:",
            "  <<: *base",
            "  max_tokens: 20",
            "b: {<<: [*base, {extra: 1, model: other}], model: z}",
            "c: *list",
            "",
        ]
    )
    doc = load_yaml_text(text, "m.yaml")
    assert doc.value == {
        "base": {"model": "m", "max_tokens": 10},
        "list": [1, 2],
        "a": {"model": "m", "max_tokens": 20},
        "b": {"max_tokens": 10, "extra": 1, "model": "z"},
        "c": [1, 2],
    }
    # Explicit members keep their own positions; merged ones point into the anchor.
    assert doc.locations["$.a"] == loc(4, 3, "m.yaml")
    assert doc.locations["$.a.max_tokens"] == loc(5, 15, "m.yaml")
    assert doc.locations["$.a.model"] == loc(1, 21, "m.yaml")
    # An alias is located where it is used, and so are its members (an error in the
    # copy points at the alias that made it).
    assert doc.locations["$.c"] == loc(7, 4, "m.yaml")
    assert doc.locations["$.c[1]"] == loc(7, 4, "m.yaml")
    # Values built from an alias are independent copies.
    assert doc.value["c"] is not doc.value["list"]


def test_anchors_inside_built_collections_expand_whole() -> None:
    """The builder drops each child node once built (a long file's node tree would
    otherwise stay whole); an anchored collection, and everything in it, is kept for the
    aliases that build it again, however deep, and after its parent is done."""
    text = "\n".join(
        [
            "steps:",
            "  - {name: one, deep: &d {x: [1, {y: [2, 3]}]}}",
            "  - {again: *d, merged: {<<: *d, z: 4}}",
            "  - &s [a, [b, {c: d}]]",
            "  - *s",
            "later: [*d, *s]",
            "",
        ]
    )
    d = {"x": [1, {"y": [2, 3]}]}
    s = ["a", ["b", {"c": "d"}]]
    assert load_yaml_text(text, "a.yaml").value == {
        "steps": [{"name": "one", "deep": d}, {"again": d, "merged": {**d, "z": 4}}, s, s],
        "later": [d, s],
    }


def test_merge_key_needs_mappings() -> None:
    assert errors_of("a: {<<: 3}\nb: {<<: [{x: 1}, 2]}\n") == [
        "x.yaml:1:5: $.a: merge key << expects a mapping or a list of mappings",
        "x.yaml:2:5: $.b: merge key << expects a mapping or a list of mappings",
    ]


def test_undefined_alias() -> None:
    assert errors_of("a: *nope\nb: [*later]\nc: &later 1\n") == [
        "x.yaml:1:4: $.a: undefined alias *nope (no anchor &nope before it)",
        "x.yaml:2:5: $.b[0]: undefined alias *later (no anchor &later before it)",
    ]


def test_recursive_alias() -> None:
    assert errors_of("a: &a [1, *a]\nb: &b {self: *b}\n") == [
        "x.yaml:1:11: $.a[1]: recursive alias *a (it refers to itself)",
        "x.yaml:2:14: $.b.self: recursive alias *b (it refers to itself)",
    ]


def test_duplicate_anchor() -> None:
    assert errors_of("a: &x 1\nb: &x 2\n") == [
        "x.yaml:2:4: $: duplicate anchor &x (first defined at line 1)"
    ]


def billion_laughs(levels: int = 9) -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    names = "abcdefghijklmnopqrstuvwxyz"
    for level in range(1, levels):
        previous, name = names[level - 1], names[level]
        lines.append(f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_billion_laughs_is_refused_at_the_alias_that_exceeds_the_budget() -> None:
    # a: 10 values; each *a 10, each *b 91, each *c 820, each *d 7381. Aliases have
    # produced 90 + 819 + 7380 = 8289 values after line 4; the first *d on line 5
    # would add 7381, so expansion stops inside it and the error names that alias.
    assert ALIAS_NODE_BUDGET == 10_000
    assert errors_of(billion_laughs()) == [
        "x.yaml:5:8: $: expanding alias *d exceeds the limit of 10000 values produced by "
        "aliases in one file (a 'billion laughs' document?)"
    ]


def test_billion_laughs_is_refused_with_bounded_memory() -> None:
    # 9 ** 9 (387 million) strings if expanded; the budget keeps memory tiny.
    tracemalloc.start()
    try:
        with pytest.raises(SpecErrors):
            load_yaml_text(billion_laughs(9), "bomb.yaml")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 * 1024 * 1024


def test_alias_budget_is_exact() -> None:
    anchor = "a: &a [" + ",".join(["1"] * 99) + "]\n"  # each *a produces 100 values
    at_budget = anchor + "b: [" + ",".join(["*a"] * 100) + "]\n"
    assert len(load_yaml_text(at_budget, "ok.yaml").value["b"]) == 100
    over = anchor + "b: [" + ",".join(["*a"] * 101) + "]\n"
    assert errors_of(over) == [
        "x.yaml:2:305: $: expanding alias *a exceeds the limit of 10000 values produced by "
        "aliases in one file (a 'billion laughs' document?)"
    ]


def test_alias_budget_is_read_at_load_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader, "ALIAS_NODE_BUDGET", 4)
    assert load_yaml_text("a: &a [1, 2, 3]\nb: *a\n", "ok.yaml").value["b"] == [1, 2, 3]
    assert errors_of("a: &a [1, 2, 3]\nb: [*a, *a]\n") == [
        "x.yaml:2:9: $: expanding alias *a exceeds the limit of 4 values produced by "
        "aliases in one file (a 'billion laughs' document?)"
    ]


def test_an_alias_repeating_an_error_reports_it_once() -> None:
    assert errors_of("a: &a {1: x}\nb: *a\nc: *a\n") == [
        "x.yaml:1:8: $.a: key must be a string, got an integer: 1 (quote it to make it a string)"
    ]


# --------------------------------------------------------------------------- bytes


def test_yaml_bytes_must_be_utf8() -> None:
    data = "a: ok\nb: ä\xff".encode("latin-1")
    with pytest.raises(SpecErrors) as info:
        load_yaml_bytes(data, "rules/x.yaml")
    assert [str(e) for e in info.value.errors] == [
        "rules/x.yaml:2:4: invalid UTF-8: byte 0xe4 at byte offset 9 cannot be decoded "
        "(files must be UTF-8)"
    ]


def test_invalid_utf8_column_counts_the_characters_before_it() -> None:
    data = "x: ä\nyé: \xff".encode()[:-2] + b"\xff\n"
    with pytest.raises(SpecErrors) as info:
        load_yaml_bytes(data, "u.yaml")
    assert [str(e) for e in info.value.errors] == [
        "u.yaml:2:5: invalid UTF-8: byte 0xff at byte offset 11 cannot be decoded "
        "(files must be UTF-8)"
    ]


BOM_MESSAGE = (
    "file starts with a UTF-8 byte order mark (BOM); spec files are UTF-8 without a BOM "
    "(save it without one)"
)


def test_bom_is_refused_in_bytes_and_in_text() -> None:
    with pytest.raises(SpecErrors) as info:
        load_yaml_bytes(b"\xef\xbb\xbfa: 1\n", "b.yaml")
    assert [str(e) for e in info.value.errors] == [f"b.yaml:1:1: {BOM_MESSAGE}"]
    assert errors_of("\ufeffa: 1\n") == [f"x.yaml:1:1: {BOM_MESSAGE}"]


def test_bom_and_invalid_bytes_are_reported_together() -> None:
    with pytest.raises(SpecErrors) as info:
        load_yaml_bytes(b"\xef\xbb\xbfa: 1\nb: \xc3\n", "b.yaml")
    assert [str(e) for e in info.value.errors] == [
        f"b.yaml:1:1: {BOM_MESSAGE}",
        "b.yaml:2:4: invalid UTF-8: byte 0xc3 at byte offset 11 cannot be decoded "
        "(files must be UTF-8)",
    ]


def test_crlf_yaml_is_fine_and_normalized() -> None:
    doc = load_yaml_bytes(b"a: 1\r\nb: |\r\n  x\r\n  y\r\n", "c.yaml")
    assert doc.value == {"a": 1, "b": "x\ny\n"}
    assert doc.locations["$.b"] == Location("c.yaml", 2, 4)


def test_load_yaml_file_uses_the_display_name(tmp_path: Path) -> None:
    path = tmp_path / "rules" / "tools.yaml"
    path.parent.mkdir()
    path.write_bytes(b"tools: []\n")
    assert load_yaml_file(path, "rules/tools.yaml").file == "rules/tools.yaml"
    assert load_yaml_file(path).file == path.as_posix()
    path.write_bytes(b"a: 1\na: 2\n")
    with pytest.raises(SpecErrors) as info:
        load_yaml_file(path, "rules/tools.yaml")
    assert (
        str(info.value) == "rules/tools.yaml:2:1: $.a: duplicate key 'a' (first defined at line 1)"
    )


def test_missing_file_is_a_spec_error(tmp_path: Path) -> None:
    with pytest.raises(SpecErrors) as info:
        load_yaml_file(tmp_path / "nope.yaml", "rules/nope.yaml")
    assert info.value.errors == (
        SpecError(Location("rules/nope.yaml"), "", "cannot read file: No such file or directory"),
    )


# --------------------------------------------------------------------------- text files


def test_read_text_file_returns_the_exact_text(tmp_path: Path) -> None:
    path = tmp_path / "runtime.md.j2"
    text = "Hello {{ query }}\n\n  indented\ttab\n\u00e9\n"
    path.write_bytes(text.encode())
    assert read_text_file(path, "prompt/x/agent/runtime.md.j2") == text


def test_read_text_file_refuses_carriage_returns(tmp_path: Path) -> None:
    path = tmp_path / "instructions.md"
    path.write_bytes("line one\nlïne two\r\nthree\r\n".encode())
    with pytest.raises(SpecErrors) as info:
        read_text_file(path, "prompt/cursor/instructions.md")
    assert [str(e) for e in info.value.errors] == [
        "prompt/cursor/instructions.md:2:9: carriage return (\\r) found: line endings must be "
        "\\n (2 carriage returns in this file)"
    ]


def test_read_text_file_refuses_a_bare_carriage_return(tmp_path: Path) -> None:
    path = tmp_path / "a.md"
    path.write_bytes(b"a\rb\n")
    with pytest.raises(SpecErrors) as info:
        read_text_file(path)
    assert [str(e) for e in info.value.errors] == [
        f"{path.as_posix()}:1:2: carriage return (\\r) found: line endings must be \\n "
        "(1 carriage return in this file)"
    ]


def test_read_text_file_refuses_bom_and_invalid_utf8(tmp_path: Path) -> None:
    path = tmp_path / "a.md"
    path.write_bytes(b"\xef\xbb\xbfok\n")
    with pytest.raises(SpecErrors) as info:
        read_text_file(path, "a.md")
    assert [str(e) for e in info.value.errors] == [f"a.md:1:1: {BOM_MESSAGE}"]
    path.write_bytes(b"ok\nbad \x80 here\n")
    with pytest.raises(SpecErrors) as info:
        read_text_file(path, "a.md")
    assert [str(e) for e in info.value.errors] == [
        "a.md:2:5: invalid UTF-8: byte 0x80 at byte offset 7 cannot be decoded "
        "(files must be UTF-8)"
    ]


def test_read_text_file_missing(tmp_path: Path) -> None:
    with pytest.raises(SpecErrors) as info:
        read_text_file(tmp_path / "none.md", "prompt/none.md")
    assert str(info.value) == "prompt/none.md: cannot read file: No such file or directory"


# --------------------------------------------------------------------------- house rules


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def test_yaml_is_imported_only_by_the_loader() -> None:
    importers = sorted(
        path.relative_to(ROOT).as_posix()
        for package in ("compiler", "providers")
        for path in (ROOT / package).rglob("*.py")
        if "yaml" in _imports(path)
    )
    assert importers == ["compiler/spec/loader.py"]


# --------------------------------------------------------------------------- streaming


def _loaded(text: str, *, stream: bool) -> object:
    """What loading ``text`` gives (value, locations, key locations; or the errors),
    with the items of sequences built as they are composed or the tree built whole."""
    try:
        composer, builder, root = loader._composed(text, "x.yaml", stream=stream)
        builder.errors[:0] = composer.errors
        value = builder.build_document(root)
    except SpecErrors as err:
        return [str(e) for e in err.errors]
    if builder.errors:
        return [str(e) for e in SpecErrors(loader._dedupe(builder.errors)).errors]
    return value, dict(builder.positions.nodes), dict(builder.positions.keys)


STREAMED = [
    "steps:\n- user: {text: hi, n: 1}\n- user: {text: 2, n: 0x1f}\n",
    "a: [[1, {b: [2, {c: x}]}], {d: [e, f]}]\n",
    # errors inside items: all of them, where the whole tree would report them
    "steps:\n- {n: !!int x}\n- {b: .nan}\n- {1: x}\n- [yes, ~x]\n",
    # a duplicate key: its value is not built, its items' errors are not reported
    "steps:\n- {n: 1}\nsteps:\n- {n: !!int x}\n- {m: 1.0e}\n",
    # a key the builder rewrites (escaped surrogates), then the same key plain
    '"\\ud83d\\ude00": [{a: 1}]\n"\U0001f600": [{a: !!int x}]\n',
    # a lone surrogate key; the members after it
    '"\\ud800": [{a: 1}]\nb: [{c: !!int x}]\n',
    # a non-string key whose value holds sequences; a collection key holding one
    "1: [{a: !!int x}]\nb: [{c: 1}]\n",
    "? [{a: !!int x}, [1]]\n: [{b: !!int x}]\n",
    # tags: an unsupported one on a sequence (its items are not built), explicit ones
    "a: !x [{b: !!int x}]\nc: !!seq [{d: 1}]\ne: !!map {f: [{g: !!int x}]}\n",
    "a: !!str [{b: 1}]\n",
    # anchors without aliases build once
    "a: &x [{b: 1}, &y {c: [{d: !!int x}]}]\n",
    # nesting at and beyond the limit
    "a: " + "[" * (MAX_DEPTH - 1) + "{b: 1}" + "]" * (MAX_DEPTH - 1) + "\n",
    "a: " + "[" * MAX_DEPTH + "{b: 1}" + "]" * MAX_DEPTH + "\n",
    "- [1, 2]\n- {a: [{}]}\n- []\n",
    "a: [{b: 1}]\n---\nc: 2\n",
    "a: [{b: 1}]\nb: &k [x]\nc: &k [y]\n",
]


@pytest.mark.parametrize("text", STREAMED)
def test_streaming_builds_exactly_what_the_whole_tree_builds(text: str) -> None:
    assert _loaded(text, stream=True) == _loaded(text, stream=False)


def test_streaming_keeps_values_not_the_nodes_of_sequence_items() -> None:
    _, builder, root = loader._composed(
        "steps:\n- {user: {text: hi}}\n- [1, 2]\n- 3\n", "x.yaml", stream=True
    )
    assert root is not None
    steps = root.value[0][1].value
    assert [type(item).__name__ for item in steps] == ["_Built", "_Built", "ScalarNode"]
    assert steps[0].value == {"user": {"text": "hi"}}
    assert builder.positions.nodes["$.steps[1][0]"] == loc(3, 4)


@pytest.mark.parametrize(
    "text",
    [
        "a: &a [{b: 1}]\nc: [*a, {d: *a}]\n",
        "base: &b {x: 1}\nitems:\n- {<<: *b, y: [{z: 2}]}\n- {y: [{z: !!int x}]}\n",
        "items:\n- {a: [{z: 1}]}\n- {<<: {a: [{z: !!int x}]}}\n",
        "a: [*nope, {b: !!int x}]\n",
        "a: &r [{b: *r}]\n",  # a recursive alias, inside the item it refers to
        "m:\n  a: [{z: 1}]\n  <<: {a: [{z: 2}]}\n",  # merged members' locations first
    ],
)
def test_a_file_with_aliases_or_merge_keys_is_loaded_whole(text: str) -> None:
    """An alias builds a node again, merged members come before explicit ones: such a
    file is composed again without streaming, and loads as the whole tree would."""
    composer, _, _ = loader._composed(text, "x.yaml", stream=True)
    assert composer.aliases or composer.merges
    try:
        document = load_yaml_text(text, "x.yaml")
        found: object = (document.value, document.locations, document.key_locations)
    except SpecErrors as err:
        found = [str(e) for e in err.errors]
    assert found == _loaded(text, stream=False)


def test_a_text_repeated_in_a_file_is_one_object() -> None:
    """A long file repeats its keys, tool names and paths: each text is built once and
    every value that holds it holds that object (the same value, less memory)."""
    document = load_yaml_text(
        "calls:\n- {name: read_file, path: src/a.py}\n- {name: read_file, path: 'src/a.py'}\n",
        "x.yaml",
    )
    first, second = document.value["calls"]
    assert first == second == {"name": "read_file", "path": "src/a.py"}
    assert first["name"] is second["name"] and first["path"] is second["path"]
    assert next(iter(first)) is next(iter(second))


def test_deep_flow_nesting_is_refused_before_the_scanner_goes_quadratic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 43 #8: the scanner checks every open flow level's possible simple key for
    every token, so 16,384 nested lists (32 KB) cost 24 s of CPU before the composer
    refused them. The work is counted as the keys the scanner examines, not timed."""
    examined = 0
    stale = loader._Loader.stale_possible_simple_keys

    def counting(self: loader._Loader) -> None:
        nonlocal examined
        examined += len(self.possible_simple_keys)
        stale(self)

    monkeypatch.setattr(loader._Loader, "stale_possible_simple_keys", counting)
    deep = "a: " + "[" * 16_384 + "]" * 16_384 + "\n"
    assert errors_of(deep) == [f"x.yaml:1:{MAX_DEPTH + 3}: $: nesting deeper than 100 levels"]
    # At most the keys of 200 open levels (the scanner's limit) for each token scanned
    # before the refusal (about 600); unbounded, the count was 16,384 levels for each of
    # 16,384 tokens.
    limit = loader._SCANNER_FLOW_LIMIT
    assert limit == 2 * MAX_DEPTH
    assert examined <= limit * 3 * (limit + 5)
    for text, where in (
        ("b:\n  c:\n    d: " + "{x: " * 200 + "1" + "}" * 200 + "\n", "3:396"),
        ("[" * 101 + "]" * 101 + "\n", "1:101"),
    ):
        # The collection the composer would name: the one at level 101, block
        # collections included.
        assert errors_of(text) == [f"x.yaml:{where}: $: nesting deeper than 100 levels"]


@pytest.mark.parametrize(
    ("head", "inner", "where"),
    [
        ("a:\n- ", "[\n", "100:1"),  # an indentless sequence, one list a line
        ("a:\n- ", "[", "2:101"),
        ("- a:\n  - ", "[", "2:102"),  # indentless inside a block sequence's mapping
        ("- a:\n  b:\n  - ", "[", "3:102"),
        ("a:\n  - ", "[", "2:103"),  # an indented block sequence
    ],
)
def test_the_scanner_names_the_collection_the_composer_names(
    head: str, inner: str, where: str
) -> None:
    """Issue 43: past the scanner's limit (300 levels) the file is refused by the
    scanner, below it (150) by the composer; both name the collection at level 101. The
    scanner counted the enclosing block collections by its indentation levels, and an
    indentless sequence (``a:`` then ``- `` at the same column) opens none: its location
    was one level (one line, one list a line) off."""
    closing = "]\n" if inner.endswith("\n") else "]"
    for depth in (150, 300):
        text = head + inner * depth + closing * depth + "\n"
        assert errors_of(text) == [f"x.yaml:{where}: $: nesting deeper than 100 levels"]
