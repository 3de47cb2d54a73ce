"""authsvc's last_used_at flush (authsvc._lastused) on SQLite and PostgreSQL: a flush of many keys is one
statement, compiled once, sent as one executemany (it was one UPDATE built and awaited per key, holding
SQLite's write lock across as many round trips), and a stored later use is never moved back."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator

import pytest

from authsvc._model import Account, Actor, ApiKey
from authsvc._sql import SqlRepository
from svckit.db import create_engine
from svckit.vocabulary import AccountMode, AccountStatus, Environment
from tests.integration.sql_statements import Statements, starting

NOW = dt.datetime(2026, 5, 1, 12, tzinfo=dt.UTC)
ACTOR = Actor("alice@partner.example", "192.0.2.1")
KEYS = 40


def key_id(n: int) -> str:
    return f"key_{n:024x}"


@pytest.fixture
async def repo(db_url: str) -> AsyncIterator[SqlRepository]:
    repo = SqlRepository(create_engine(db_url))
    await repo.migrate()
    await repo.create_account(
        Account("acct_1", "P", AccountMode.A, AccountStatus.ACTIVE, (), 100, NOW, NOW), ACTOR
    )
    for n in range(KEYS):
        await repo.create_key(
            ApiKey(key_id(n), "acct_1", Environment.LIVE, "k", ("hotels:read",), (), "...abcd", f"h{n}", NOW),
            ACTOR,
        )
    try:
        yield repo
    finally:
        await repo.engine.dispose()


async def test_a_flush_of_many_keys_is_one_executemany_compiled_once(repo: SqlRepository) -> None:
    statements = Statements(repo.engine)
    for round_ in range(3):
        at = NOW + dt.timedelta(seconds=round_ + 1)
        await repo.flush_last_used({key_id(n): at for n in range(KEYS)})
        updates = starting(statements.take(), "UPDATE auth_keys ")
        assert [u.rows for u in updates] == [KEYS]
        if round_:
            assert updates[0].cached
    for n in (0, KEYS - 1):
        assert (await repo.get_key(key_id(n))).last_used_at == NOW + dt.timedelta(seconds=3)


async def test_a_flush_never_moves_a_later_use_back(repo: SqlRepository) -> None:
    later, earlier = NOW + dt.timedelta(minutes=5), NOW + dt.timedelta(minutes=1)
    await repo.flush_last_used({key_id(0): later})
    # Another process's flush, behind: key 0 keeps its later use, key 1 gets its first, an unknown key is
    # skipped.
    await repo.flush_last_used({key_id(0): earlier, key_id(1): earlier, "key_unknown": earlier})
    assert (await repo.get_key(key_id(0))).last_used_at == later
    assert (await repo.get_key(key_id(1))).last_used_at == earlier
    assert (await repo.get_key(key_id(2))).last_used_at is None
