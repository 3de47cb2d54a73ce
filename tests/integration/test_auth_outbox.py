"""The transactional outbox relay against a real gRPC server implementing just PublishEvent."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest

from authsvc.testing import ACTOR, new_account, new_key, running_authsvc
from tests.support import free_port
from travel.auth.v1 import auth_pb2 as pb
from travel.webhooks.v1 import webhooks_pb2, webhooks_pb2_grpc


# Implements only the RPCs the test calls: the generated base answers the others UNIMPLEMENTED, though
# its stubs declare every RPC abstract (hence the ignore[abstract] where one is built).
class RecordingWebhooks(webhooks_pb2_grpc.WebhookServiceServicer):
    """Stores every PublishEvent; answers UNAVAILABLE for the first ``fail_first`` calls."""

    def __init__(self, fail_first: int = 0) -> None:
        self.calls: list[webhooks_pb2.PublishEventRequest] = []
        self.accepted: list[webhooks_pb2.PublishEventRequest] = []
        self.fail_first = fail_first
        self.changed = asyncio.Event()

    async def PublishEvent(
        self, request: webhooks_pb2.PublishEventRequest, context: grpc.aio.ServicerContext
    ) -> webhooks_pb2.PublishEventResponse:
        self.calls.append(request)
        self.changed.set()
        if len(self.calls) <= self.fail_first:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "not yet")
        self.accepted.append(request)
        return webhooks_pb2.PublishEventResponse(
            event=webhooks_pb2.Event(id=f"evt_{len(self.accepted)}"), delivery_count=0
        )

    async def wait_accepted(self, n: int, within: float = 15) -> None:
        async def loop() -> None:
            while len(self.accepted) < n:
                self.changed.clear()
                await self.changed.wait()

        await asyncio.wait_for(loop(), within)


async def start_webhooks(servicer: RecordingWebhooks, port: int = 0) -> tuple[grpc.aio.Server, int]:
    server = grpc.aio.server()
    webhooks_pb2_grpc.add_WebhookServiceServicer_to_server(servicer, server)
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    return server, bound


@pytest.fixture
async def webhooks() -> AsyncIterator[tuple[RecordingWebhooks, int]]:
    servicer = RecordingWebhooks()  # type: ignore[abstract]  # (see the class)
    server, port = await start_webhooks(servicer)
    yield servicer, port
    await server.stop(0)


async def wait_sent(server: object, n: int, within: float = 15) -> list[dict[str, object]]:
    repo = server.repo  # type: ignore[attr-defined]
    deadline = asyncio.get_running_loop().time() + within
    while True:
        rows = await repo.outbox_rows()
        if sum(r["sent_at"] is not None for r in rows) >= n:
            return list(rows)
        assert asyncio.get_running_loop().time() < deadline, rows
        await asyncio.sleep(0.05)


async def test_revoke_and_threshold_events_are_published(
    db_url: str, webhooks: tuple[RecordingWebhooks, int]
) -> None:
    recorder, port = webhooks
    async with running_authsvc(db_url, webhookd=f"127.0.0.1:{port}") as (server, stub):
        account = await new_account(stub, allowance=2)
        key = (await new_key(stub, account.id)).key
        await stub.RevokeKey(pb.RevokeKeyRequest(key_id=key.id, reason="rotated away", actor=ACTOR))
        await recorder.wait_accepted(1)
        await stub.ConsumeSearch(
            pb.ConsumeSearchRequest(account_id=account.id, environment=pb.ENVIRONMENT_LIVE, count=2)
        )
        await recorder.wait_accepted(2)
        rows = await wait_sent(server, 2)
        revoked, threshold = recorder.accepted
        assert revoked.type == "apikey.revoked" and revoked.state == "revoked"
        assert revoked.account_id == account.id and revoked.environment == webhooks_pb2.ENVIRONMENT_LIVE
        assert revoked.data["keyId"] == key.id and revoked.data["revokedBy"] == ACTOR.user
        assert revoked.idempotency_key == rows[0]["id"]
        assert threshold.type == "search_quota.threshold" and threshold.idempotency_key == rows[1]["id"]
        assert threshold.state == "threshold_reached" and threshold.data["dailySearchAllowance"] == 2
        assert all(r["attempts"] == 1 for r in rows)


async def test_event_committed_while_webhookd_is_down_is_delivered_when_it_comes_up(db_url: str) -> None:
    port = free_port()
    async with running_authsvc(db_url, webhookd=f"127.0.0.1:{port}", outbox_backoff_cap=0.3) as (
        server,
        stub,
    ):
        account = await new_account(stub)
        key = (await new_key(stub, account.id)).key
        await stub.RevokeKey(pb.RevokeKeyRequest(key_id=key.id, actor=ACTOR))
        deadline = asyncio.get_running_loop().time() + 10
        while not (rows := await server.repo.outbox_rows()) or rows[0]["attempts"] < 2:
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.05)
        assert rows[0]["sent_at"] is None and rows[0]["last_error"]
        recorder = RecordingWebhooks()  # type: ignore[abstract]  # (see the class)
        webhookd, _ = await start_webhooks(recorder, port)
        try:
            await recorder.wait_accepted(1)
            rows = await wait_sent(server, 1)
            assert recorder.accepted[0].idempotency_key == rows[0]["id"]
            assert recorder.accepted[0].data["keyId"] == key.id
        finally:
            await webhookd.stop(0)


async def test_refused_publish_is_retried_until_accepted(sqlite_url: str) -> None:
    recorder = RecordingWebhooks(fail_first=2)  # type: ignore[abstract]  # (see the class)
    webhookd, port = await start_webhooks(recorder)
    try:
        async with running_authsvc(sqlite_url, webhookd=f"127.0.0.1:{port}", outbox_backoff_cap=0.2) as (
            server,
            stub,
        ):
            account = await new_account(stub)
            key = (await new_key(stub, account.id)).key
            await stub.RevokeKey(pb.RevokeKeyRequest(key_id=key.id, actor=ACTOR))
            await recorder.wait_accepted(1)
            rows = await wait_sent(server, 1)
            assert len(recorder.calls) == 3
            assert {c.idempotency_key for c in recorder.calls} == {rows[0]["id"]}
            assert rows[0]["attempts"] == 3
    finally:
        await webhookd.stop(0)


async def test_without_webhookd_events_stay_pending(sqlite_url: str) -> None:
    async with running_authsvc(sqlite_url) as (server, stub):
        account = await new_account(stub)
        key = (await new_key(stub, account.id)).key
        await stub.RevokeKey(pb.RevokeKeyRequest(key_id=key.id, actor=ACTOR))
        rows = await server.repo.outbox_rows()
        assert len(rows) == 1 and rows[0]["sent_at"] is None and rows[0]["attempts"] == 0
