"""The delivery worker with nothing to do backs off (``svckit.idlewait``), and never past what it knows:
a delivery's due time ends the wait, a wake (a publish here) starts the backoff over, and due rows it could
not claim keep the short waits."""

from __future__ import annotations

import asyncio
import datetime as dt
import json

import httpx

from svckit.clock import FakeClock
from svckit.webhook_status import DeliveryStatus, EndpointStatus
from webhookd._delivery import DeliveryWorker, WorkerConfig
from webhookd._memory_queue import MemoryQueue
from webhookd._queues import new_queue
from webhookd._repository import DeliveryRecord, EndpointRecord, SigningSecret
from webhookd._sender import Sender

NOW = dt.datetime(2026, 5, 1, 8, 0, tzinfo=dt.UTC)


def _delivery(n: int, due: dt.datetime) -> DeliveryRecord:
    return DeliveryRecord(f"msg_{n}", f"evt_{n}", "we_1", "acct_1", "live", "booking.confirmed",
                          DeliveryStatus.PENDING, 0, 0, due, NOW, NOW)  # fmt: skip


def _queue(*due: dt.datetime) -> MemoryQueue:
    queue = new_queue(None)
    assert isinstance(queue, MemoryQueue)
    queue.add_endpoint(EndpointRecord("we_1", "acct_1", "live", "https://hooks.example.com/h",
                                      ["booking.confirmed"], "", EndpointStatus.ENABLED, "", NOW, NOW,
                                      [SigningSecret("whsec_" + "A" * 44)]))  # fmt: skip
    rows = [_delivery(n, at) for n, at in enumerate(due)]
    for d in rows:
        queue.add_event(d.event_id, json.dumps({"id": d.event_id}).encode())
    asyncio.run(queue.fan_out(rows))
    return queue


def _waits(worker: DeliveryWorker, looks: list[bool]) -> list[float]:
    """The wait after each idle look (True: that look's claim found something)."""
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    worker._sleep = sleep  # type: ignore[method-assign]

    async def run() -> None:
        for claimed in looks:
            await worker._idle(NOW, claimed=claimed)

    asyncio.run(run())
    return waits


def _worker(queue: MemoryQueue) -> DeliveryWorker:
    config = WorkerConfig(poll_seconds=0.25, idle_max_seconds=5.0)
    return DeliveryWorker(queue, Sender(httpx.AsyncClient()), FakeClock(NOW), config)


def test_nothing_queued_doubles_the_wait_up_to_the_most() -> None:
    worker = _worker(_queue())
    assert _waits(worker, [False] * 8) == [0.25, 0.5, 1.0, 2.0, 4.0, 5.0, 5.0, 5.0]


def test_a_wake_or_a_claim_starts_over() -> None:
    worker = _worker(_queue())
    _waits(worker, [False] * 6)
    worker.wake()
    assert _waits(worker, [False, False]) == [0.25, 0.5]
    assert _waits(worker, [True, False]) == [0.25, 0.25]  # found work: the next empty look is the first


def test_the_next_due_time_ends_the_wait() -> None:
    worker = _worker(_queue(NOW + dt.timedelta(seconds=3)))
    assert _waits(worker, [False] * 6) == [0.25, 0.5, 1.0, 2.0, 3.0, 3.0]


def test_due_rows_not_claimed_are_no_idle_spell() -> None:
    # Due now yet not claimed (locked by another process): the short wait, whatever came before.
    worker = _worker(_queue(NOW))
    worker._empty = 6
    assert _waits(worker, [False, False]) == [0.01, 0.01]
    assert worker._empty == 0


def test_a_most_at_the_poll_keeps_the_plain_poll() -> None:
    queue = _queue()
    config = WorkerConfig(poll_seconds=0.25, idle_max_seconds=0.25)
    worker = DeliveryWorker(queue, Sender(httpx.AsyncClient()), FakeClock(NOW), config)
    assert _waits(worker, [False] * 4) == [0.25] * 4
