"""A claim that skips walks the due rows past what it skips (``webhookd._claim_walks``): one account's deep
backlog must not be walked again at every publish, or the store works in proportion to that backlog while
every other account waits (on SQLite, 100,000 rows put the writer at 88 % of a core and another account's
lag p50 from 4 ms to 167 ms)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from typing import Any

import httpx
import pytest

from svckit.clock import SystemClock
from svckit.webhook_status import DeliveryStatus, EndpointStatus
from webhookd import _queue_rows as qr
from webhookd._admission import Skips
from webhookd._claim_walks import EVERY_ROW, Walked, walk_from, walked
from webhookd._delivery import DeliveryWorker, WorkerConfig
from webhookd._memory_queue import MemoryQueue
from webhookd._repository import DeliveryRecord, EndpointRecord, SigningSecret
from webhookd._sender import Sender

EP = Skips(endpoints=("we_1",))
EP_ACCT = Skips(endpoints=("we_1",), accounts=("live:acct_1",))
DONE = Walked(EP, due_by=1_000, next_full=100.0)
CASES = [
    ("no full walk yet", None, EP, 50.0, EVERY_ROW),
    ("the same skips, before the next full walk: only what came due since", DONE, EP, 50.0, 1_000),
    ("skipping more", DONE, EP_ACCT, 50.0, 1_000),
    ("skipping less: rows it skipped may be claimed now", Walked(EP_ACCT, 1_000, 100.0), EP, 50.0, EVERY_ROW),
    ("another endpoint skipped instead", DONE, Skips(endpoints=("we_2",)), 50.0, EVERY_ROW),
    ("nothing skipped any more: what it skipped is claimable", DONE, Skips(), 50.0, EVERY_ROW),
    ("nothing skipped then or now (what it left was held back by ordering)", Walked(Skips(), 1_000, 100.0),
     Skips(), 50.0, 1_000),
    ("the next full walk is due (a hand-back due earlier, a freed ordered row)", DONE, EP, 100.0, EVERY_ROW),
]  # fmt: skip


@pytest.mark.parametrize(("why", "last", "skipped", "now", "expected"), CASES, ids=[c[0] for c in CASES])
def test_walk_from(why: str, last: Walked | None, skipped: Skips, now: float, expected: int) -> None:
    assert walk_from(last, skipped, now) == expected, why


@pytest.mark.parametrize(
    ("took", "poll", "next_full"),
    [(0.001, 0.25, 10.25), (0.5, 0.25, 15.0)],
    ids=["a quick walk: again a poll later", "a slow walk: full walks take at most a tenth of the time"],
)
def test_walked(took: float, poll: float, next_full: float) -> None:
    last = walked(EP, 7, 10.0 - took, took, poll)
    assert (last.skips, last.due_by) == (EP, 7)
    assert last.next_full == pytest.approx(next_full)


T0 = dt.datetime(2026, 5, 1, 8, 0, tzinfo=dt.UTC)
BACKLOG = 300


class CountingQueue(MemoryQueue):
    """Counts the due rows each claim's range holds (``after`` < due <= now): what a store walks of the due
    index (the skips are filtered row by row, the range is the index's)."""

    walked = 0

    def _claim(self, params: tuple[Any, ...]) -> qr.Claimed:
        now, after = params[2], params[-2]
        self.walked += sum(1 for p in self.pending.values() if after < p["next_attempt_at"] <= now)
        return super()._claim(params)


def _endpoint(n: int, account: str) -> EndpointRecord:
    url = f"https://hooks.example.com/{n}"
    return EndpointRecord(f"we_{n}", account, "live", url, ["booking.confirmed"], "", EndpointStatus.ENABLED,
                          "", T0, T0, [SigningSecret("whsec_" + "A" * 44)])  # fmt: skip


async def _fan_out(
    queue: MemoryQueue, endpoint: EndpointRecord, first: int, n: int, due: dt.datetime, key: str | None = None
) -> None:
    rows = [
        DeliveryRecord(
            f"msg_{i}",
            f"evt_{i}",
            endpoint.id,
            endpoint.account_id,
            "live",
            "booking.confirmed",
            DeliveryStatus.PENDING,
            0,
            0,
            due,
            T0,
            T0,
            ordering_key=key,
            event_seq=i if key else None,
        )
        for i in range(first, first + n)
    ]
    for d in rows:
        queue.add_event(d.event_id, json.dumps({"id": d.event_id}).encode())
    await queue.fan_out(rows)


async def _publishing_beside(
    queue: CountingQueue, config: WorkerConfig, slow: float, slow_sends: int = 0
) -> list[str]:
    """The worker runs while the other account (endpoint 2) publishes ten deliveries, each with a wake (as
    a publish does), and until endpoint 1, answering in ``slow`` seconds, took ``slow_sends``: the paths
    sent to."""
    sent: list[str] = []
    answered = asyncio.Event()

    async def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/1":
            await asyncio.sleep(slow)
        sent.append(request.url.path)
        answered.set()
        return httpx.Response(200)

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    worker = DeliveryWorker(queue, Sender(client), SystemClock(), config)
    task = asyncio.create_task(worker.run())
    healthy = _endpoint(2, "acct_ok")
    try:
        async with asyncio.timeout(30):
            for i in range(10):
                await _fan_out(queue, healthy, BACKLOG + i, 1, dt.datetime.now(dt.UTC))
                worker.wake()
                while sent.count("/2") <= i:
                    answered.clear()
                    await answered.wait()
            while sent.count("/1") < slow_sends:
                answered.clear()
                await answered.wait()
    finally:
        await worker.stop(0)
        await task
        await client.aclose()
    return sent


def _queue(account: str) -> tuple[CountingQueue, EndpointRecord]:
    queue = CountingQueue()
    backlog = _endpoint(1, account)
    queue.add_endpoint(backlog)
    queue.add_endpoint(_endpoint(2, "acct_ok"))
    return queue, backlog


async def test_publishes_do_not_walk_another_accounts_backlog_again() -> None:
    queue, hanging = _queue("acct_slow")
    await _fan_out(queue, hanging, 0, BACKLOG, T0)  # long due: the head of the due index
    # It never answers (it holds its fill); a poll far off: each full walk is the worker's own (the cycle
    # after a publish must not be one).
    config = WorkerConfig(per_endpoint=2, poll_seconds=30.0, idle_max_seconds=30.0)
    sent = await _publishing_beside(queue, config, slow=3600)
    # Every one sent; the backlog walked by one full walk (two at most: one may start as the first
    # claims take the endpoint's fill), not again at each of the ten publishes.
    assert sent.count("/2") == 10
    assert queue.walked < 3 * BACKLOG, queue.walked


async def test_an_ordered_backlog_is_not_walked_at_every_cycle() -> None:
    # An ordered endpoint (each delivery waits for the one before it) that answers slowly: its backlog is
    # due but blocked behind its head, so no claim skips it, and every claim walked all of it; each of its
    # answers frees the next one, which the claim after it takes without a walk.
    queue, ordered = _queue("acct_ordered")
    await _fan_out(queue, ordered, 0, BACKLOG, T0, key="booking_1")
    config = WorkerConfig(poll_seconds=30.0, idle_max_seconds=30.0)
    sent = await _publishing_beside(queue, config, slow=0.01, slow_sends=20)
    assert sent.count("/2") == 10
    assert queue.walked < 3 * BACKLOG, queue.walked
    done = [d for d in queue.deliveries.values() if d["endpoint_id"] == "we_1" and d["status"] == "succeeded"]
    assert sorted(d["event_seq"] for d in done) == list(range(len(done)))  # in order, none skipped
