"""The worker's cycle on the in-memory queue, by table: claim -> send -> record a success, a retry, a
disabled endpoint, a held or failed delivery.

Why without a database: the cycle's steps (``webhookd._queue``) are written once and run by every store by
statement name; ``MemoryQueue`` runs each name's Python twin, so what the worker decides and what a cycle
writes is checked here in milliseconds, and the SQL stores' own tests (``tests/integration/
test_webhook_claims.py``) only have to show that each statement does what its twin does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import time
from typing import Any

import httpx
import pytest

from svckit.clock import FakeClock
from svckit.vocabulary import AttemptOutcome
from svckit.webhook_status import DeliveryStatus, EndpointStatus
from webhookd._delivery import DeliveryWorker, WorkerConfig
from webhookd._memory_queue import MemoryQueue
from webhookd._queue_sql import STATEMENTS
from webhookd._queues import new_queue
from webhookd._repository import DeliveryRecord, DeliveryResult, EndpointRecord, SigningSecret
from webhookd._sender import Sender
from webhookd._times import us

NOW = dt.datetime(2026, 5, 1, 8, 0, tzinfo=dt.UTC)
MIN = dt.timedelta(minutes=1)
EP = "we_1"


def _endpoint(status: EndpointStatus = EndpointStatus.ENABLED) -> EndpointRecord:
    return EndpointRecord(EP, "acct_1", "live", "https://hooks.example.com/h", ["booking.confirmed"], "",
                          status, "", NOW, NOW, [SigningSecret("whsec_" + "A" * 44)])  # fmt: skip


def _delivery(
    delivery_id: str, schedule: int = 0, kind: str = "booking.confirmed", due: dt.datetime = NOW
) -> DeliveryRecord:
    return DeliveryRecord(delivery_id, f"evt_{delivery_id}", EP, "acct_1", "live", kind,
                          DeliveryStatus.PENDING, schedule, schedule, due, NOW, NOW)  # fmt: skip


def _queue(*deliveries: DeliveryRecord, endpoint: EndpointStatus = EndpointStatus.ENABLED) -> MemoryQueue:
    queue = new_queue(None)
    assert isinstance(queue, MemoryQueue)
    queue.add_endpoint(_endpoint(endpoint))
    for d in deliveries:
        queue.add_event(d.event_id, json.dumps({"id": d.event_id}).encode())
    asyncio.run(queue.fan_out(list(deliveries)))
    return queue


def _worker(queue: MemoryQueue, answer: int | None) -> DeliveryWorker:
    """A worker whose receiver answers ``answer`` (None: the connection fails)."""

    def respond(request: httpx.Request) -> httpx.Response:
        if answer is None:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(answer, text="ok" if answer < 300 else "no")

    client = httpx.AsyncClient(transport=httpx.MockTransport(respond))
    return DeliveryWorker(queue, Sender(client), FakeClock(NOW), WorkerConfig(batch_size=10), owner="wrk_1")


@dataclasses.dataclass(frozen=True)
class Case:
    """One delivery (its place in the retry schedule, its kind), the endpoint, the receiver's answer; then
    what the cycle stored."""

    schedule: int
    kind: str
    endpoint: EndpointStatus
    answer: int | None
    status: DeliveryStatus
    attempt_count: int
    next_at: dt.datetime | None
    outcome: AttemptOutcome | None  # the logged attempt's; None: nothing was sent
    endpoint_after: EndpointStatus
    alerts: int


BOOKING = "booking.confirmed"
ON, OFF = EndpointStatus.ENABLED, EndpointStatus.DISABLED
D = DeliveryStatus
O = AttemptOutcome  # noqa: E741
CASES = {
    "success": Case(0, BOOKING, ON, 200, D.SUCCEEDED, 1, None, O.SUCCEEDED, ON, 0),
    "first failure: retry in 1 min": Case(0, BOOKING, ON, 500, D.PENDING, 1, NOW + MIN, O.HTTP_ERROR, ON, 0),
    "fourth failure: retry in 2 h": Case(3, BOOKING, ON, None, D.PENDING, 4, NOW + 120 * MIN, O.NETWORK_ERROR,
                                         ON, 0),
    "success after retries": Case(5, BOOKING, ON, 204, D.SUCCEEDED, 6, None, O.SUCCEEDED, ON, 0),
    "last failure disables": Case(6, BOOKING, ON, 503, D.FAILED, 7, None, O.HTTP_ERROR, OFF, 1),
    "a test send never retries": Case(0, "webhook.test", ON, 500, D.FAILED, 1, None, O.HTTP_ERROR, ON, 0),
    "disabled endpoint: held, not sent": Case(0, BOOKING, OFF, 200, D.HELD, 0, None, None, OFF, 0),
}  # fmt: skip


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_one_cycle_claims_sends_and_records(case: Case) -> None:
    # A second delivery to the same endpoint, due later: a disabled endpoint's is held, not sent.
    queue = _queue(_delivery("msg_1", case.schedule, case.kind), _delivery("msg_2", due=NOW + 60 * MIN),
                   endpoint=case.endpoint)  # fmt: skip
    worker = _worker(queue, case.answer)
    alerts: list[object] = []
    worker.on_alerts = alerts.extend

    assert asyncio.run(worker.run_once()) == 1

    d = queue.delivery("msg_1")
    assert (d.status, d.attempt_count, d.next_attempt_at) == (case.status, case.attempt_count, case.next_at)
    assert [a["outcome"] for a in queue.attempts] == ([case.outcome.value] if case.outcome else [])
    assert queue.endpoint(EP).status == case.endpoint_after
    assert len(alerts) == len(queue.alerts) == case.alerts
    held = case.endpoint_after is OFF
    assert queue.delivery("msg_2").status == (D.HELD if held else D.PENDING)
    # The lease ends with the result: the queue row goes, or waits unleased for the retry.
    assert queue.pending.get("msg_1", {"lease_owner": None})["lease_owner"] is None
    assert ("msg_1" in queue.pending) == (case.status is D.PENDING)


def test_a_deleted_endpoints_delivery_fails_unsent() -> None:
    queue = _queue(_delivery("msg_1"))
    queue.endpoints[EP]["deleted_at"] = us(NOW)
    assert asyncio.run(_worker(queue, 200).run_once()) == 1
    assert queue.delivery("msg_1").status is D.FAILED
    assert queue.attempts == []


def test_a_result_counts_only_while_its_lease_is_held() -> None:
    queue = _queue(_delivery("msg_1"))
    [claim] = asyncio.run(queue.claim_due(NOW, 10, NOW + MIN, "wrk_a"))
    assert asyncio.run(queue.claim_due(NOW, 10, NOW + MIN, "wrk_b")) == []  # leased: not due again
    late = DeliveryResult("msg_1", EP, None, D.SUCCEEDED, None, counts_attempt=True)
    asyncio.run(queue.record_outcomes([late], "wrk_b", NOW))
    assert queue.delivery("msg_1").status is D.PENDING  # not wrk_b's lease: nothing written
    assert asyncio.run(queue.release_leases(NOW)) == 1  # one process: a lease left at start is dead
    [again] = asyncio.run(queue.claim_due(NOW, 10, NOW + MIN, "wrk_c"))
    assert again.delivery == claim.delivery


def test_recover_stats_and_next_due() -> None:
    queue = _queue(_delivery("msg_1", schedule=6))
    asyncio.run(_worker(queue, 500).run_once())  # the last attempt fails: endpoint disabled
    assert asyncio.run(queue.stats(NOW)).queue_depth == 0
    assert asyncio.run(queue.next_due()) is None
    queue.endpoints[EP]["status"] = str(ON)
    assert asyncio.run(queue.recover(EP, None, NOW + MIN)) == 1
    d = queue.delivery("msg_1")
    assert (d.status, d.schedule_count) == (D.PENDING, 0)
    assert asyncio.run(queue.next_due()) == NOW + MIN
    assert asyncio.run(queue.stats(NOW + 2 * MIN)).oldest_overdue_seconds == 60.0


def test_memory_queue_runs_every_named_statement_and_no_other() -> None:
    assert MemoryQueue().statement_names() == set(STATEMENTS)


def test_the_sandbox_clock_moves_the_accounts_waiting_sandbox_deliveries_only() -> None:
    """``advance_sandbox``'s twin (its SQL texts: tests/integration/test_webhook_sandbox_clock.py)."""
    sandbox: dict[str, Any] = {"environment": "sandbox"}
    queue = _queue(
        dataclasses.replace(_delivery("msg_1m", due=NOW + MIN), **sandbox),
        dataclasses.replace(_delivery("msg_6h", due=NOW + 360 * MIN), **sandbox),
        dataclasses.replace(_delivery("msg_past", due=NOW - MIN), **sandbox),
        _delivery("msg_live", due=NOW + MIN),
        dataclasses.replace(_delivery("msg_other", due=NOW + MIN), account_id="acct_2", **sandbox),
    )
    assert asyncio.run(queue.advance_sandbox("acct_1", 120 * MIN, NOW)) == 2  # msg_1m, and msg_past as it was
    due = {k: queue.delivery(k).next_attempt_at for k in queue.deliveries}
    assert due == {
        "msg_1m": NOW,  # never earlier than now
        "msg_6h": NOW + 240 * MIN,
        "msg_past": NOW - MIN,  # already due: not pushed back
        "msg_live": NOW + MIN,  # live: never
        "msg_other": NOW + MIN,  # another account's
    }
    assert queue.deliveries["msg_6h"]["due_at"] == us(NOW + 240 * MIN)


def test_a_claim_that_found_nothing_waits_only_until_the_next_delivery_comes_due() -> None:
    # msg_1 is due now (say, skipped: its endpoint hangs), msg_2 comes due in 2 s: a claim with the same
    # skips runs again then, not a whole poll (30 s here) later; with nothing coming due, a poll.
    queue = _queue(_delivery("msg_1"), _delivery("msg_2", due=NOW + dt.timedelta(seconds=2)))
    assert asyncio.run(queue.next_due_after(NOW)) == NOW + dt.timedelta(seconds=2)
    assert asyncio.run(queue.next_due_after(NOW + dt.timedelta(seconds=2))) is None
    worker = DeliveryWorker(queue, Sender(httpx.AsyncClient()), FakeClock(NOW), WorkerConfig(poll_seconds=30))
    quiet = asyncio.run(worker._quiet_until(NOW)) - time.monotonic()
    assert 1.0 < quiet <= 2.0
    worker.clock = FakeClock(NOW + dt.timedelta(seconds=2))
    quiet = asyncio.run(worker._quiet_until(NOW + dt.timedelta(seconds=2))) - time.monotonic()
    assert 29.0 < quiet <= 30.0
