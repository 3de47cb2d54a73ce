"""RecordRequests' batches on SQLite and PostgreSQL: a batch is filed by one statement whose text does not
depend on its size and is compiled once (a multi-row VALUES of 500 rows was compiled per call on the event
loop and stalled every other RPC behind it), and the (recorded, dropped) counts stay exact: duplicates in
a batch and request ids already filed are skipped and not counted."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import AsyncIterator

import pytest

from authsvc._model import Account, Actor
from authsvc._requestlog import MAX_BATCH, RequestFilter, RequestRecord
from authsvc._sql import SqlRepository
from svckit.db import create_engine
from svckit.vocabulary import AccountMode, AccountStatus
from tests.integration.sql_statements import Statements, starting
from tests.integration.test_auth_request_log import record as logged

NOW = dt.datetime(2026, 5, 1, 12, tzinfo=dt.UTC)


def record(n: int, account_id: str = "acct_1") -> RequestRecord:
    """test_auth_request_log's record, with a path, status, latency and time of its own per ``n`` (so a
    row read back shows every field filed)."""
    base = logged(n, NOW + dt.timedelta(microseconds=n), account_id)
    return dataclasses.replace(base, path=f"/v1/a/{n}", status=200 + n % 300, latency_ms=n)


@pytest.fixture
async def repo(db_url: str) -> AsyncIterator[SqlRepository]:
    repo = SqlRepository(create_engine(db_url))
    await repo.migrate()
    for account_id in ("acct_1", "acct_2"):
        await repo.create_account(
            Account(account_id, "P", AccountMode.A, AccountStatus.ACTIVE, (), 100, NOW, NOW),
            Actor("alice@partner.example", "192.0.2.1"),
        )
    try:
        yield repo
    finally:
        await repo.engine.dispose()


async def test_a_batch_is_one_statement_of_fixed_text_compiled_once(repo: SqlRepository) -> None:
    statements = Statements(repo.engine)
    # The first two batches may compile (one row is executed singly, several as an executemany).
    warm_up = 2
    sizes = (1, 7, 500, 500, 3)
    texts: set[str] = set()
    first = 0
    for i, size in enumerate(sizes):
        assert await repo.record_requests([record(first + n) for n in range(size)]) == (size, 0)
        first += size
        sent = statements.take()
        inserts = starting(sent, "INSERT INTO auth_requests ")
        # One round trip files the batch, whatever its size.
        assert len(inserts) == 1, inserts
        texts.add(inserts[0].text)
        if i >= warm_up:
            # Nothing the batch sends is compiled again: each statement's compiled form is the cache's.
            assert all(s.cached for s in sent), [(s.text[:80], s.cached) for s in sent]
    # The same text for 1, 7 and 500 rows: nothing in it grows with the batch.
    assert len(texts) == 1, [len(t) for t in texts]
    assert len(texts.pop()) < 1000


async def test_a_batch_counts_exactly_what_it_files(repo: SqlRepository) -> None:
    assert await repo.record_requests([record(n) for n in range(10)]) == (10, 0)
    # Overlapping the last batch (a retry), with a request id twice in the batch: each new one counted once.
    batch = [record(n) for n in range(5, 15)] + [record(12), record(13), record(100, "acct_2")]
    assert await repo.record_requests(batch) == (6, 0)
    assert await repo.record_requests(batch) == (0, 0)
    rows = await repo.list_requests("acct_1", None, RequestFilter(), 100, None)
    assert sorted(r.request_id for r in rows) == [f"req_{n:024x}" for n in range(15)]
    # What is read back is what was filed, field for field.
    assert {r.request_id: r for r in rows}[record(7).request_id] == record(7)


async def test_a_full_batch_under_the_daily_bound(repo: SqlRepository) -> None:
    batch = [record(n) for n in range(MAX_BATCH)]
    assert await repo.record_requests(batch, bound=MAX_BATCH - 10) == (MAX_BATCH - 10, 10)
    assert await repo.record_requests(batch, bound=MAX_BATCH - 10) == (0, MAX_BATCH)
    rows = await repo.list_requests("acct_1", None, RequestFilter(), MAX_BATCH, None)
    assert len(rows) == MAX_BATCH - 10
