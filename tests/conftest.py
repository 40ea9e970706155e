from __future__ import annotations

import gc
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "long", max_examples=10_000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def _frozen_heap() -> None:
    """Before each test, move what the session holds (imported modules, the SDKs,
    module-scoped fixtures and caches) out of the collector's way (``gc.freeze``).

    verify, replay and the bench call ``gc.collect()`` between their phases (e.g.
    ``core.memory.release_freed_memory`` once per provider pass); in a test worker each
    full collection walked every object of the session, 0.3 s at the start (the SDK
    imports alone) and more as the session grew: that was two thirds of
    ``test_golden.py``'s CPU time (52 s of user time, 18 s with this). What the test
    itself makes is not frozen, so its collections, weak references and
    ``gc.DEBUG_SAVEALL`` checks see exactly what they saw before. The young generations
    are collected first (cheap), so the last test's short-lived cycles are not frozen
    with the rest."""
    gc.collect(1)
    gc.freeze()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A spec root made by ``prefixlock init`` (the starter case's golden files
    written), the current directory."""
    from prefixlock.cli.commands import main

    root = tmp_path / "agent"
    assert main(["init", str(root), "--name", "cursor"]) == 0
    monkeypatch.chdir(root)
    return root


# -- PostgreSQL: a fresh database per session, a fresh schema per test ------------------


#: Points the PostgreSQL tests at a server (any database there; the tests create their own).
POSTGRES_ENV = "PREFIXLOCK_TEST_POSTGRES_URL"
DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def _with_database(url: str, database: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{database}"))


def _with_search_path(url: str, schema: str) -> str:
    parts = urlsplit(url)
    option = "options=" + quote(f"-csearch_path={schema}", safe="")
    query = f"{parts.query}&{option}" if parts.query else option
    return urlunsplit(parts._replace(query=query))


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[str]:
    """The URL of a database created for this test session (dropped after), or a skip."""
    try:
        import psycopg
    except ModuleNotFoundError:
        pytest.skip(
            f"psycopg is not installed (pip install 'prefixlock[postgres]'); {POSTGRES_ENV}"
        )
    admin_url = os.environ.get(POSTGRES_ENV, DEFAULT_POSTGRES_URL)
    try:
        admin = psycopg.connect(admin_url, autocommit=True, connect_timeout=3)
    except psycopg.Error:
        pytest.skip(f"no PostgreSQL server reachable; set {POSTGRES_ENV} to run these tests")
    name = f"prefixlock_test_{secrets.token_hex(6)}"
    with admin:
        admin.execute(f"CREATE DATABASE {name}")  # type: ignore[arg-type]
    try:
        yield _with_database(admin_url, name)
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")  # type: ignore[arg-type]


@pytest.fixture
def postgres_url(postgres_database: str) -> str:
    """A URL whose tables live in a schema of their own: every test starts empty."""
    import psycopg

    schema = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(postgres_database, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")  # type: ignore[arg-type]
    return _with_search_path(postgres_database, schema)


@pytest.fixture(params=["whole", "sections"])
def context_updates(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run a test under each ``context_updates`` mode: ``conv_helpers.example_bundle()``
    (and so ``open_conv``) builds the example with it."""
    import conv_helpers

    conv_helpers.CURRENT_MODE.append(request.param)
    try:
        yield request.param
    finally:
        conv_helpers.CURRENT_MODE.pop()
