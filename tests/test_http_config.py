"""prefixlock.http's configuration: retry waits, Retry-After, timeouts, URLs."""

from __future__ import annotations

import random

import pytest
from prefixlock.core.errors import UsageError
from prefixlock.http import Retry, Secret, Timeouts
from prefixlock.http.config import join_url, retry_after


def test_backoff_doubles_to_the_cap_with_jitter_from_the_seed() -> None:
    rng, twin = random.Random(3), random.Random(3)
    policy = Retry(seed=3)
    waits = [policy.backoff(n, rng) for n in range(1, 7)]
    bases = [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    assert waits == [b * (1 - 0.25 * twin.random()) for b in bases]
    assert all(0.75 * b < w <= b for w, b in zip(waits, bases, strict=True))
    assert Retry(jitter=0).backoff(3, rng) == 2.0


@pytest.mark.parametrize(
    ("headers", "wait"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after-ms": "soon", "retry-after": "9"}, 9.0),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, 10.0),
        ({"retry-after": "-1"}, None),
        ({"retry-after": "tomorrow"}, None),
        ({}, None),
    ],
)
def test_retry_after_reads_milliseconds_seconds_and_http_dates(
    headers: dict[str, str], wait: float | None
) -> None:
    now = 1445412480.0  # 07:28:00 GMT that day
    assert retry_after(headers, now) == wait


def test_bad_settings_are_usage_errors() -> None:
    with pytest.raises(UsageError) as info:
        Timeouts(read=0)
    assert str(info.value) == "timeouts.read: expected seconds above 0, got 0"
    with pytest.raises(UsageError) as info:
        Retry(max_retries=-1)
    assert str(info.value) == "retry.max_retries: expected 0 or more, got -1"
    with pytest.raises(UsageError) as info:
        Retry(jitter=2)
    assert str(info.value) == "retry.jitter: expected 0 to 1, got 2"


def test_a_base_url_with_the_version_segment_does_not_get_it_twice() -> None:
    assert join_url("https://api.openai.com/v1", "/v1/responses") == (
        "https://api.openai.com/v1/responses"
    )
    assert join_url("https://api.openai.com/", "/v1/responses") == (
        "https://api.openai.com/v1/responses"
    )
    assert join_url("https://proxy.example/v1beta", "/v1beta/models/m:generateContent") == (
        "https://proxy.example/v1beta/models/m:generateContent"
    )


def test_a_secret_never_shows_its_value() -> None:
    secret = Secret("sk-very-secret")
    assert repr(secret) == str(secret) == "Secret('***')"
    assert "sk-very-secret" not in repr([secret])
