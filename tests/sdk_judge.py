"""Strict judge of request bodies against the official SDKs' own request types (test-only).

``judge(provider, body)`` returns every problem as ``"$.path: message"`` (empty list: the
body is valid); ``assert_valid(provider, body)`` raises ``AssertionError`` listing them.

Why a hand-written walker: pydantic's TypedDict validation is lenient (extra keys pass,
``Iterable`` fields are validated lazily), so it cannot judge a wire body. The walker is
strict everywhere:

* unknown keys are errors; required keys must be present;
* ``Literal`` values match by value *and* type (``True`` is not ``1``);
* ``str``/``int``/``float``/``bool`` are distinct (``bool`` is not ``int``; ``float``
  accepts ``int``, as PEP 484 and JSON do); ``object``/``Any`` accept any JSON value;
* ``Iterable``/``Sequence``/``List`` must be JSON arrays and are checked element by
  element, eagerly; ``Dict`` values likewise;
* a ``Union`` is valid when one alternative is; otherwise the problems of the *closest*
  alternative are reported (same JSON kind, then matching ``Literal`` discriminators such
  as ``type``/``role``, then fewest problems), tagged ``(closest: <TypeName>)``.

Per provider, the source of truth:

``openai-chat``
    ``openai.types.chat.completion_create_params.CompletionCreateParamsNonStreaming``.
``openai-responses``
    ``openai.types.responses.response_create_params.ResponseCreateParamsNonStreaming``.
``anthropic``
    ``anthropic.types.message_create_params.MessageCreateParamsNonStreaming``.
    (The SDK also accepts its own *response* pydantic objects as content blocks; a JSON
    body cannot hold those, so they never match.)
``gemini``
    The REST body of ``models/{model}:generateContent`` as google-genai sends it in
    Gemini Developer API ("mldev") mode. Its top-level keys are taken from the SDK's own
    converters (``_GenerateContentParameters_to_mldev`` and
    ``_GenerateContentConfig_to_mldev``): ``contents`` plus every key the config
    converter places on the request (``systemInstruction``, ``tools``, ``toolConfig``,
    ``safetySettings``, ``cachedContent``, ...), and ``generationConfig`` with exactly
    the keys that converter places there (``maxOutputTokens``, ``temperature``, ...).
    Values are walked through google-genai's pydantic models *by camelCase alias*
    (``Content``, ``Part``, ``Tool``, ``FunctionDeclaration``, ...). Strictness the
    pydantic types cannot express, taken from the same SDK:

    - a field whose docstring starts with ``Required.`` is required (every pydantic
      field is ``Optional`` in the SDK);
    - a field the SDK's ``_<Model>_to_mldev`` converter refuses ("only supported in
      ... Enterprise Agent Platform mode") is an unknown key here;
    - ``bytes`` fields (``thoughtSignature``, ``inlineData.data``) are base64 strings,
      standard or URL-safe, as proto JSON accepts;
    - enum fields must equal one of the enum's values exactly;
    - ``Content.role`` is ``"user"`` or ``"model"`` (its docstring says so);
    - a ``Part`` holds exactly one member of the ``data`` oneof (``text``,
      ``inlineData``, ``functionCall``, ``functionResponse``, ``fileData``,
      ``executableCode``, ``codeExecutionResult``, ``toolCall``, ``toolResponse``),
      as the REST reference defines ``Part``.
``bedrock-anthropic``
    Two SDKs, as an InvokeModel call meets them. botocore's ``ParamValidator`` (and the
    pattern / length checks above) on the ``InvokeModel`` input shape with ``modelId``
    (a URI member, which the provider's ``body()`` puts first) and the JSON as the
    ``body`` blob; then the JSON as the anthropic SDK's Bedrock client
    (``anthropic.lib.bedrock``) takes it: ``MessageCreateParamsNonStreaming`` with
    ``model`` put back (the client pops it into the path) and without the members the
    client itself adds, ``anthropic_version`` (which must be ``bedrock-2023-05-31``)
    and ``anthropic_beta`` (a list of strings: the client moves the ``anthropic-beta``
    header there). A ``model`` or ``stream`` member in the JSON is an error: the
    client never sends one (the path carries both).
``bedrock-anthropic`` with ``endpoint="mantle"`` (``options: {endpoint: mantle}``)
    The JSON as the anthropic SDK's ``AnthropicBedrockMantle`` client
    (``anthropic.lib.bedrock._mantle``) takes it in ``messages.create``:
    ``MessageCreateParamsNonStreaming``, ``model`` included (the client posts the body
    as given to ``/v1/messages`` under ``.../anthropic``; no ``model``-to-path move),
    and nothing the client would send elsewhere: ``anthropic_version`` and
    ``anthropic_beta`` are headers there (``anthropic-version``, ``anthropic-beta``), so
    either as a body member is an error, as is InvokeModel's ``modelId``.
``bedrock-converse``
    botocore's own ``ParamValidator`` on the ``Converse`` operation's input shape (from
    the installed ``bedrock-runtime`` service model), plus the checks it lacks: ``bool``
    is not an integer or float, string enums must match, string ``max`` lengths and
    ``pattern``\\ s (anchored: the whole value must match) hold, and blob members are
    base64 strings in JSON (decoded to ``bytes`` before botocore sees them). The judged
    dict is the **full Converse params**, ``modelId`` included: ``modelId`` is a URI
    member (``/model/{modelId}/converse``), so a provider's serialized body leaves it
    out, and the provider's ``body()`` puts it back for this judge.
"""

from __future__ import annotations

import base64
import binascii
import enum
import functools
import inspect
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import typing_extensions
from service_rules import assert_accepted

__all__ = ["PROVIDERS", "assert_valid", "judge"]

PROVIDERS = (
    "openai-chat",
    "openai-responses",
    "anthropic",
    "gemini",
    "bedrock-converse",
    "bedrock-anthropic",
)

_MISSING = object()
_CLOSEST = " (closest: "


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if re.fullmatch(r"[A-Za-z_$][A-Za-z0-9_$]*", key) else f"{path}[{key!r}]"


def _kind(value: Any) -> str:
    """The JSON kind of a value, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_json(value: Any) -> bool:
    if value is None or isinstance(value, str | bool | int):
        return True
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and _is_json(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return all(_is_json(v) for v in value)
    return False


_B64 = re.compile(r"[A-Za-z0-9+/]*={0,2}|[A-Za-z0-9_-]*={0,2}")


def _b64_problem(value: Any) -> str | None:
    if not isinstance(value, str):
        return f"expected a base64 string, got {_kind(value)}"
    if not _B64.fullmatch(value):
        return "not a base64 string"
    try:
        _b64_decode(value)
    except (binascii.Error, ValueError):
        return "not a base64 string"
    return None


def _b64_decode(value: str) -> bytes:
    """Decode standard or URL-safe base64, padded or not (as proto JSON accepts)."""
    core = value.rstrip("=")
    padded = core + "=" * (-len(core) % 4)
    return base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)


# --------------------------------------------------------------------------- type walker


class _Field(NamedTuple):
    annotation: Any
    required: bool


class _Schema(NamedTuple):
    """The wire keys of one object type: alias -> field, in declaration order."""

    name: str
    fields: dict[str, _Field]
    #: (keys, "message") rules a plain type cannot express, e.g. Gemini's Part oneof.
    oneof: tuple[frozenset[str], ...] = ()


def _strip(tp: Any) -> tuple[Any, bool | None]:
    """Unwrap ``Required``/``NotRequired``/``Annotated``; report explicit required-ness."""
    required: bool | None = None
    while True:
        origin = typing.get_origin(tp)
        if origin in (typing.Required, typing_extensions.Required):
            required, tp = True, typing.get_args(tp)[0]
        elif origin in (typing.NotRequired, typing_extensions.NotRequired):
            required, tp = False, typing.get_args(tp)[0]
        elif origin is typing.Annotated:
            tp = tp.__origin__
        else:
            return tp, required


def _alias(tp: Any) -> str | None:
    """An SDK ``PropertyInfo(alias=...)`` in ``Annotated`` metadata, if any."""
    while typing.get_origin(tp) in (typing.Required, typing.NotRequired, typing.Annotated):
        if typing.get_origin(tp) is typing.Annotated:
            for meta in tp.__metadata__:
                alias = getattr(meta, "alias", None)
                if isinstance(alias, str):
                    return alias
            tp = tp.__origin__
        else:
            tp = typing.get_args(tp)[0]
    return None


@functools.cache
def _typeddict_schema(td: type) -> _Schema:
    hints = typing.get_type_hints(td, include_extras=True)
    total = getattr(td, "__total__", True)
    declared_required: frozenset[str] = getattr(td, "__required_keys__", frozenset())
    fields: dict[str, _Field] = {}
    for key, raw in hints.items():
        tp, explicit = _strip(raw)
        required = explicit if explicit is not None else (total or key in declared_required)
        fields[_alias(raw) or key] = _Field(tp, required)
    return _Schema(td.__name__, fields)


def _union_args(tp: Any) -> list[Any]:
    out: list[Any] = []
    for arg in typing.get_args(tp):
        arg, _ = _strip(arg)
        if typing.get_origin(arg) in (typing.Union, types.UnionType):
            out.extend(_union_args(arg))
        else:
            out.append(arg)
    return out


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in typing.get_args(tp))
    if origin is not None and typing.get_args(tp):
        args = ", ".join(_type_name(_strip(a)[0]) for a in typing.get_args(tp))
        return f"{getattr(origin, '__name__', None) or repr(origin)}[{args}]"
    return getattr(tp, "__name__", None) or repr(tp)


_LISTS = (
    list,
    tuple,
    Iterable,
    Sequence,
    typing.List,  # noqa: UP006 - the SDKs' own spelling
    typing.Iterable,
    typing.Sequence,
)
_DICTS = (dict, Mapping, typing.Dict)  # noqa: UP006


class _Walker:
    """Checks a JSON value against a type: TypedDicts, pydantic models and typing forms.

    ``schema_for(cls)`` returns the object schema of a model class (or None when the class
    is not an object type this walker knows); ``bytes_b64`` says whether ``bytes`` fields
    are base64 strings on this wire (Gemini) or cannot occur in JSON at all.
    """

    def __init__(self, schema_for: Callable[[type], _Schema | None], *, bytes_b64: bool) -> None:
        self._schema_for = schema_for
        self._bytes_b64 = bytes_b64

    def check(self, value: Any, tp: Any, path: str) -> list[str]:
        tp, _ = _strip(tp)
        origin = typing.get_origin(tp)
        if tp is Any or tp is object:
            return [] if _is_json(value) else [f"{path}: {_kind(value)} is not a JSON value"]
        if tp is None or tp is type(None):
            return [] if value is None else [f"{path}: expected null, got {_kind(value)}"]
        if origin in (typing.Union, types.UnionType):
            return self._union(value, _union_args(tp), path)
        if origin is typing.Literal:
            allowed = typing.get_args(tp)
            if any(type(value) is type(a) and value == a for a in allowed):
                return []
            want = " | ".join(repr(a) for a in allowed)
            return [f"{path}: expected {want}, got {_show(value)}"]
        if origin in _LISTS or tp in _LISTS:
            if not isinstance(value, list | tuple):
                return [f"{path}: expected an array, got {_kind(value)}"]
            args = typing.get_args(tp)
            if not args:
                return []
            if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
                return [f"{path}: fixed-length tuples are not a JSON type"]
            out: list[str] = []
            for i, item in enumerate(value):
                out += self.check(item, args[0], f"{path}[{i}]")
            return out
        if origin in _DICTS or tp in _DICTS:
            if not isinstance(value, Mapping):
                return [f"{path}: expected an object, got {_kind(value)}"]
            args = typing.get_args(tp) or (str, Any)
            out = []
            for key, item in value.items():
                out += self.check(key, args[0], f"{path}[{key!r}] (key)")
                out += self.check(item, args[1], _join(path, str(key)))
            return out
        if isinstance(tp, type):
            return self._class(value, tp, path)
        if isinstance(tp, typing.TypeVar):
            return [] if _is_json(value) else [f"{path}: {_kind(value)} is not a JSON value"]
        return [f"{path}: the judge does not know the type {tp!r}"]

    def _class(self, value: Any, tp: type, path: str) -> list[str]:
        if tp is bool:
            ok = isinstance(value, bool)
        elif tp is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif tp is float:
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            if ok and not _is_json(value):
                return [f"{path}: {value!r} has no JSON form"]
        elif tp is str:
            ok = isinstance(value, str)
        elif tp is bytes and self._bytes_b64:
            problem = _b64_problem(value)
            return [] if problem is None else [f"{path}: {problem}"]
        elif issubclass(tp, enum.Enum):
            allowed = [m.value for m in tp]
            if any(type(value) is type(a) and value == a for a in allowed):
                return []
            return [f"{path}: expected one of {tp.__name__} {allowed}, got {_show(value)}"]
        else:
            schema = self._schema_for(tp)
            if schema is None:
                return [f"{path}: expected {tp.__name__}, which has no JSON form"]
            return self._object(value, schema, path)
        if ok:
            return []
        want = {bool: "boolean", int: "integer", float: "number", str: "string"}.get(
            tp, tp.__name__
        )
        return [f"{path}: expected {want}, got {_kind(value)} {_show(value)}"]

    def _object(self, value: Any, schema: _Schema, path: str) -> list[str]:
        if not isinstance(value, Mapping):
            return [f"{path}: expected an object ({schema.name}), got {_kind(value)}"]
        out: list[str] = []
        for key, item in value.items():
            field = schema.fields.get(key) if isinstance(key, str) else None
            if field is None:
                known = ", ".join(sorted(schema.fields))
                where = _join(path, str(key))
                out.append(f"{where}: unknown key for {schema.name} (known: {known})")
            else:
                out += self.check(item, field.annotation, _join(path, key))
        for key, field in schema.fields.items():
            if field.required and key not in value:
                out.append(f"{path}: missing required key {key!r} of {schema.name}")
        for keys in schema.oneof:
            present = sorted(k for k in keys if k in value)
            if len(present) != 1:
                got = ", ".join(present) or "none"
                out.append(f"{path}: {schema.name} needs exactly one of {sorted(keys)}, got {got}")
        return out

    # ------------------------------------------------------------------ unions
    def _distance(self, value: Any, tp: Any) -> int:
        """How far ``value`` is from ``tp``: 0 same kind and every ``Literal``
        discriminator (``type``, ``role`` ...) agrees; n for n disagreeing ones; a large
        number for a different JSON kind."""
        far = 1_000
        origin = typing.get_origin(tp)
        if origin is typing.Literal:
            return 0 if any(type(value) is type(a) for a in typing.get_args(tp)) else far
        if origin in _LISTS or tp in _LISTS:
            return 0 if isinstance(value, list | tuple) else far
        if origin in _DICTS or tp in _DICTS:
            return 0 if isinstance(value, Mapping) else far
        if tp is None or tp is type(None):
            return 0 if value is None else far
        if tp is Any or tp is object:
            return 0
        if not isinstance(tp, type):
            return far
        if issubclass(tp, enum.Enum) or tp in (str, bytes):
            return 0 if isinstance(value, str) else far
        if tp in (int, float, bool):
            return 0 if _kind(value) in ("integer", "number", "boolean") else far
        schema = self._schema_for(tp)
        if schema is None or not isinstance(value, Mapping):
            return far
        mismatches = 0
        for key, field in schema.fields.items():
            literals = _literal_values(field.annotation)
            if not literals:
                continue
            if key in value:
                item = value[key]
                if not any(type(item) is type(a) and item == a for a in literals):
                    mismatches += 1
            elif field.required:
                mismatches += 1
        return mismatches

    def _union(self, value: Any, alternatives: list[Any], path: str) -> list[str]:
        if value is not None and len(alternatives) > 1:
            # Optional[X] with a non-null value: judge against X alone.
            alternatives = [a for a in alternatives if a is not type(None)] or alternatives
        if len(alternatives) == 1:
            return self.check(value, alternatives[0], path)
        scored: list[tuple[int, int, int, list[str], Any]] = []
        for index, alt in enumerate(alternatives):
            problems = self.check(value, alt, path)
            if not problems:
                return []
            scored.append((self._distance(value, alt), len(problems), index, problems, alt))
        distance, _, _, problems, alt = min(scored, key=lambda s: s[:3])
        if distance >= 1_000:
            names = " | ".join(_type_name(a) for a in alternatives)
            return [f"{path}: expected {names}, got {_kind(value)} {_show(value)}"]
        tag = f"{_CLOSEST}{_type_name(alt)})"
        return [p if _CLOSEST in p else p + tag for p in problems]


def _literal_values(tp: Any) -> tuple[Any, ...]:
    """The values of a ``Literal`` field (through ``Optional``/``Required``), else ()."""
    tp, _ = _strip(tp)
    if typing.get_origin(tp) is typing.Literal:
        return typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in _union_args(tp) if a is not type(None)]
        if len(args) == 1 and typing.get_origin(args[0]) is typing.Literal:
            return typing.get_args(args[0])
    return ()


# ----------------------------------------------------------------- openai / anthropic


def _typeddict_only(cls: type) -> _Schema | None:
    if typing_extensions.is_typeddict(cls):
        return _typeddict_schema(cls)
    return None


@functools.cache
def _root(provider: str) -> Any:
    if provider == "openai-chat":
        from openai.types.chat import completion_create_params

        return completion_create_params.CompletionCreateParamsNonStreaming
    if provider == "openai-responses":
        from openai.types.responses import response_create_params

        return response_create_params.ResponseCreateParamsNonStreaming
    if provider == "anthropic":
        from anthropic.types import message_create_params

        return message_create_params.MessageCreateParamsNonStreaming
    raise KeyError(provider)


# ---------------------------------------------------------------------------- gemini

_GEMINI_PART_DATA = frozenset(
    {
        "text",
        "inlineData",
        "functionCall",
        "functionResponse",
        "fileData",
        "executableCode",
        "codeExecutionResult",
        "toolCall",
        "toolResponse",
    }
)
_REFUSED = re.compile(
    r"if getv\(from_object, \['(\w+)'\]\) is not None:\s*raise ValueError\(\s*'\w+ parameter"
    r" is only supported in Gemini Enterprise"
)
_SETV = re.compile(
    r"if getv\(from_object, \['(\w+)'\]\) is not None:\s*setv\(\s*(to_object|parent_object),"
    r"\s*\['(\w+)'\]"
)


def _mldev_source(name: str) -> str | None:
    from google.genai import models

    converter = getattr(models, f"_{name}_to_mldev", None)
    return inspect.getsource(converter) if converter is not None else None


@functools.cache
def _mldev_refused(model_name: str) -> frozenset[str]:
    """Fields (python names) the SDK's mldev converter of ``model_name`` refuses."""
    source = _mldev_source(model_name)
    return frozenset(_REFUSED.findall(source)) if source else frozenset()


def _pydantic_schema(cls: type) -> _Schema | None:
    import pydantic

    if not issubclass(cls, pydantic.BaseModel):
        return _typeddict_only(cls)
    return _pydantic_model_schema(cls)


@functools.cache
def _pydantic_model_schema(cls: type) -> _Schema:
    refused = _mldev_refused(cls.__name__)
    fields: dict[str, _Field] = {}
    for name, info in cls.model_fields.items():  # type: ignore[attr-defined]
        if name in refused:
            continue
        required = (info.description or "").startswith("Required.")
        annotation = info.annotation
        if cls.__name__ == "Content" and name == "role":
            annotation = typing.Optional[typing.Literal["user", "model"]]  # noqa: UP045
        fields[info.alias or name] = _Field(annotation, required)
    oneof = (_GEMINI_PART_DATA,) if cls.__name__ == "Part" else ()
    return _Schema(cls.__name__, fields, oneof)


@functools.cache
def _gemini_root() -> _Schema:
    """The REST body of ``generateContent`` (mldev), derived from the SDK's converters."""
    from google.genai import types as gt

    config_source = _mldev_source("GenerateContentConfig")
    if config_source is None:
        raise RuntimeError("google-genai has no _GenerateContentConfig_to_mldev converter")
    pairs = _SETV.findall(config_source)
    if not pairs:
        raise RuntimeError("cannot read _GenerateContentConfig_to_mldev; update the judge")
    config_fields = gt.GenerateContentConfig.model_fields
    generation_fields = {(f.alias or n): f for n, f in gt.GenerationConfig.model_fields.items()}
    # The config converter turns these SDK conveniences into their wire types.
    wire_types: dict[str, Any] = {
        "systemInstruction": gt.Content,
        "tools": list[gt.Tool],
        "toolConfig": gt.ToolConfig,
        "safetySettings": list[gt.SafetySetting],
        "cachedContent": str,
        "responseSchema": gt.Schema,
        "speechConfig": gt.SpeechConfig,
    }
    generation: dict[str, _Field] = {}
    top: dict[str, _Field] = {"contents": _Field(list[gt.Content], True)}
    for python_name, target, key in pairs:
        if key in wire_types:
            annotation = wire_types[key]
        elif key in generation_fields and target == "to_object":
            annotation = generation_fields[key].annotation
        else:
            annotation = config_fields[python_name].annotation
        (generation if target == "to_object" else top)[key] = _Field(annotation, False)
    generation_schema = _Schema("GenerationConfig", generation)
    top["generationConfig"] = _Field(_GenerationConfigWire, False)
    _GEMINI_EXTRA[_GenerationConfigWire] = generation_schema
    return _Schema("GenerateContentRequest", top)


class _GenerationConfigWire:
    """Placeholder type for the wire ``generationConfig`` object (schema built above)."""


_GEMINI_EXTRA: dict[type, _Schema] = {}


def _gemini_schema_for(cls: type) -> _Schema | None:
    if cls in _GEMINI_EXTRA:
        return _GEMINI_EXTRA[cls]
    return _pydantic_schema(cls)


# --------------------------------------------------------------------------- bedrock


@functools.cache
def _converse_shape() -> Any:
    import botocore.session  # type: ignore[import-untyped]

    service = botocore.session.get_session().get_service_model("bedrock-runtime")
    return service.operation_model("Converse").input_shape


def _bedrock_prepare(value: Any, shape: Any, path: str, problems: list[str]) -> Any:
    """Check what ParamValidator lacks; return params with blobs decoded to bytes."""
    kind = shape.type_name
    if kind == "structure" and getattr(shape, "is_document_type", False):
        return value
    if kind == "structure" and isinstance(value, Mapping):
        return {
            key: _bedrock_prepare(item, shape.members[key], _join(path, key), problems)
            if key in shape.members
            else item
            for key, item in value.items()
        }
    if kind == "list" and isinstance(value, list | tuple):
        out = [
            _bedrock_prepare(item, shape.member, f"{path}[{i}]", problems)
            for i, item in enumerate(value)
        ]
        _bedrock_length(len(value), shape, path, problems)
        return out
    if kind == "map" and isinstance(value, Mapping):
        return {
            k: _bedrock_prepare(v, shape.value, _join(path, str(k)), problems)
            for k, v in value.items()
        }
    if kind in ("integer", "long", "float", "double") and isinstance(value, bool):
        problems.append(f"{path}: expected {kind}, got boolean {value!r}")
    elif kind == "blob":
        problem = _b64_problem(value)
        if problem is not None:
            problems.append(f"{path}: {problem}")
            return value
        return _b64_decode(value)
    elif kind == "string" and isinstance(value, str):
        enum_values = shape.enum
        if enum_values and value not in enum_values:
            problems.append(f"{path}: expected one of {list(enum_values)}, got {_show(value)}")
        _bedrock_length(len(value), shape, path, problems)
        pattern = shape.metadata.get("pattern")
        if pattern and not _fullmatch(pattern, value):
            problems.append(f"{path}: {_show(value)} does not match the pattern {pattern!r}")
    return value


def _bedrock_length(length: int, shape: Any, path: str, problems: list[str]) -> None:
    maximum = shape.metadata.get("max")
    if maximum is not None and length > maximum:
        problems.append(f"{path}: length {length} exceeds the maximum {maximum}")


@functools.cache
def _compiled(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern)
    except re.error:
        return None


def _fullmatch(pattern: str, value: str) -> bool:
    compiled = _compiled(pattern)
    return compiled is None or compiled.fullmatch(value) is not None


def _judge_bedrock(body: Mapping[str, Any]) -> list[str]:
    from botocore.validate import ParamValidator  # type: ignore[import-untyped]

    shape = _converse_shape()
    problems: list[str] = []
    params = _bedrock_prepare(dict(body), shape, "$", problems)
    report = ParamValidator().validate(params, shape)
    for error in report._errors:
        name = error[1] or ""
        problems.append(f"${name}: {report._format_error(error)}")
    return problems


@functools.cache
def _invoke_shape() -> Any:
    import botocore.session  # type: ignore[import-untyped]

    service = botocore.session.get_session().get_service_model("bedrock-runtime")
    return service.operation_model("InvokeModel").input_shape


#: The ``anthropic_version`` an InvokeModel body for Claude must carry (AWS, "Anthropic
#: Claude Messages API": "The value must be bedrock-2023-05-31").
BEDROCK_ANTHROPIC_VERSION = "bedrock-2023-05-31"


def _judge_bedrock_anthropic(body: Mapping[str, Any]) -> list[str]:
    from botocore.validate import ParamValidator  # type: ignore[import-untyped]
    from prefixlock.core import canonical

    problems: list[str] = []
    wire = {k: v for k, v in body.items() if k != "modelId"}
    params: dict[str, Any] = {"body": canonical.dumpb(wire), "contentType": "application/json"}
    if "modelId" in body:
        params["modelId"] = body["modelId"]
    shape = _invoke_shape()
    _bedrock_prepare({"modelId": params.get("modelId")}, shape, "$", problems)
    report = ParamValidator().validate(params, shape)
    for error in report._errors:
        problems.append(f"${error[1] or ''}: {report._format_error(error)}")
    version = wire.pop("anthropic_version", _MISSING)
    if version is _MISSING:
        problems.append("$: missing required key 'anthropic_version'")
    elif version != BEDROCK_ANTHROPIC_VERSION:
        problems.append(
            f"$.anthropic_version: expected {BEDROCK_ANTHROPIC_VERSION!r}, got {_show(version)}"
        )
    betas = wire.pop("anthropic_beta", [])
    if not (isinstance(betas, list) and all(isinstance(b, str) for b in betas)):
        problems.append(f"$.anthropic_beta: expected an array of strings, got {_show(betas)}")
    for key in ("model", "stream"):
        if key in wire:
            problems.append(f"$.{key}: not a body member on Bedrock (the path carries it)")
            wire.pop(key)
    if isinstance(body.get("modelId"), str):
        wire["model"] = body["modelId"]
    walker = _Walker(_typeddict_only, bytes_b64=False)
    problems += walker.check(wire, _root("anthropic"), "$")
    return problems


def _judge_bedrock_mantle(body: Mapping[str, Any]) -> list[str]:
    problems: list[str] = []
    wire = dict(body)
    for key, where in (
        ("anthropic_version", "the anthropic-version header"),
        ("anthropic_beta", "the anthropic-beta header"),
        ("modelId", "InvokeModel's path; here 'model' is a body member"),
    ):
        if key in wire:
            problems.append(f"$.{key}: not a body member on bedrock-mantle ({where})")
            wire.pop(key)
    walker = _Walker(_typeddict_only, bytes_b64=False)
    problems += walker.check(wire, _root("anthropic"), "$")
    return problems


#: The endpoints a provider's bodies may be judged for besides its default one.
ENDPOINTS = {("bedrock-anthropic", "mantle"): _judge_bedrock_mantle}


# ------------------------------------------------------------------------------- API


def judge(provider: str, body: Mapping[str, Any], *, endpoint: str = "") -> list[str]:
    """All problems of ``body`` as the request of ``provider`` (to its ``endpoint``,
    ``""``: the default one); ``[]`` when it is valid."""
    if endpoint:
        return ENDPOINTS[provider, endpoint](body)
    if provider == "bedrock-converse":
        return _judge_bedrock(body)
    if provider == "bedrock-anthropic":
        return _judge_bedrock_anthropic(body)
    if provider == "gemini":
        walker = _Walker(_gemini_schema_for, bytes_b64=True)
        return walker._object(body, _gemini_root(), "$")
    if provider == "openai-responses":
        body = _responses_store_policy(body)
    if provider in PROVIDERS:
        return _Walker(_typeddict_only, bytes_b64=False).check(body, _root(provider), "$")
    raise KeyError(f"unknown provider {provider!r}; known: {', '.join(PROVIDERS)}")


#: Stands in for the ``id`` a stateless reasoning item leaves out (see below).
STATELESS_ID = "rs_stateless"


def _responses_store_policy(body: Mapping[str, Any]) -> Mapping[str, Any]:
    """The store policy prefixlock follows (and openai/codex): no input item carries an
    ``id``. The SDK type marks a reasoning item's ``id`` required; the service does not,
    so the judge walks such an item as if it had one. What ids the service wants is a
    service rule (:mod:`service_rules`)."""
    items = body.get("input")
    if not isinstance(items, list):
        return body
    patched = [
        {**item, "id": STATELESS_ID}
        if isinstance(item, Mapping) and item.get("type") == "reasoning" and "id" not in item
        else item
        for item in items
    ]
    return {**body, "input": patched}


def assert_valid(
    provider: str, body: Mapping[str, Any], model: str | None = None, *, endpoint: str = ""
) -> None:
    """Raise ``AssertionError`` listing every problem unless ``body`` is valid: accepted by
    the SDK judge *and* keeping the service rules the SDK types do not encode
    (:mod:`service_rules`; with ``model``, those that depend on it too). ``endpoint``:
    the provider's endpoint the body is for (``""``: its default one)."""
    problems = judge(provider, body, endpoint=endpoint)
    if problems:
        listing = "\n  ".join(problems)
        raise AssertionError(f"{provider} body rejected by the SDK judge:\n  {listing}")
    assert_accepted(provider, body, model, endpoint)
