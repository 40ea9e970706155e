"""Secrets by value and by name (issue 14): a corpus pins what is caught and what must
survive, and an end-to-end test proves no caught value reaches a body or the store."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conv_helpers import CONTEXT_A, CONV, REPO, example_bundle, user
from prefixlock.core import canonical
from prefixlock.core.errors import HistoryError, SpecErrors, UsageError
from prefixlock.core.model import ModelRequest
from prefixlock.core.secrets import is_sensitive_name, redact_mapping, redact_text
from prefixlock.providers import NAMES, get
from prefixlock.runtime.conversation import Conversation
from prefixlock.runtime.request import AgentRunRequest
from prefixlock.runtime.tools import ToolCall, ToolResult
from prefixlock.spec.build import build_bundle
from prefixlock.spec.bundle import Bundle
from prefixlock.store.sqlite import SQLiteStore

R = "[REDACTED]"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
    "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
)

#: text -> (its redacted form, the secret that must not survive)
CAUGHT: dict[str, tuple[str, str]] = {
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----": (
        R,
        "MIIEowIBAAKCAQEA",
    ),
    "use ghp_abcdefghijklmnopqrstuvwxyz0123456789 here": (
        f"use {R} here",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    ),
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnop": (R, "github_pat_11ABCDEFG"),
    "aws AKIAIOSFODNN7EXAMPLE key": (f"aws {R} key", "AKIAIOSFODNN7EXAMPLE"),
    "slack xoxb-1234567890-abcdefghij": (f"slack {R}", "xoxb-1234567890"),
    "sk-proj-abcdefghijklmnopqrstuvwxyz123456": (R, "sk-proj-abcdefghij"),
    "sk-ant-api03-abcdefghijklmnopqrstuvwxyz": (R, "sk-ant-api03"),
    f"Bearer {JWT}": (f"Bearer {R}", "dozjgNryP4J3jVmNHl0w5N"),
    "password=hunter2!": (f"password={R}", "hunter2!"),
    'DB_PASSWORD: "s3cr3t-value"': (f'DB_PASSWORD: "{R}"', "s3cr3t-value"),
    "npx server --api-key=Zq81xQ9aa": (f"npx server --api-key={R}", "Zq81xQ9aa"),
    "postgres://u:pw1SECRET@db.example.com/app": (
        f"postgres://{R}@db.example.com/app",
        "pw1SECRET",
    ),
    "https://example.com/cb#access_token=FRAGSECRET1&x=1": (
        f"https://example.com/cb#access_token={R}&x=1",
        "FRAGSECRET1",
    ),
    "https://blob.core.windows.net/c?sv=2020&sig=SIGSECRET123": (
        f"https://blob.core.windows.net/c?sv=2020&sig={R}",
        "SIGSECRET123",
    ),
    "mysql://host/db?user=u&pwd=PWDSECRET1": (f"mysql://host/db?user=u&pwd={R}", "PWDSECRET1"),
    "https://host/x?pass=PASSSECRET1;user=u": (f"https://host/x?pass={R};user=u", "PASSSECRET1"),
    " https://user:LEADSECRET@host/": (f" https://{R}@host/", "LEADSECRET"),
    "postgres://user:pa/ss#w?rdSECRET@db.example.com/app": (
        f"postgres://{R}@db.example.com/app",
        "rdSECRET",
    ),
    "https://DSNSECRET123@o1.ingest.sentry.io/1": (
        f"https://{R}@o1.ingest.sentry.io/1",
        "DSNSECRET123",
    ),
    # issue 43, finding 6
    "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBGXpgpSECRET\n=aBcD\n"
    "-----END PGP PRIVATE KEY BLOCK-----\nafter": (f"{R}\nafter", "lQOYBGXpgpSECRET"),
    "AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY": (
        f"{R} {R}",
        "wJalrXUtnFEMI/K7MDENG",
    ),
    "AccessKeyId,SecretAccessKey\nASIAIOSFODNN7EXAMPLE,je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY": (
        f"AccessKeyId,SecretAccessKey\n{R},{R}",
        "je7MtGbClwBF/2Zp9Utk",
    ),
    "curl -H 'Authorization: Bearer abcDEF123456ghiJKL' https://api": (
        f"curl -H 'Authorization: Bearer {R}' https://api",
        "abcDEF123456ghiJKL",
    ),
    "Authorization: Basic dXNlcjpwYXNzd29yZA==": (
        f"Authorization: Basic {R}",
        "dXNlcjpwYXNzd29yZA",
    ),
    "the header was authorization=Zm9vYmFyYmF6cXV4MTIzNDU2": (
        f"the header was authorization={R}",
        "Zm9vYmFyYmF6cXV4MTIzNDU2",
    ),
    "token Bearer 9f8e7d6c5b4a39281706abcd": (f"token Bearer {R}", "9f8e7d6c5b4a3928"),
    "maps key AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY in js": (
        f"maps key {R} in js",
        "AIzaSyD-9tSrke72PouQMnMX",
    ),
    "stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc and rk_test_51Habcdefghij": (
        f"stripe {R} and {R}",
        "4eC39HqLyjWDarjtT1zdp7dc",
    ),
    "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDX"
    "J1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;EndpointSuffix=core.windows.net": (
        f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={R};"
        "EndpointSuffix=core.windows.net",
        "Eby8vdM02xNOcqFlqUwJ",
    ),
    "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;"
    "SharedAccessKey=abcSASsecret0123456789=": (
        f"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey={R}",
        "abcSASsecret0123456789",
    ),
}

#: Values that must come through unchanged: code, hashes, UUIDs, plain URLs, references.
KEPT = (
    "def get_password(): return os.environ['PASSWORD']",
    "password = config.password",
    "token: string",
    "api_key = load_key(path)",
    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "commit 9fceb02d0ae598e95dc970b74767f19372d61af8",
    "123e4567-e89b-12d3-a456-426614174000",
    "https://github.com/acme/app.git",
    "https://example.com/search?q=rust&page=2",
    "export TOKEN=${GITHUB_TOKEN}",
    "risk-assessment and desk-top tools",
    "Use tabs; run `pytest -k test_token_refresh`.",
    "authorization: required",
    "Bearer tokens expire after an hour; send Authorization: Bearer ${TOKEN}",
    "AccountKey=<your storage key>",
    # a 40-character token with no AWS key id near it (a base64 digest)
    "digest qL8R4QIcQ/ZsRqOAbeRfcZhilN/MksRtDaErMA+uvwE= of the file",
    "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 after AKIA was rotated",
    "pk_live_51HabcdefghijPUBLISHABLE",
)

#: env/header names: sensitive or not.
NAMES_SENSITIVE = ("GH_PAT", "MYSQL_PWD", "SENTRY_DSN", "X-Api-Key", "Authorization", "apiKey")
NAMES_HARMLESS = ("GIT_AUTHOR_NAME", "TOKENIZERS_PARALLELISM", "KEYBOARD_LAYOUT", "DATABASE_URL")


@pytest.mark.parametrize("text", CAUGHT)
def test_corpus_secret_is_caught(text: str) -> None:
    redacted, secret = CAUGHT[text]
    assert redact_text(text) == redacted
    assert secret not in redact_text(text)
    assert redact_text(redacted) == redacted  # idempotent


@pytest.mark.parametrize("text", KEPT)
def test_corpus_harmless_value_is_kept(text: str) -> None:
    assert redact_text(text) == text


def test_names_are_split_into_words() -> None:
    assert [n for n in NAMES_SENSITIVE if not is_sensitive_name(n)] == []
    assert [n for n in NAMES_HARMLESS if is_sensitive_name(n)] == []
    env = {
        "GIT_AUTHOR_NAME": "Ada",
        "TOKENIZERS_PARALLELISM": "false",
        "GH_PAT": "plainvalue",
        "DATABASE_URL": "postgres://u:pw9@db/app",
    }
    assert redact_mapping(env) == {
        "GIT_AUTHOR_NAME": "Ada",
        "TOKENIZERS_PARALLELISM": "false",
        "GH_PAT": R,
        "DATABASE_URL": f"postgres://{R}@db/app",
    }


def secret_context() -> dict[str, Any]:
    """Every caught value in every conversation-level place the issue names."""
    texts = list(CAUGHT)
    ctx = copy.deepcopy(CONTEXT_A)
    ctx["rules"][0]["body"] = "\n".join(texts)
    ctx["rules"][1]["body"] = texts[1]
    ctx["skills"][0]["description"] = texts[5]
    ctx["subagents"][0]["description"] = texts[6]
    ctx["environment"]["cwd"] = texts[16]
    ctx["git"]["remote"] = texts[11]
    ctx["git"]["branch"] = texts[3]
    tool = ctx["mcp"]["servers"][0]["tools"][0]
    tool["description"] = texts[7]
    tool["input_schema"]["properties"]["sql"]["default"] = texts[9]
    ctx["mcp"]["servers"][0]["command"] = f"npx db-server {texts[10]} {texts[2]}"
    ctx["mcp"]["servers"][0]["env"] = {
        "DATABASE_URL": texts[11],
        "GH_PAT": "PATBYNAME123",
        "SENTRY_DSN": texts[18],
        "NOTE": texts[8],
    }
    ctx["mcp"]["servers"][1]["headers"] = {"X-Forward": texts[13], "X-Api-Key": "HDRBYNAME1"}
    ctx["mcp"]["servers"][1]["url"] = texts[12]
    return ctx


def test_no_secret_reaches_a_provider_body_or_the_store(tmp_path: Path) -> None:
    path = tmp_path / "conv.db"
    store = SQLiteStore(path)
    try:
        conv = Conversation.open(store, example_bundle(), CONV)
        request = conv.handle(user("u1", context=secret_context()))
        bodies = {name: get(name).serialize(request) for name in NAMES}
        wal = tmp_path / "conv.db-wal"  # read while open: the -wal file holds the records
        stored = path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
    finally:
        store.close()
    stored += path.read_bytes()
    secrets = [secret for _, secret in CAUGHT.values()] + ["PATBYNAME123", "HDRBYNAME1"]
    assert b"[REDACTED]" in stored
    for where, data in {**bodies, "store": stored}.items():
        found = [s for s in secrets if s.encode() in data]
        assert found == [], where


# -- user-turn content: kept by default, redacted by an opt-in policy ------------------
# rules/agent.yaml ``secrets.user_content``: ``keep`` (the default) sends the query,
# selections, action context, event texts and tool outputs as they are; ``redact``
# runs the by-value rules over every string of them before anything is saved.


def policy_bundle(tmp_path: Path, setting: str | None) -> Bundle:
    root = tmp_path / f"spec-{setting}"
    shutil.copytree(REPO / "rules", root / "rules")
    shutil.copytree(REPO / "prompt", root / "prompt")
    if setting is not None:
        agent = root / "rules" / "agent.yaml"
        agent.write_text(agent.read_text() + f"\nsecrets:\n  user_content: {setting}\n")
    return build_bundle(root)


def secret_turns(conv: Conversation) -> list[ModelRequest]:
    """A user turn, a tool loop and a background event, each carrying every secret of
    the corpus in every user-content field; the requests they produce."""
    texts = list(CAUGHT)
    turn = user(
        "u1",
        "\n".join(texts),
        selected_context=[{"path": "config/.env", "start_line": 1, "text": "\n".join(texts)}],
        action_context={"terminal": texts[9], "last_command": texts[10], "env": texts[11]},
        open_files=[{"path": "notes.md"}],
    )
    requests = [conv.handle(turn)]
    conv.assistant(None, [ToolCall("call-1", "read_file", '{"path":"config/.env"}')])
    requests.append(conv.tool_results([ToolResult("call-1", "\n".join(texts))]))
    conv.assistant("done")
    requests.append(
        conv.handle(
            AgentRunRequest.from_value(
                {
                    "conversation_id": CONV,
                    "event_id": "bg-1",
                    "kind": "background",
                    "text": f"subagent found {texts[1]} and {texts[5]}",
                }
            )
        )
    )
    # every other entry point of user content: an injected event, a manual compaction
    # summary, an automatic one (user.compact)
    conv.assistant("ok")
    requests.append(
        conv.handle(
            AgentRunRequest.from_value(
                {
                    "conversation_id": CONV,
                    "event_id": "inj-1",
                    "kind": "injected",
                    "text": "\n".join(texts),
                }
            )
        )
    )
    conv.assistant("noted")
    conv.compact("manual summary:\n" + "\n".join(texts))
    requests.append(conv.request())
    requests.append(conv.handle(user("u2", "go on", compact={"summary": "\n".join(texts)})))
    return requests


def run_secret_turns(tmp_path: Path, bundle: Bundle) -> tuple[dict[str, bytes], bytes]:
    path = tmp_path / f"{bundle.digest[7:19]}.db"
    store = SQLiteStore(path)
    try:
        conv = Conversation.open(store, bundle, CONV)
        requests = secret_turns(conv)
        bodies = {
            f"{name} #{i}": get(name).serialize(r) for name in NAMES for i, r in enumerate(requests)
        }
        wal = path.with_name(path.name + "-wal")
        stored = path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
    finally:
        store.close()
    return bodies, stored + path.read_bytes()


def test_with_the_policy_on_no_secret_of_user_content_reaches_a_body_or_the_store(
    tmp_path: Path,
) -> None:
    bundle = policy_bundle(tmp_path, "redact")
    assert bundle.redact_user_content
    bodies, stored = run_secret_turns(tmp_path, bundle)
    secrets = [secret for _, secret in CAUGHT.values()]
    assert b"[REDACTED]" in stored
    for where, data in {**bodies, "store": stored}.items():
        found = [s for s in secrets if s.encode() in data]
        assert found == [], where
    assert all(b"[REDACTED]" in body for body in bodies.values())


def test_by_default_user_content_is_kept_byte_identical(tmp_path: Path) -> None:
    default, stored = run_secret_turns(tmp_path, example_bundle())
    keep = policy_bundle(tmp_path, "keep")
    assert not keep.redact_user_content and not example_bundle().redact_user_content
    assert keep.digest == example_bundle().digest  # the default adds nothing to the bundle
    (tmp_path / "keep").mkdir()
    explicit, _ = run_secret_turns(tmp_path / "keep", keep)
    assert explicit == default
    texts = list(CAUGHT)
    for name in NAMES:
        assert json.dumps("\n".join(texts)).encode()[1:-1] in default[f"{name} #1"], name
    assert [s for _, s in CAUGHT.values() if s.encode() not in stored] == []


def test_the_policy_is_part_of_the_bundle_digest(tmp_path: Path) -> None:
    on = policy_bundle(tmp_path, "redact")
    assert on.digest != example_bundle().digest
    assert canonical.loads(on.part("policy.json").data) == {"secrets": {"user_content": "redact"}}
    with pytest.raises(KeyError):
        example_bundle().part("policy.json")


def test_an_unknown_policy_value_is_a_spec_error_at_its_line(tmp_path: Path) -> None:
    with pytest.raises(SpecErrors) as info:
        policy_bundle(tmp_path, "scan")
    assert "rules/agent.yaml:" in str(info.value)
    assert "$.secrets.user_content" in str(info.value)


def test_a_string_seen_before_is_not_scanned_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The context is redacted on every user turn; its unchanged strings are answered
    from memory (redaction is a pure function of the string), within a budget."""
    from prefixlock.core import secrets as redact

    text = "token=s3cr3t-value-9 and https://u:p@example.com/x " + "z" * 50
    first = redact_text(text)
    assert redact._memo[text] == first
    assert redact_text(text) == first
    monkeypatch.setattr(redact, "MEMO_BUDGET", 1_000)
    big = "y" * 600  # with its redacted form, beyond the budget: not kept
    assert redact_text(big) == big
    assert big not in redact._memo
    for i in range(20):  # the memo starts afresh rather than grow past the budget
        redact_text(f"{i:03d}" + "w" * 100)
        assert sum(len(k) + len(v) for k, v in redact._memo.items()) <= 1_000


def test_an_assignment_name_is_matched_from_the_start_of_its_run_only() -> None:
    """A match may not start inside a run of name characters: with that, a long run
    (``'x' * 20_000``) is scanned once instead of once per position (quadratic: 17 s)."""
    from prefixlock.core import secrets as redact

    text = "my_password=s3cr3t-v4lue"
    assert redact._ASSIGNMENT.match(text, 0) is not None
    assert [redact._ASSIGNMENT.match(text, i) for i in range(1, 6)] == [None] * 5
    assert redact_text(text) != text  # still redacted, whole name kept


# Validation errors quote what the caller sent: never a secret (issue 43, finding 6).
SECRET = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"


def _request(**fields: Any) -> dict[str, Any]:
    return {"conversation_id": "c", "event_id": "e", "kind": "user", "query": "q", **fields}


def test_a_schema_error_quotes_a_value_with_its_secret_redacted() -> None:
    with pytest.raises(SpecErrors) as info:
        AgentRunRequest.from_value(_request(kind=f"user {SECRET}"))
    assert str(info.value) == (
        "<request>: $.kind: expected one of user, background, injected; got 'user [REDACTED]'"
    )
    with pytest.raises(SpecErrors) as info:
        AgentRunRequest.from_value(_request(timestamp=f"{SECRET} and more text past sixty chars"))
    assert str(info.value) == (
        "<request>: $.timestamp: expected an RFC 3339 timestamp like 2026-12-02T10:00:00Z, "
        "got '[REDACTED] and more text past sixty chars'"
    )


def test_a_shortened_quote_is_redacted_before_it_is_cut() -> None:
    with pytest.raises(SpecErrors) as info:
        AgentRunRequest.from_value(_request(kind="x" * 40 + " " + SECRET))
    assert SECRET[:10] not in str(info.value)
    assert str(info.value).endswith(f"got '{'x' * 40} [REDACTED]'")


def test_tool_arguments_that_are_not_json_are_quoted_redacted() -> None:
    with pytest.raises(HistoryError) as info:
        ToolCall("c1", "read", '{"token": "' + SECRET).to_part()
    assert str(info.value) == (
        "tool call 'c1': arguments are not JSON (Unterminated string starting at: line 1 "
        'column 11 (char 10)): \'{"token": "[REDACTED]\''
    )
    long = '{"a": "' + "y" * 100 + '", ' + SECRET
    with pytest.raises(HistoryError) as info:
        ToolCall("c1", "read", long).to_part()
    assert SECRET[:8] not in str(info.value)
    assert str(info.value).endswith(f"... ({len(long)} characters)")


def test_a_value_of_the_wrong_type_is_quoted_redacted(tmp_path: Path) -> None:
    conv = Conversation.open(SQLiteStore(tmp_path / "s.db"), example_bundle(), CONV)
    conv.handle(user("u1"))
    with pytest.raises(HistoryError) as info:
        conv.assistant({"key": SECRET})  # type: ignore[arg-type]
    assert str(info.value) == "assistant text: expected a string, got dict {'key': '[REDACTED]'}"


def test_a_timestamp_that_is_no_timestamp_is_quoted_redacted(tmp_path: Path) -> None:
    conv = Conversation.open(SQLiteStore(tmp_path / "s.db"), example_bundle(), CONV)
    conv.handle(user("u1"))
    conv.assistant(None, [ToolCall("call-1", "read_file", '{"path":"a"}')])
    with pytest.raises(UsageError) as info:
        conv.tool_results([ToolResult("call-1", "ok")], timestamp=f"at {SECRET}")
    assert str(info.value) == (
        "tool results timestamp: 'at [REDACTED]' is not an RFC 3339 timestamp like "
        "2026-12-02T10:00:00Z"
    )
