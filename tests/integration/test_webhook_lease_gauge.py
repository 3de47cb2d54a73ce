"""Deliveries held by a dead process, on SQLite and PostgreSQL (db_url): a claim whose lease ran out is
counted by ``webhook_deliveries_lease_expired`` and aged from when it was due by
``webhook_oldest_overdue_seconds``, until another process claims it again. The dead process is a claim
written under an owner that never records a result (as after a kill -9)."""

from __future__ import annotations

import asyncio
import datetime as dt

from svckit.clock import FakeClock
from svckit.webhook_status import EndpointStatus
from webhookd import _metrics as metrics
from webhookd._repository import EndpointRecord, EventRecord, SigningSecret
from webhookd._server import Config, housekeeping
from webhookd._sql import SqlRepository

T0 = dt.datetime(2026, 5, 1, 9, 0, tzinfo=dt.UTC)
ACCT = "acct_lease"
LEASE = dt.timedelta(seconds=60)


async def _publish(repo: SqlRepository, n: int) -> None:
    secret = SigningSecret("whsec_" + "L" * 44)
    await repo.create_endpoint(
        EndpointRecord(
            "we_lease",
            ACCT,
            "live",
            "https://hooks.partner.test/h",
            ["booking.confirmed"],
            "",
            EndpointStatus.ENABLED,
            "",
            T0,
            T0,
            [secret],
        )
    )
    for i in range(n):
        event = EventRecord(f"evt_l{i:03d}", ACCT, "live", "booking.confirmed", "confirmed", T0,
                            b'{"id":"evt_l%03d"}' % i)  # fmt: skip
        await repo.publish(event, "", T0)


async def test_expired_leases_are_counted_and_aged_from_their_due_time(db_url: str) -> None:
    repo = await SqlRepository.open(db_url)
    try:
        await _publish(repo, 3)
        claimed_at = T0 + dt.timedelta(seconds=5)
        assert len(await repo.claim_due(claimed_at, 10, claimed_at + LEASE, "wrk_dead")) == 3
        # While the lease runs the deliveries are the holder's: neither overdue nor expired.
        during = await repo.stats(claimed_at + dt.timedelta(seconds=30))
        assert (during.queue_depth, during.lease_expired, during.oldest_overdue_seconds) == (3, 0, 0.0)
        # The holder died: once the lease has run out they are overdue since they were due (T0).
        after = claimed_at + LEASE + dt.timedelta(seconds=10)
        stats = await repo.stats(after)
        assert stats.lease_expired == 3
        assert stats.oldest_overdue_seconds == (after - T0).total_seconds()
        # The housekeeping loop exports both.
        config = Config(database=db_url, stats_interval=0.01, purge_interval=3600.0)
        task = asyncio.create_task(housekeeping(repo, FakeClock(after), config))
        try:
            for _ in range(500):
                if metrics.LEASE_EXPIRED._value.get() == 3:
                    break
                await asyncio.sleep(0.01)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        assert metrics.LEASE_EXPIRED._value.get() == 3
        assert metrics.OLDEST_OVERDUE._value.get() == (after - T0).total_seconds()
        # Another process claims them again: nothing is held by the dead one any more.
        assert len(await repo.claim_due(after, 10, after + LEASE, "wrk_alive")) == 3
        again = await repo.stats(after)
        assert (again.lease_expired, again.oldest_overdue_seconds) == (0, 0.0)
    finally:
        await repo.close()
