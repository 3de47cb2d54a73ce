"""Each queue reads on a connection of its own: a read's walk (the queue gauges' count of expired
leases walks every due row: 14 ms for 40,000, a third of a second for a million, every 5 s) never holds up
the worker's cycle, which writes results and claims on the writer's connection (SQLite: its one thread), and
a long write never holds up a read (readers see the last commit and never wait for the writer)."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading

from svckit.webhook_status import EndpointStatus
from webhookd._pg_queue import PostgresQueue
from webhookd._repository import EndpointRecord, EventRecord, SigningSecret
from webhookd._sql import SqlRepository
from webhookd._sqlite_queue import SqliteQueue

T0 = dt.datetime(2026, 5, 1, 9, 0, tzinfo=dt.UTC)
ACCT = "acct_reads"


async def _repo(url: str) -> SqlRepository:
    repo = await SqlRepository.open(url)
    secrets = [SigningSecret("whsec_" + "R" * 44)]
    ep = EndpointRecord("we_reads", ACCT, "live", "https://hooks.partner.test/h", ["booking.confirmed"], "",
                        EndpointStatus.ENABLED, "", T0, T0, secrets)  # fmt: skip
    await repo.create_endpoint(ep)
    for i in range(3):
        event = EventRecord(f"evt_{i}", ACCT, "live", "booking.confirmed", "confirmed", T0, b"{}")
        await repo.publish(event, "", T0 + dt.timedelta(seconds=i))
    return repo


async def _reads(queue: SqliteQueue | PostgresQueue) -> None:
    async with asyncio.timeout(10):
        stats = await queue.stats(T0 + dt.timedelta(minutes=1))
        assert (stats.queue_depth, stats.lease_expired) == (3, 0)
        assert await queue.next_due() == T0
        assert await queue.next_due_after(T0) == T0 + dt.timedelta(seconds=1)


async def test_sqlite_reads_do_not_wait_for_the_writer(sqlite_url: str) -> None:
    repo = await _repo(sqlite_url)
    queue = repo.queue
    assert isinstance(queue, SqliteQueue)
    release = threading.Event()
    # The writer's thread busy (as with a long cycle): reads still answer, from the last commit.
    busy = asyncio.get_running_loop().run_in_executor(queue._pool, release.wait, 30)
    try:
        await _reads(queue)
    finally:
        release.set()
        await busy
        await repo.close()


async def test_postgres_reads_do_not_wait_for_a_cycle(pg_url: str) -> None:
    repo = await _repo(pg_url)
    queue = repo.queue
    assert isinstance(queue, PostgresQueue)
    try:
        async with queue._locks[True]:  # a cycle holds the writes' connection
            await _reads(queue)
    finally:
        await repo.close()
