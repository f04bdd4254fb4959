"""Shared fixtures: one embedded ClickHouse per test process, an empty database per test."""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from argon2 import PasswordHasher, profiles
from fastapi.testclient import TestClient
from pydantic import SecretStr

import promptrail
from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.services.accounts import passwords
from promptrail.testing import AnthropicStub, OpenAIStub, serve, serve_stub
from tests.databases import ReusableDatabase, drop_database, one_handshake_per_engine
from tests.keys import ANTHROPIC_KEY, DEFAULT_AUTH, DEFAULT_KEY, OPENAI_KEY
from tests.rewrite_ahead import rewrite_ahead, run_sources

pytest_plugins = ["tests.capture"]

# Where a run's temporary directories go when neither --basetemp nor PYTEST_DEBUG_TEMPROOT says.
MEMORY = Path("/dev/shm")
TIKTOKEN_CACHE = Path(__file__).resolve().parent.parent / ".cache" / "tiktoken"


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``cost`` marker; keep the run's files (the embedded stores above all) in
    memory when there is a tmpfs.

    Every insert writes parts and every TRUNCATE between tests deletes them: on this machine's
    disk that was 10-40 ms a table, on a tmpfs 2 ms (docs/architecture.md, "Tests").
    pytest-xdist hands each worker a directory under the controller's, so this runs first.
    """
    if (
        config.option.basetemp is None
        and "PYTEST_DEBUG_TEMPROOT" not in os.environ
        and MEMORY.is_dir()
        and os.access(MEMORY, os.W_OK)
    ):
        os.environ["PYTEST_DEBUG_TEMPROOT"] = str(MEMORY)
    # tiktoken's encodings as `make install` left them (tools/tiktoken_cache.py): a test run
    # started without make still counts tokens offline.
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(TIKTOKEN_CACHE))
    # A cost guard asserts how a right answer is reached (the SQL run, the number of queries or
    # store calls), so a refactor can tell a slower plan from a wrong answer (tests/README.md).
    config.addinivalue_line(
        "markers", "cost: a cost guard: asserts the SQL run or how many queries or calls it takes"
    )
    config.addinivalue_line(
        "markers", "real_password_cost: the collectors of the test hash passwords at full cost"
    )
    # The controller of a run with workers (`make test`'s `-n 3`) rewrites the test modules'
    # asserts once for all of them (tests/rewrite_ahead.py); xdist starts the workers later.
    distributed = config.getoption("dist", "no") != "no" and config.getoption("tx", None)
    if (
        distributed
        and not hasattr(config, "workerinput")
        and not config.getoption("collectonly")
        and config.getoption("assertmode") == "rewrite"
    ):
        rewrite_ahead(config, run_sources(config))


@pytest.fixture(autouse=True)
def private_cache_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every test (and the processes it starts) keeps the SDK's disk cache in a directory of its
    own, never the user's: no spool or template of one test is seen by another, and a run
    leaves nothing under ~/.cache/promptrail."""
    monkeypatch.setenv("PROMPTRAIL_CACHE_DIR", str(tmp_path_factory.mktemp("promptrail-cache")))


# Argon2id with the shape of RFC 9106's second recommended set (16-byte salt, 32-byte hash) and
# the least work argon2 allows, as argon2-cffi's own CHEAPEST profile is meant for tests.
CHEAP_PASSWORD_HASHES = dataclasses.replace(
    profiles.RFC_9106_LOW_MEMORY, time_cost=1, memory_cost=8, parallelism=1
)


@pytest.fixture(autouse=True)
def cheap_password_hashes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The collectors a test runs in its own process hash passwords with the least work.

    The product's Argon2id (64 MiB, 3 passes, 4 lanes) costs about 0.17 s of CPU a hash or
    check here, on purpose, and the accounts and console tests make and check hundreds of
    passwords: most of their time went there (a test of members and roles: 1.7 -> 0.4 s of
    CPU). A check reads the cost from the stored hash, so a cheap hash is a cheap check. The
    product's own cost is asserted where it is the point (tests marked ``real_password_cost``),
    and the ``promptrail`` processes a test starts hash at full cost.
    """
    if request.node.get_closest_marker("real_password_cost") is None:
        monkeypatch.setattr(
            passwords,
            "PasswordHasher",
            lambda: PasswordHasher.from_parameters(CHEAP_PASSWORD_HASHES),
        )


@pytest.fixture(scope="session", autouse=True)
def embedded_handshake_once() -> Iterator[None]:
    """The in-process engine's clients share one driver handshake (see tests/databases.py)."""
    with one_handshake_per_engine():
        yield


@pytest.fixture(scope="session")
def store_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The session's embedded store (chDB allows one data path per process)."""
    path: Path = tmp_path_factory.mktemp("chdb")
    return f"chdb://{path}"


@pytest.fixture(scope="session")
def reusable_database(store_url: str) -> Iterator[ReusableDatabase]:
    """The test process's migrated database, emptied for each test (see tests/databases.py)."""
    database = ReusableDatabase(store_url, f"t_{uuid.uuid4().hex[:16]}")
    yield database
    database.close()


@pytest.fixture
def settings(
    reusable_database: ReusableDatabase, store_url: str, tmp_path: Path
) -> Iterator[Settings]:
    """Settings for a collector on a migrated, empty database of its own for the test."""
    settings = Settings(
        clickhouse_url=store_url,
        database=reusable_database.checkout(),
        data_dir=tmp_path,
        init_api_key=DEFAULT_KEY,
    )
    yield settings
    reusable_database.checkin()


@pytest.fixture
def fresh_settings(store_url: str, tmp_path: Path) -> Iterator[Settings]:
    """Settings naming a database that does not exist yet (for tests of migrations themselves)."""
    settings = Settings(
        clickhouse_url=store_url,
        database=f"t_{uuid.uuid4().hex[:16]}",
        data_dir=tmp_path,
        init_api_key=DEFAULT_KEY,
    )
    yield settings
    drop_database(store_url, settings.database)


@pytest.fixture
def api(settings: Settings) -> Iterator[TestClient]:
    """A collector app over real HTTP semantics (ASGI), authenticated as project default."""
    app = create_app(settings)
    with TestClient(app, headers=DEFAULT_AUTH) as client:
        yield client


@pytest.fixture
def live_url(settings: Settings) -> Iterator[str]:
    """A collector on a real socket (uvicorn in a thread), for concurrency over HTTP."""
    with serve(create_app(settings)) as url:
        yield url


@pytest.fixture
def sdk(live_url: str) -> Iterator[promptrail.Client]:
    """The SDK's REST client of the live collector (``live_url``), as project default."""
    with promptrail.Client(api_key=DEFAULT_KEY, base_url=live_url) as client:
        yield client


@pytest.fixture(scope="session")
def openai_server() -> Iterator[OpenAIStub]:
    """One OpenAI wire-format stub on a real socket for the session (reset per test)."""
    with serve_stub(OpenAIStub()) as stub:
        yield stub


@pytest.fixture(scope="session")
def anthropic_server() -> Iterator[AnthropicStub]:
    """One Anthropic wire-format stub on a real socket for the session (reset per test)."""
    with serve_stub(AnthropicStub()) as stub:
        yield stub


@pytest.fixture
def openai_stub(openai_server: OpenAIStub) -> OpenAIStub:
    """The OpenAI stub with a fresh script and call log."""
    openai_server.reset()
    return openai_server


@pytest.fixture
def anthropic_stub(anthropic_server: AnthropicStub) -> AnthropicStub:
    """The Anthropic stub with a fresh script and call log."""
    anthropic_server.reset()
    return anthropic_server


# Short enough to keep the timeout test quick, long enough for a loaded 2-core machine.
READ_TIMEOUT = 1.5


@pytest.fixture
def run_settings(
    settings: Settings, openai_stub: OpenAIStub, anthropic_stub: AnthropicStub
) -> Settings:
    """Collector settings whose providers are the stubs, with quick timeouts and backoff."""
    return settings.model_copy(
        update={
            "openai_base_url": f"{openai_stub.url}/v1",
            "openai_api_key": SecretStr(OPENAI_KEY),
            "anthropic_base_url": anthropic_stub.url,
            "anthropic_api_key": SecretStr(ANTHROPIC_KEY),
            "provider_read_timeout": READ_TIMEOUT,
            "provider_retry_base_delay": 0.01,
            "provider_retry_max_delay": 0.05,
        }
    )


@pytest.fixture
def runs_url(run_settings: Settings) -> Iterator[str]:
    """A collector on a real socket whose runs go to the stubs."""
    with serve(create_app(run_settings)) as url:
        yield url
