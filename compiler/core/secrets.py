"""Secret redaction: values that look like credentials never reach a prompt.

The rules (documented in docs/library.md#secrets, pinned by a corpus test):

1. **By value**, in every string of the conversation-level context (rules, skills,
   subagents, MCP servers with their descriptions, schemas, command, env and headers,
   environment, Git): high-confidence patterns become ``[REDACTED]`` -- private key
   blocks (PEM and PGP), GitHub tokens (``ghp_``, ``gho_``, ``ghu_``, ``ghs_``, ``ghr_``,
   ``github_pat_``), AWS access key ids (``AKIA``/``ASIA``) and a bare 40-character
   secret access key within 200 characters of one, Slack tokens
   (``xoxa-``/``xoxb-``/``xoxp-``...), OpenAI/Anthropic keys (``sk-``, ``sk-ant-``), Google
   API keys (``AIza``), Stripe secret and restricted keys (``sk_live_``, ``rk_test_``...),
   JWTs, the value of ``Authorization: Bearer|Basic|Token|Digest <value>`` (and of a bare
   ``Bearer`` or scheme-less ``Authorization:`` when it looks like a token: 16+
   characters with a digit), Azure ``AccountKey=`` / ``SharedAccessKey=`` values, and
   ``password=``-style assignments of a literal (rule 4).
2. **URLs** anywhere in such a string (leading whitespace, a ``;`` or ``&`` separator, a
   fragment and unencoded ``/``, ``#`` or ``?`` in a password included): the userinfo
   becomes ``[REDACTED]`` (``https://[REDACTED]@github.com/o/r.git``), and query or
   fragment parameters with a sensitive name (rule 3, plus ``sig``, ``pwd``, ``pass``)
   get the value ``[REDACTED]``.
3. **By name**: MCP server ``env`` and ``headers`` entries whose name is sensitive keep
   their name and get the value ``[REDACTED]``. A name is split into words (``_``, ``-``,
   ``.``, camelCase); it is sensitive when a word is one of ``KEY``, ``TOKEN``,
   ``SECRET``, ``PASSWORD``, ``PASSWD``, ``PWD``, ``PASS``, ``CREDENTIAL(S)``, ``AUTH``,
   ``AUTHORIZATION``, ``COOKIE``, ``PAT``, ``DSN``, ``SIG``, ``SIGNATURE``, or ends with
   ``KEY``, ``TOKEN``, ``SECRET`` or ``PASSWORD`` (``APIKEY``). ``GIT_AUTHOR_NAME`` and
   ``TOKENIZERS_PARALLELISM`` are therefore not sensitive.
4. An assignment ``name=value``, ``name: value`` or ``"name": "value"`` is redacted when
   the name holds ``password``, ``passwd``, ``pwd``, ``secret``, ``token`` or ``api_key``
   and the value is a literal: quoted, or at least 6 characters holding a digit or a
   symbol, and not code (no brackets, ``$`` or attribute chains such as ``cfg.password``).

User turn content (query, selections, open files, action context, event texts,
compaction summaries, tool outputs) is kept as it is by default: it is what the user
chose to send. ``secrets: {user_content: redact}`` in ``rules/agent.yaml`` opts in to
rules 1, 2 and 4 over every string of it too (:func:`redact_user_content`), applied
before anything is saved, so no caught value reaches the store or a body. Besides the
request's own fields, every stored message of user content passes one funnel
(``Conversation._admit``, which every appending operation goes through:
``compact(summary)`` included), so no entry point can bypass the policy. Redaction is
deterministic and idempotent, so it never causes a spurious context change, and a
retried event still matches the one recorded.

Errors never quote a secret either: a validation error that shows what a caller sent
quotes it through :func:`quoted` (the rules above, applied before it is shortened).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping
from typing import Any

REDACTED = "[REDACTED]"

_WORDS = frozenset(
    {
        "KEY",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "PWD",
        "PASS",
        "CREDENTIAL",
        "CREDENTIALS",
        "AUTH",
        "AUTHORIZATION",
        "COOKIE",
        "PAT",
        "DSN",
        "SIG",
        "SIGNATURE",
    }
)
_ENDINGS = ("KEY", "TOKEN", "SECRET", "PASSWORD")
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")

_PATTERNS = (
    # PEM ("-----BEGIN RSA PRIVATE KEY-----") and OpenPGP ("-----BEGIN PGP PRIVATE KEY
    # BLOCK-----", RFC 4880 section 6.2) private keys; an unterminated block to the end
    re.compile(
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?"
        r"(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
        re.DOTALL,
    ),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    re.compile(r"\bsk-(?:ant-)?[A-Za-z0-9_-]{20,}"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    # Google API keys: "AIza" and 35 characters (cloud.google.com/docs/authentication/api-keys)
    re.compile(r"\bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"),
    # Stripe secret and restricted keys, live or test (docs.stripe.com/keys); the
    # publishable pk_ keys are public by design
    re.compile(r"\b(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{10,}"),
)

#: Prefix kept, value redacted: ``Authorization: Bearer <token>`` / ``Basic <base64>``
#: (RFC 9110 section 11.6.2) written in free text (a curl command, a log line), and the
#: keys of Azure connection strings (``AccountKey=``, ``SharedAccessKey=``: the
#: storage and Service Bus / Event Hubs forms).
_PREFIXED = (
    re.compile(
        r"""(?i)(?P<keep>\bauthorization["']?\s*[:=]\s*["']?(?:bearer|basic|token|digest)\s+)"""
        r"""(?P<value>[A-Za-z0-9._~+/-]+=*)"""
    ),
    # an Authorization value without a scheme, and a bare "Bearer <token>": only a
    # token-like value (16+ characters with a digit), so prose ("authorization:
    # required", "Bearer tokens expire") is kept
    re.compile(
        r"""(?i)(?P<keep>\bauthorization["']?\s*[:=]\s*["']?|\bBearer\s+)"""
        r"""(?P<value>(?=[A-Za-z._~+/-]*[0-9])[A-Za-z0-9._~+/-]{16,}=*)"""
    ),
    re.compile(r"""(?i)(?P<keep>\b(?:Account|SharedAccess)Key\s*=\s*)(?P<value>[^;\s"'<$\[]+)"""),
)

#: An AWS access key id, and a secret access key (40 characters of base64,
#: docs.aws.amazon.com/IAM/latest/UserGuide/id_credentials_access-keys.html): a bare
#: one is told from any other 40-character token only by its id standing near it
#: (:data:`AWS_NEAR` characters), as in a credentials CSV or a pasted key pair.
_AWS_ID = re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")
_AWS_SECRET = re.compile(
    # a token of exactly 40 characters holding a lower and an upper case letter (the
    # look-aheads stay inside the token: linear on any input)
    r"(?<![A-Za-z0-9/+=])(?=[A-Za-z0-9/+]{0,39}[a-z])(?=[A-Za-z0-9/+]{0,39}[A-Z])"
    r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
)
AWS_NEAR = 200


def _aws_secrets(text: str) -> str:
    ids = [m.start() for m in _AWS_ID.finditer(text)]
    if not ids:
        return text

    def one(match: re.Match[str]) -> str:
        at = bisect.bisect_left(ids, match.start())
        near = [ids[i] for i in (at - 1, at) if 0 <= i < len(ids)]
        if any(abs(i - match.start()) <= AWS_NEAR for i in near):
            return REDACTED
        return match[0]

    return _AWS_SECRET.sub(one, text)


def _prefixed(match: re.Match[str]) -> str:
    return f"{match['keep']}{REDACTED}"


_ASSIGNED_NAME = r"[A-Za-z0-9_.-]*(?:password|passwd|pwd|secret|token|api[_-]?key)[A-Za-z0-9_-]*"
_ASSIGNMENT = re.compile(
    rf"""(?ix)
    (?<![A-Za-z0-9_.-])  # a name starts where its run does: linear, not quadratic
    (?P<name>["']?{_ASSIGNED_NAME}["']?)
    (?P<sep>\s*[:=]\s*)
    (?:
        (?P<quote>["'])(?P<quoted>[^"'\n]{{4,}})(?P=quote)
      | (?P<bare>[^\s"',;&]{{6,}})
    )
    """
)
_CODE = re.compile(r"[()\[\]{}<>$]|^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")

#: A URL in free text: a scheme, then everything up to whitespace or a quote.
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>]+")
_PARAM = re.compile(r"(?P<key>[^&;=#?]+)=(?P<value>[^&;#]*)")
_PARAM_NAMES = frozenset({"SIG", "PWD", "PASS", "CODE"})


def is_sensitive_name(name: str) -> bool:
    """Whether an env/header/parameter name holds a credential (rule 3)."""
    words = [w.upper() for w in _WORD.findall(name)]
    return any(w in _WORDS or w.endswith(_ENDINGS) for w in words)


def _redact_params(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        key = match["key"]
        if is_sensitive_name(key) or key.upper() in _PARAM_NAMES:
            return f"{key}={REDACTED}"
        return match[0]

    return _PARAM.sub(one, text)


def redact_url(url: str) -> str:
    """Remove credentials from one URL; strings that are not scheme URLs pass unchanged."""
    head, sep, rest = url.partition("://")
    if not sep or not re.fullmatch(r"\s*[A-Za-z][A-Za-z0-9+.-]*", head):
        return url
    # The userinfo ends at the last '@' when its user part has no '/': an unencoded '/',
    # '#' or '?' in a password must not hide the '@' from us.
    at = rest.rfind("@")
    colon = rest.find(":")
    slash = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    if at >= 0 and (at < slash or (0 <= colon < slash)):
        rest = REDACTED + rest[at:]
    cut = min((i for i in (rest.find(c) for c in "?#") if i >= 0), default=len(rest))
    return f"{head}://{rest[:cut]}{_redact_params(rest[cut:])}"


def _redact_assignment(match: re.Match[str]) -> str:
    quoted, bare = match["quoted"], match["bare"]
    if quoted is not None:
        if quoted.startswith(("$", "<", "[REDACTED")) or _CODE.search(quoted):
            return match[0]
        q = match["quote"]
        return f"{match['name']}{match['sep']}{q}{REDACTED}{q}"
    assert bare is not None
    if bare.startswith("[REDACTED") or _CODE.search(bare) or not re.search(r"[\d\W_]", bare):
        return match[0]
    return f"{match['name']}{match['sep']}{REDACTED}"


#: Characters (strings and their redacted forms) the memo of :func:`redact_text` holds at
#: most; past it the memo starts afresh, so its memory stays bounded whatever the input.
MEMO_BUDGET = 8 * 1024 * 1024
_memo: dict[str, str] = {}
_memo_chars = [0]


def redact_text(text: str) -> str:
    """Rules 1, 2 and 4 over one string.

    Memoized (a pure function of the string; at most :data:`MEMO_BUDGET` characters are
    kept): the context is rendered again on every user turn and its strings rarely
    change, so each string is scanned once."""
    done = _memo.get(text)
    if done is None:
        done = _redacted(text)
        size = len(text) + len(done)
        if _memo_chars[0] + size > MEMO_BUDGET:
            _memo.clear()
            _memo_chars[0] = 0
        if size <= MEMO_BUDGET:
            _memo[text] = done
            _memo_chars[0] += size
    return done


def _redacted(text: str) -> str:
    text = _aws_secrets(text)  # first: it needs the key id, which a pattern replaces
    for pattern in _PATTERNS:
        text = pattern.sub(REDACTED, text)
    for prefixed in _PREFIXED:
        text = prefixed.sub(_prefixed, text)
    text = _URL.sub(lambda m: redact_url(m[0]), text)
    return _ASSIGNMENT.sub(_redact_assignment, text)


def redact_value(value: Any) -> Any:
    """:func:`redact_text` over every string of a JSON value (keys are kept)."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {k: redact_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_value(v) for v in value]
    if isinstance(value, tuple):
        return tuple(redact_value(v) for v in value)
    return value


def redact_mapping(values: Mapping[str, str]) -> dict[str, str]:
    """``env`` / ``headers``: sensitive names keep their name, lose their value; every
    other value is redacted by value."""
    return {k: (REDACTED if is_sensitive_name(k) else redact_text(v)) for k, v in values.items()}


def quoted(value: object, limit: int | None = None) -> str:
    """A value as an error message quotes it: its ``repr`` (a string's, shortened to
    ``limit`` characters with ``...``) with every secret the rules above catch replaced
    (redacted before it is shortened, so a secret cut in two is still caught). Every
    validation error that quotes what a caller sent goes through here: an error is
    printed, logged and shown in CI, where no secret may go."""
    if isinstance(value, str):
        text = redact_text(value)
        if limit is not None and len(text) > limit:
            text = text[: limit - 3] + "..."
        return repr(text)
    return redact_text(repr(value))
