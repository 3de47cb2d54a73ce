"""svckit.clients against real gRPC servers on port 0: typed calls, the deadline, the request id the
interceptor adds, a peer's error as ClientError (type, status, field), an unreachable peer as
PeerUnavailable, and server streams."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from authsvc.testing import ACTOR, running_authsvc
from svckit.catalog import quota_threshold
from svckit.clients import (
    AuthClient,
    ClientError,
    HooksClient,
    PeerUnavailable,
    client_error,
    mapped_errors,
    request_id_context,
)
from svckit.errors import ServiceError, to_grpc_status
from svckit.logs import request_id_var
from svckit.protos import struct
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc
from travel.auth.v1 import identity_pb2 as ipb
from travel.webhooks.v1 import webhooks_pb2 as wpb
from travel.webhooks.v1 import webhooks_pb2_grpc


def _request_id(context: Any) -> str | None:
    return dict(context.invocation_metadata()).get("x-request-id")


# Implements only the RPCs the test calls: the generated base answers the others UNIMPLEMENTED, though
# its stubs declare every RPC abstract (hence the ignore[abstract] where one is built).
class RecordingAuth(auth_pb2_grpc.AuthServiceServicer):
    """Answers GetKey and GetUsage (the latter after ``delay``), recording each call's metadata and the
    deadline the server sees."""

    def __init__(self) -> None:
        self.metadata: list[dict[str, str]] = []
        self.remaining: list[float | None] = []
        self.delay = 0.0

    async def GetKey(self, request: pb.GetKeyRequest, context: Any) -> pb.GetKeyResponse:
        self.metadata.append(dict(context.invocation_metadata()))
        self.remaining.append(context.time_remaining())
        return pb.GetKeyResponse(key=pb.ApiKey(id=request.key_id, hint="abcd"))

    async def GetUsage(self, request: pb.GetUsageRequest, context: Any) -> pb.GetUsageResponse:
        await asyncio.sleep(self.delay)
        return pb.GetUsageResponse(usage=pb.Usage(date="2025-01-01", searches_used=3))


# Implements only the RPCs the test calls: the generated base answers the others UNIMPLEMENTED, though
# its stubs declare every RPC abstract (hence the ignore[abstract] where one is built).
class ScriptedHooks(webhooks_pb2_grpc.WebhookServiceServicer):
    """StreamEvents: ``count`` events, then not_found (as webhookd answers an unknown since_event_id)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.request_ids: list[str | None] = []

    async def StreamEvents(self, request: wpb.StreamEventsRequest, context: Any) -> AsyncIterator[Any]:
        self.request_ids.append(_request_id(context))
        for i in range(self.count):
            yield wpb.StreamEventsResponse(event=wpb.Event(id=f"evt_{i}", type="booking.confirmed"))
        await context.abort_with_status(
            to_grpc_status(ServiceError("since_event_id: no such event", type="not_found"))
        )


@contextlib.asynccontextmanager
async def serving(add: Any, servicer: Any) -> AsyncIterator[str]:
    server = grpc.aio.server()
    add(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(0)


@pytest.fixture
async def recording() -> AsyncIterator[tuple[RecordingAuth, str]]:
    servicer = RecordingAuth()  # type: ignore[abstract]  # (see the class)
    async with serving(auth_pb2_grpc.add_AuthServiceServicer_to_server, servicer) as address:
        yield servicer, address


async def test_a_typed_call_carries_the_request_id_of_its_context(
    recording: tuple[RecordingAuth, str],
) -> None:
    servicer, address = recording
    async with AuthClient(address, None, timeout=5.0) as auth:
        token = request_id_var.set("req_from_context")
        try:
            resp = await auth.get_key(pb.GetKeyRequest(key_id="key_1"))
        finally:
            request_id_var.reset(token)
        assert isinstance(resp, pb.GetKeyResponse) and resp.key.id == "key_1"
        await auth.get_key(pb.GetKeyRequest(key_id="key_2"))  # no request id in the context: none sent
        with request_id_context("req_scoped"):
            await auth.get_key(pb.GetKeyRequest(key_id="key_3"), metadata=(("x-tenant", "t1"),))
        with request_id_context("req_scoped"):  # a caller's own request id is kept, not doubled
            await auth.get_key(pb.GetKeyRequest(key_id="key_4"), metadata=(("x-request-id", "req_mine"),))
    ids = [m.get("x-request-id") for m in servicer.metadata]
    assert ids == ["req_from_context", None, "req_scoped", "req_mine"]
    assert servicer.metadata[2]["x-tenant"] == "t1"
    assert request_id_var.get() is None


async def test_the_deadline_is_the_clients_unless_a_call_says_otherwise(
    recording: tuple[RecordingAuth, str],
) -> None:
    servicer, address = recording
    async with AuthClient(address, None, timeout=0.3) as auth:
        await auth.get_key(pb.GetKeyRequest(key_id="key_1"))
        await auth.get_key(pb.GetKeyRequest(key_id="key_1"), timeout=20.0)
        low, high = servicer.remaining
        assert low is not None and high is not None and low <= 0.31 and 10.0 < high <= 21.0
        servicer.delay = 0.6
        with pytest.raises(PeerUnavailable) as late:
            await auth.get_usage(pb.GetUsageRequest(account_id="acct_1"))
        assert late.value.code is grpc.StatusCode.DEADLINE_EXCEEDED
        assert (late.value.type, late.value.status) == ("service_unavailable", 503)
        resp = await auth.get_usage(pb.GetUsageRequest(account_id="acct_1"), timeout=5.0)
        assert resp.usage.searches_used == 3


async def test_an_unreachable_peer_is_peer_unavailable() -> None:
    async with AuthClient("127.0.0.1:1", None, timeout=2.0) as auth:
        with pytest.raises(PeerUnavailable) as info:
            await auth.authorize(pb.AuthorizeRequest(api_key="svc_test_x"))
    err = info.value
    assert isinstance(err, ClientError)
    assert (err.type, err.status, err.code) == ("service_unavailable", 503, grpc.StatusCode.UNAVAILABLE)


async def test_errors_of_a_real_authsvc_arrive_as_client_errors(sqlite_url: str) -> None:
    async with running_authsvc(sqlite_url) as (server, _stub):
        async with AuthClient(f"127.0.0.1:{server.port}", None) as auth:
            account = (await auth.create_account(pb.CreateAccountRequest(name="P", actor=ACTOR))).account
            assert account.id.startswith("acct_")
            with pytest.raises(ClientError) as missing:
                await auth.get_key(pb.GetKeyRequest(key_id="key_nope"))
            assert (missing.value.type, missing.value.status) == ("not_found", 404)
            assert missing.value.code is grpc.StatusCode.NOT_FOUND
            assert not isinstance(missing.value, PeerUnavailable)
            # IdentityService on the same channel; its message names the field, as the portal shows it.
            with pytest.raises(ClientError) as signed_out:
                await auth.get_session(ipb.GetSessionRequest(session_token=""))
            err = signed_out.value
            assert (err.type, err.status, err.field) == ("session_expired", 401, "session_token")
            assert err.message == "not signed in" and err.detail == "session_token: not signed in"
            assert str(err) == err.detail
            # A stream: the watch starts with SYNC.
            watch = auth.watch_key_changes(pb.WatchKeyChangesRequest())
            first = await asyncio.wait_for(watch.read(), 10)
            assert first is not None and first.kind == pb.KEY_CHANGE_KIND_SYNC
            watch.cancel()


async def test_a_stream_yields_its_messages_then_its_error_as_a_client_error() -> None:
    servicer = ScriptedHooks(count=2)  # type: ignore[abstract]  # (see the class)
    async with serving(webhooks_pb2_grpc.add_WebhookServiceServicer_to_server, servicer) as address:
        async with HooksClient(address, None) as hooks:
            seen: list[str] = []
            with request_id_context("req_stream"), pytest.raises(ClientError) as info:
                async for msg in hooks.stream_events(wpb.StreamEventsRequest(account_id="acct_1")):
                    assert isinstance(msg, wpb.StreamEventsResponse)
                    seen.append(msg.event.id)
    assert seen == ["evt_0", "evt_1"]
    assert (info.value.type, info.value.status, info.value.field) == ("not_found", 404, "since_event_id")
    assert servicer.request_ids == ["req_stream"]


async def test_mapped_errors_and_client_error_map_a_bare_stub_call(
    recording: tuple[RecordingAuth, str],
) -> None:
    _, address = recording
    async with grpc.aio.insecure_channel(address) as channel:
        stub = auth_pb2_grpc.AuthServiceStub(channel)
        with pytest.raises(ClientError) as info, mapped_errors():
            await stub.ListKeys(pb.ListKeysRequest(), timeout=5)  # not implemented by the servicer
    assert info.value.code is grpc.StatusCode.UNIMPLEMENTED and info.value.type == "internal_error"
    assert client_error(grpc.aio.AioRpcError(grpc.StatusCode.CANCELLED, None, None)).status == 503


class FlakyPublish(webhooks_pb2_grpc.WebhookServiceServicer):
    """PublishEvent: UNAVAILABLE for the first call, then accepted."""

    def __init__(self) -> None:
        self.calls = 0

    async def PublishEvent(self, request: wpb.PublishEventRequest, context: Any) -> wpb.PublishEventResponse:
        self.calls += 1
        if self.calls == 1:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "not yet")
        return wpb.PublishEventResponse(event=wpb.Event(id="evt_1", type=request.type))


@pytest.mark.parametrize("retry", [True, False])
async def test_a_publish_with_an_idempotency_key_is_retried_unless_the_caller_retries_itself(
    retry: bool,
) -> None:
    """An UNAVAILABLE publish carrying an idempotency key is tried again within the call; with
    ``retry=False`` (authsvc's outbox relay, which retries on its own backoff and counts each try) once."""
    servicer = FlakyPublish()  # type: ignore[abstract]  # (see RecordingAuth)
    request = wpb.PublishEventRequest(
        account_id="acct_1",
        environment=wpb.ENVIRONMENT_SANDBOX,
        type="search_quota.threshold",
        data=struct(quota_threshold(100, "2025-01-01")),
        idempotency_key="once",
    )
    async with serving(webhooks_pb2_grpc.add_WebhookServiceServicer_to_server, servicer) as address:
        async with HooksClient(address, None) as hooks:
            if retry:
                assert (await hooks.publish_event(request)).event.id == "evt_1"
            else:
                with pytest.raises(PeerUnavailable):
                    await hooks.publish_event(request, retry=False)
    assert servicer.calls == (2 if retry else 1)
