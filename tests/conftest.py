from __future__ import annotations

import asyncio
import pathlib
import signal
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING

import pytest
import redis.asyncio as aioredis

from tests.support import REDIS_URL

if TYPE_CHECKING:
    from authsvc import AuthServer
    from webhookd._server import Webhookd

# Started as a background job (`scripts/test &`, nohup) the suite inherits SIGINT, SIGQUIT and SIGHUP
# ignored, and so would every process it starts: `svc listen`, stopped by Ctrl-C in its test, then never
# stops. The suite and its children take these signals as a terminal's foreground job would.
for _sig, _default in (
    (signal.SIGINT, signal.default_int_handler),
    (signal.SIGQUIT, signal.SIG_DFL),
    (signal.SIGHUP, signal.SIG_DFL),
):
    if signal.getsignal(_sig) == signal.SIG_IGN:
        signal.signal(_sig, _default)

PG_HOST, PG_PORT, PG_DB = "127.0.0.1", 5432, "test"
PG_BASE = f"postgresql+asyncpg://postgres@{PG_HOST}:{PG_PORT}/{PG_DB}"


def _pg_unavailable_reason() -> str | None:
    import asyncpg

    async def probe() -> None:
        conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user="postgres", database=PG_DB, timeout=3)
        await conn.close()

    try:
        asyncio.run(probe())
    except Exception as exc:  # any failure means "no server answers"
        return f"no PostgreSQL server answers on {PG_HOST}:{PG_PORT} (database {PG_DB!r}): {exc}"
    return None


_PG_REASON: list[str | None] = []


def pg_skip_reason() -> str | None:
    if not _PG_REASON:
        _PG_REASON.append(_pg_unavailable_reason())
    return _PG_REASON[0]


def _drop_schema(schema: str) -> None:
    import asyncpg

    async def drop() -> None:
        conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user="postgres", database=PG_DB)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()

    asyncio.run(drop())


def _create_schema(schema: str) -> None:
    import asyncpg

    async def create() -> None:
        conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user="postgres", database=PG_DB)
        try:
            await conn.execute(f'CREATE SCHEMA "{schema}"')
        finally:
            await conn.close()

    asyncio.run(create())


def _pg_schema_url() -> Iterator[str]:
    """A PostgreSQL URL isolated in a fresh schema of database ``test``, dropped afterwards (the test is
    skipped when PostgreSQL is not there)."""
    reason = pg_skip_reason()
    if reason:
        pytest.skip(reason)
    schema = f"t_{uuid.uuid4().hex[:12]}"
    _create_schema(schema)
    try:
        yield f"{PG_BASE}?search_path={schema}"
    finally:
        _drop_schema(schema)


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A PostgreSQL URL isolated in a fresh schema of database ``test``, dropped afterwards."""
    yield from _pg_schema_url()


@pytest.fixture
def sqlite_url(tmp_path: pathlib.Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'test.db'}"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def module_db_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``db_url`` for a module whose tests share their processes (each test its own accounts): one SQLite
    file or PostgreSQL schema per module and backend."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('db') / 'test.db'}"
        return
    yield from _pg_schema_url()


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[str]:
    """Every storage test runs on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'test.db'}"
    else:
        yield request.getfixturevalue("pg_url")


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """One development CA per test session with a certificate per service, svcctl, the portal, a product
    service, the billing service and an identity the allow list does not know (tests.support.tls_of
    picks one)."""
    from svckit.devca import IDENTITIES, init_dir

    directory = tmp_path_factory.mktemp("pki")
    init_dir(directory, (*IDENTITIES, "product:hotels", "billing", "stranger"))
    return directory


@pytest.fixture(scope="session")
def other_pki(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """Another CA, whose certificates carry the same names: they must be refused all the same."""
    from svckit.devca import init_dir

    directory = tmp_path_factory.mktemp("other-pki")
    init_dir(directory, ("svcctl", "authsvc"))
    return directory


@pytest.fixture
async def authsvc(sqlite_url: str, pki: pathlib.Path) -> AsyncIterator[AuthServer]:
    """authsvc on port 0 with mutual TLS (its certificate from ``pki``), on a SQLite file. A test module
    may define its own ``authsvc`` fixture instead."""
    from authsvc import run_server
    from tests.support import tls_of

    server = await run_server("127.0.0.1:0", sqlite_url, tls=tls_of(pki, "authsvc"))
    try:
        yield server
    finally:
        await server.stop(0)


@pytest.fixture
async def webhookd(tmp_path: pathlib.Path, pki: pathlib.Path) -> AsyncIterator[Webhookd]:
    """webhookd on port 0 with mutual TLS, on a SQLite file, no delivery worker."""
    from tests.support import tls_of
    from webhookd._server import Config, run_server

    config = Config(
        database=f"sqlite+aiosqlite:///{tmp_path / 'w.db'}", listen="127.0.0.1:0", tls=tls_of(pki, "webhookd")
    )
    app = await run_server(config, start_worker=False)
    try:
        yield app
    finally:
        await app.stop(0)


@pytest.fixture
async def redis_prefix() -> AsyncIterator[str]:
    """A Redis key prefix of the test's own (at REDIS_URL); its keys are deleted afterwards."""
    prefix = f"test:{uuid.uuid4().hex}:"
    yield prefix
    client = aioredis.Redis.from_url(REDIS_URL)
    keys = [k async for k in client.scan_iter(match=prefix + "*")]
    if keys:
        await client.delete(*keys)
    await client.aclose()
