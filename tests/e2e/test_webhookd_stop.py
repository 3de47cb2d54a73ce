"""webhookd's graceful stop (docs/webhooks.md "Stopping"): on SIGTERM its event streams end (a reader
resumes on another process), and deliveries still in flight after a short grace are cut and handed back,
so another process sends them at once instead of after their lease; nothing waits for a receiver that
never answers, or for a stream that never finishes on its own."""

from __future__ import annotations

import asyncio
import pathlib
import ssl

import grpc

from tests.support import ServiceProcess, event_data
from travel.webhooks.v1 import webhooks_pb2 as pb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd.testing import Receiver

LIVE = pb.ENVIRONMENT_LIVE
ACCT = "acct_stop"
LEASE = 120  # far longer than this test: a delivery sent again was handed back, not left to its lease


def _webhookd(db_url: str, ca: str) -> ServiceProcess:
    return ServiceProcess(
        "webhookd",
        [
            "--listen", "127.0.0.1:0",
            "--metrics-listen", "",
            "--database", db_url,
            "--allow-private-targets",
            "--ca-bundle", ca,
            "--delivery-timeout", "60",
            "--lease-seconds", str(LEASE),
            "--shutdown-grace", "30",
        ],
    )  # fmt: skip


async def test_sigterm_ends_streams_and_hands_back_sends_in_flight(
    pg_url: str, tls: tuple[ssl.SSLContext, str], receiver: Receiver, tmp_path: pathlib.Path
) -> None:
    """On PostgreSQL (several processes: a new one does not release its predecessors' leases at start)."""
    db = pg_url
    receiver.delay = 3600  # a receiver that never answers
    first = _webhookd(db, tls[1]).start(tmp_path / "first.log")
    try:
        async with grpc.aio.insecure_channel(first.grpc_target) as channel:
            stub = webhooks_pb2_grpc.WebhookServiceStub(channel)
            await stub.RegisterEndpoint(
                pb.RegisterEndpointRequest(
                    account_id=ACCT, environment=LIVE, url=receiver.url(), events=["*"]
                )
            )
            published = set()
            for i in range(3):
                resp = await stub.PublishEvent(
                    pb.PublishEventRequest(
                        account_id=ACCT,
                        environment=LIVE,
                        type="booking.confirmed",
                        data=event_data("booking.confirmed", booking=f"bk_stop{i}"),
                    )
                )
                published.add(resp.event.id)
            stream = stub.StreamEvents(pb.StreamEventsRequest(account_id=ACCT, environment=LIVE))
            while receiver.count < 3:  # noqa: ASYNC110 (all three sends in flight, none answered)
                await asyncio.sleep(0.05)
            # A shutdown grace of 30 s, a receiver that never answers, a stream that never ends: the stop
            # waits for none of them.
            assert await asyncio.to_thread(first.terminate, 20.0) == 0, first.logs()[-2000:]
            assert receiver.answered == 0
            ended = [msg async for msg in stream]  # the stream ended with the process, nothing in it
            assert ended == []
    finally:
        first.kill()
    # Handed back: a new process sends them now, long before their leases (LEASE) would have run out.
    receiver.delay = 0
    second = _webhookd(db, tls[1]).start(tmp_path / "second.log")
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while loop.time() < deadline:
            again = [r for r in receiver.received()[3:] if r.headers["x-service-event-id"] in published]
            if {r.headers["x-service-event-id"] for r in again} == published:
                break
            await asyncio.sleep(0.1)
        assert {r.headers["x-service-event-id"] for r in again} == published
    finally:
        second.kill()
