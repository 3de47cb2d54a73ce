"""The poll queue at the storage port (``webhookd._polls``), on SQLite and PostgreSQL: concurrent polls
lease disjoint batches, a lease runs out and its batch comes back (each lease an attempt), per-booking order
across consumers, the retention, recovery and deletion; the worker's queue never sees a polled delivery."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa

from svckit.webhook_status import DeliveryOrder, DeliveryStatus, DestinationType, EndpointStatus
from webhookd._polling import Bounds, Verdict
from webhookd._repository import EndpointRecord, EventRecord, SigningSecret
from webhookd._sql import SqlRepository
from webhookd._tables import attempts, deliveries, pending, polled

T0 = dt.datetime(2026, 11, 29, 9, 0, tzinfo=dt.UTC)
SEC = dt.timedelta(seconds=1)
ACCT = "acct_polls"


async def _endpoint(
    repo: SqlRepository, eid: str, ordering: DeliveryOrder = DeliveryOrder.UNORDERED
) -> EndpointRecord:
    kinds = ["booking.confirmed", "booking.modified"]
    ep = EndpointRecord(
        eid, ACCT, "live", "", kinds, "", EndpointStatus.ENABLED, "", T0, T0,
        [SigningSecret("whsec_" + "P" * 44)], ordering=ordering, destination_type=DestinationType.POLLING,
    )  # fmt: skip
    await repo.create_endpoint(ep)
    return ep


async def _publish(repo: SqlRepository, n: int, booking: str = "", start: int = 0) -> list[str]:
    ids = []
    for i in range(start, start + n):
        kind = "booking.confirmed" if i % 2 == 0 else "booking.modified"
        data = {"booking": booking or f"bk_{i}", "product": "hotels"}
        body = json.dumps({"id": f"evt_{i:05d}", "type": kind, "data": data}).encode()
        event = EventRecord(f"evt_{i:05d}", ACCT, "live", kind, "confirmed", T0, body)
        await repo.publish(event, "", T0)
        ids.append(event.id)
    return ids


def _ids(batch_items: list[tuple[str, bytes]]) -> list[str]:
    return [json.loads(body)["id"] for _d, body in batch_items]


@pytest.fixture
async def repo(db_url: str) -> AsyncIterator[SqlRepository]:
    r = await SqlRepository.open(db_url)
    yield r
    await r.close()


async def test_concurrent_polls_lease_disjoint_batches_and_commits_end_them(repo: SqlRepository) -> None:
    ep = await _endpoint(repo, "we_disjoint")
    published = await _publish(repo, 300)
    async with repo.engine.connect() as conn:  # the worker's queue never holds a polled delivery
        assert (await conn.execute(sa.select(sa.func.count()).select_from(pending))).scalar_one() == 0
    batches = await asyncio.gather(*(repo.polls.poll(ep, Bounds(25, 60 * SEC), T0) for _ in range(12)))
    got = [i for b in batches for i in _ids(b.items)]
    assert len(got) == len(set(got)) == 300 and set(got) == set(published)
    assert len({b.cursor for b in batches}) == 12
    assert (await repo.polls.poll(ep, Bounds(25, 60 * SEC), T0 + SEC)).items == []  # all leased
    status = await repo.polls.status(ep.id, T0 + SEC)
    assert (status.pending, status.leased_batches, status.leased) == (300, 12, 300)
    assert status.last_polled_at == T0
    done = await asyncio.gather(*(repo.polls.commit(ep, b.cursor, T0 + 2 * SEC) for b in batches))
    assert [d.verdict for d in done] == [Verdict.COMMIT] * 12 and sum(d.committed for d in done) == 300
    async with repo.engine.connect() as conn:
        statuses = (await conn.execute(sa.select(deliveries.c.status, deliveries.c.attempt_count))).all()
        assert set(statuses) == {(str(DeliveryStatus.SUCCEEDED), 1)}
        assert (await conn.execute(sa.select(sa.func.count()).select_from(polled))).scalar_one() == 0
        outcomes = (await conn.execute(sa.select(attempts.c.outcome, attempts.c.attempt_number))).all()
        assert sorted(set(outcomes)) == [("succeeded", 1)] and len(outcomes) == 300
    assert (await repo.polls.status(ep.id, T0 + 3 * SEC)).pending == 0


async def test_a_lease_that_runs_out_gives_its_batch_to_the_next_poll(repo: SqlRepository) -> None:
    ep = await _endpoint(repo, "we_lease")
    published = await _publish(repo, 4)
    first = await repo.polls.poll(ep, Bounds(10, 30 * SEC), T0)
    assert _ids(first.items) == published and first.expires_at == T0 + 30 * SEC
    assert (await repo.polls.poll(ep, Bounds(10, 30 * SEC), T0 + 29 * SEC)).items == []
    again = await repo.polls.poll(ep, Bounds(10, 30 * SEC), T0 + 30 * SEC)  # the lease's end: free again
    assert _ids(again.items) == published and again.cursor != first.cursor
    late = await repo.polls.commit(ep, first.cursor, T0 + 31 * SEC)
    assert late.verdict is Verdict.EXPIRED and late.expires_at == T0 + 30 * SEC
    assert (await repo.polls.commit(ep, again.cursor, T0 + 31 * SEC)).committed == 4
    twice = await repo.polls.commit(ep, again.cursor, T0 + 99 * SEC)
    assert (twice.verdict, twice.committed) == (Verdict.ALREADY, 4)
    async with repo.engine.connect() as conn:
        rows = (
            await conn.execute(
                sa.select(
                    attempts.c.attempt_number, attempts.c.outcome, attempts.c.error, attempts.c.latency_ms
                )
            )
        ).all()
    assert sorted((r[0], r[1]) for r in rows) == [(1, "timeout")] * 4 + [(2, "succeeded")] * 4
    assert {r.latency_ms for r in rows} == {30_000.0, 1_000.0}  # how long each lease held the batch
    assert {r.error for r in rows if r.outcome == "timeout"} == {"lease expired without a commit"}


async def test_an_ordered_endpoint_holds_a_booking_back_across_consumers(repo: SqlRepository) -> None:
    ep = await _endpoint(repo, "we_ordered", DeliveryOrder.PER_RESOURCE)
    a = await _publish(repo, 3, booking="bk_a")  # evt_00000..2
    b = await _publish(repo, 2, booking="bk_b", start=3)  # evt_00003..4
    one = Bounds(1, 60 * SEC)
    first = await repo.polls.poll(ep, one, T0)
    second = await repo.polls.poll(ep, one, T0)
    assert _ids(first.items) == a[:1] and _ids(second.items) == b[:1]  # not bk_a's second event
    assert (await repo.polls.poll(ep, one, T0)).items == []  # each booking's head is leased
    await repo.polls.commit(ep, first.cursor, T0 + SEC)
    assert _ids((await repo.polls.poll(ep, Bounds(10, 60 * SEC), T0 + SEC)).items) == a[1:]  # in order


async def test_retention_fails_what_waited_too_long_and_recovery_brings_it_back(repo: SqlRepository) -> None:
    ep = await _endpoint(repo, "we_retention")
    published = await _publish(repo, 3)
    leased = await repo.polls.poll(ep, Bounds(1, 60 * SEC), T0)
    assert await repo.polls.expire(T0 - SEC, T0) == 0  # created at T0: inside the retention
    assert await repo.polls.expire(T0 + SEC, T0 + 2 * SEC) == 3
    assert (await repo.polls.commit(ep, leased.cursor, T0 + 3 * SEC)).committed == 0  # nothing left in it
    async with repo.engine.connect() as conn:
        assert set((await conn.execute(sa.select(deliveries.c.status))).scalars()) == {"failed"}
    assert await repo.recoverable(ep, None) == 3
    assert await repo.recover(ep, None, T0 + 4 * SEC) == 3
    assert _ids((await repo.polls.poll(ep, Bounds(10, 60 * SEC), T0 + 5 * SEC)).items) == published


async def test_a_deleted_endpoints_queue_goes_and_its_deliveries_fail(repo: SqlRepository) -> None:
    ep = await _endpoint(repo, "we_deleted")
    await _publish(repo, 2)
    await repo.delete_endpoint(ep, T0 + SEC)
    async with repo.engine.connect() as conn:
        assert (await conn.execute(sa.select(sa.func.count()).select_from(polled))).scalar_one() == 0
        assert set((await conn.execute(sa.select(deliveries.c.status))).scalars()) == {"failed"}
