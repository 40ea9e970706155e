"""Bedrock accepts a one-hour cache TTL on some models only (issue 15, simulator truth
and bodies the service accepts): ``cachePoint.ttl: "1h"`` on any other model is a
ValidationException, so ``cache_ttl: 1h`` / ``turn`` with such a model is refused at
build time (file, line, column, field path) and by ``serialize``; the cache simulator
never prices a body the service would refuse.

The service's texts (providers/bedrock_converse.py, ``one_hour_ttl_refusal``):
earendil-works/pi#1570 ("Extra inputs are not permitted" for Claude before 4.5,
"Extended TTL prompt caching is only supported for Anthropic models" for Nova),
timothy-agent/timothy#756 (the Nova ValidationException, quoted)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import attrs
import pytest
from conv_helpers import open_conv, user
from prefixlock import providers
from prefixlock.cache.rules import rules_for
from prefixlock.cache.simulator import simulate
from prefixlock.cli.commands import main
from prefixlock.core import canonical
from prefixlock.core.errors import CacheSimulationError, SerializationError
from prefixlock.core.limits import one_hour_ttl_refusal
from prefixlock.core.model import ModelRequest
from provider_cases import providers_yaml_errors, spec_with_providers

BEDROCK = "bedrock-converse"
OLD_CLAUDE = (
    "Bedrock accepts cachePoint ttl '1h' on Claude Sonnet 4.5, Haiku 4.5, Opus 4.5 and "
    "later only; on {model!r} the service refuses it ('Extra inputs are not permitted')"
)
NOT_ANTHROPIC = (
    "Bedrock accepts cachePoint ttl '1h' on Anthropic models only; on {model!r} the "
    "service refuses it ('Extended TTL prompt caching is only supported for Anthropic "
    "models')"
)


@pytest.mark.parametrize(
    "model",
    [
        "anthropic.claude-sonnet-4-5-20250929-v1:0",
        "us.anthropic.claude-haiku-4-5-20251001-v1:0",
        "global.anthropic.claude-opus-4-5-20251101-v1:0",
        "anthropic.claude-opus-4-6-v1",
        "eu.anthropic.claude-sonnet-4-6",
        "anthropic.claude-opus-5-v1:0",
        "anthropic.claude-opus-5-5",
        "anthropic.claude-mythos-preview",  # no version to judge: the service decides
        # opaque: an application inference profile, a provisioned or imported model
        "arn:aws:bedrock:us-east-1:111122223333:application-inference-profile/a1b2c3d4",
        "arn:aws:bedrock:us-east-1:111122223333:provisioned-model/xyz",
        # a system inference profile's ARN names its model
        "arn:aws:bedrock:us-east-1:111122223333:inference-profile/us.anthropic.claude-sonnet-4-5-20250929-v1:0",
    ],
)
def test_the_models_that_take_a_one_hour_ttl(model: str) -> None:
    assert one_hour_ttl_refusal(model) is None


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("anthropic.claude-3-7-sonnet-20250219-v1:0", OLD_CLAUDE),
        ("us.anthropic.claude-3-5-haiku-20241022-v1:0", OLD_CLAUDE),
        ("anthropic.claude-3-5-sonnet-20241022-v2:0", OLD_CLAUDE),
        ("anthropic.claude-3-haiku-20240307-v1:0", OLD_CLAUDE),
        ("anthropic.claude-sonnet-4-20250514-v1:0", OLD_CLAUDE),
        ("us.anthropic.claude-opus-4-20250514-v1:0", OLD_CLAUDE),
        ("anthropic.claude-opus-4-1-20250805-v1:0", OLD_CLAUDE),
        ("anthropic.claude-v2:1", OLD_CLAUDE),
        ("anthropic.claude-instant-v1", OLD_CLAUDE),
        (
            "arn:aws:bedrock:us-east-1:111122223333:inference-profile/us.anthropic.claude-sonnet-4-20250514-v1:0",
            OLD_CLAUDE,
        ),
        ("amazon.nova-pro-v1:0", NOT_ANTHROPIC),
        ("us.amazon.nova-2-lite-v1:0", NOT_ANTHROPIC),
        ("meta.llama3-3-70b-instruct-v1:0", NOT_ANTHROPIC),
    ],
)
def test_the_models_that_refuse_it(model: str, message: str) -> None:
    assert one_hour_ttl_refusal(model) == message.format(model=model)


def _request(model: str, **options: str) -> ModelRequest:
    request = open_conv().handle(user("u1"))
    settings = tuple(
        attrs.evolve(s, model=model, options=canonical.dumps({**s.options_value, **options}))
        if s.provider == BEDROCK
        else s
        for s in request.settings
    )
    return attrs.evolve(request, settings=settings)


@pytest.mark.parametrize("ttl", ["1h", "auto", "turn"])
def test_serialize_refuses_a_one_hour_ttl_on_a_model_that_refuses_it(ttl: str) -> None:
    model = "anthropic.claude-3-7-sonnet-20250219-v1:0"
    wire = providers.get(BEDROCK)
    expected = (
        f"bedrock-converse: settings options.cache_ttl: {ttl!r} asks for one-hour cache "
        "entries: " + OLD_CLAUDE.format(model=model)
    )
    with pytest.raises(SerializationError) as info:
        wire.serialize(_request(model, cache_ttl=ttl))
    assert str(info.value) == expected
    with pytest.raises(SerializationError):
        list(wire.fragments(_request(model, cache_ttl=ttl)))
    # the default TTL is fine on that model (the example itself sets auto), and 1h on a
    # model that takes it
    wire.serialize(_request(model, cache_ttl="5m"))
    wire.serialize(_request("anthropic.claude-sonnet-4-5-20250929-v1:0", cache_ttl=ttl))


def test_the_build_names_the_file_line_column_and_field_of_every_such_option(
    tmp_path: Path,
) -> None:
    errors = providers_yaml_errors(
        tmp_path,
        "providers:\n"
        "  anthropic: {model: claude-sonnet-4-5, max_tokens: 4096, options: {cache_ttl: 1h}}\n"
        "  bedrock-converse:\n"
        "    model: amazon.nova-pro-v1:0\n"
        "    max_tokens: 4096\n"
        "    options:\n"
        "      cache_ttl: turn\n",
    )
    assert errors == [
        'rules/providers.yaml:7:18: $.providers["bedrock-converse"].options.cache_ttl: '
        "'turn' asks for one-hour cache entries: "
        + NOT_ANTHROPIC.format(model="amazon.nova-pro-v1:0")
    ]


def test_prefixlock_build_exits_2_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = "anthropic.claude-opus-4-1-20250805-v1:0"
    root = spec_with_providers(
        tmp_path,
        f"providers:\n  bedrock-converse:\n    model: {model}\n    max_tokens: 4096\n"
        "    options: {cache_ttl: 1h}\n",
    )
    out = tmp_path / "out"
    assert main(["build", "--root", str(root), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert (
        'rules/providers.yaml:5:26: $.providers["bedrock-converse"].options.cache_ttl: '
        "'1h' asks for one-hour cache entries: " + OLD_CLAUDE.format(model=model)
    ) in err
    assert not out.exists()


def test_the_simulator_refuses_a_one_hour_body_for_such_a_model_and_prices_none() -> None:
    old = "anthropic.claude-3-7-sonnet-20250219-v1:0"
    new = "anthropic.claude-sonnet-4-5-20250929-v1:0"
    assert rules_for(BEDROCK, old).write_multiplier_1h is None
    assert rules_for(BEDROCK, new).write_multiplier_1h == Fraction(2)
    assert rules_for("anthropic", "claude-3-7-sonnet-20250219").write_multiplier_1h == Fraction(2)
    body = providers.get(BEDROCK).serialize(_request(new, cache_ttl="1h"))
    simulate(BEDROCK, [body], model=new)
    with pytest.raises(CacheSimulationError) as info:
        simulate(BEDROCK, [body], model=old)
    assert str(info.value) == "bedrock-converse call 1: " + OLD_CLAUDE.format(model=old)
    # the five-minute body of the same call is priced as before
    simulate(BEDROCK, [providers.get(BEDROCK).serialize(_request(old, cache_ttl="5m"))], model=old)
