"""authsvc as real processes: serve/READY/SIGTERM, cross-process revocation on PostgreSQL, and an
outbox event that survives a SIGKILL right after the revoke committed."""

from __future__ import annotations

import asyncio
import pathlib
import time
import urllib.request

import grpc

from authsvc._sql import SqlRepository
from svckit.db import create_engine
from tests.support import ServiceProcess, free_port
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc
from travel.webhooks.v1 import webhooks_pb2, webhooks_pb2_grpc

ACTOR = pb.Actor(user="ops@example.test")
ARGS = ["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"]


async def setup_key(stub: auth_pb2_grpc.AuthServiceStub) -> tuple[str, pb.CreateKeyResponse]:
    account = (await stub.CreateAccount(pb.CreateAccountRequest(name="P", actor=ACTOR))).account
    key = await stub.CreateKey(
        pb.CreateKeyRequest(
            account_id=account.id, environment=pb.ENVIRONMENT_LIVE, scopes=["hotels:read"], actor=ACTOR
        )
    )
    return account.id, key


def authz(secret: str) -> pb.AuthorizeRequest:
    return pb.AuthorizeRequest(
        api_key=secret,
        environment=pb.ENVIRONMENT_LIVE,
        required_scope="hotels:read",
        source_address="127.0.0.1",
    )


async def test_serve_ready_metrics_and_graceful_stop(tmp_path: pathlib.Path) -> None:
    proc = ServiceProcess("authsvc", [*ARGS, "--database", f"sqlite+aiosqlite:///{tmp_path / 'a.db'}"])
    proc.start(tmp_path / "authsvc.log")
    try:
        assert proc.ports["service"] == "authsvc"
        async with grpc.aio.insecure_channel(proc.grpc_target) as channel:
            stub = auth_pb2_grpc.AuthServiceStub(channel)
            _, key = await setup_key(stub)
            assert (await stub.Authorize(authz(key.secret))).decision == pb.DECISION_ALLOW
        body = await asyncio.to_thread(
            lambda: urllib.request.urlopen(
                f"http://127.0.0.1:{proc.ports['metrics_port']}/metrics", timeout=5
            ).read()
        )
        assert b'grpc_server_handled_total{code="OK",method="Authorize"}' in body
    finally:
        assert proc.terminate() == 0
    assert "authsvc stopped" in proc.logs()
    # last_used_at is batched (every 30 s by default) and flushed on graceful stop.
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'a.db'}")
    try:
        stored = await SqlRepository(engine).get_key(key.key.id)
    finally:
        await engine.dispose()
    assert stored.last_used_at is not None


async def test_revoke_on_one_process_reaches_watchers_of_another(pg_url: str, tmp_path: pathlib.Path) -> None:
    a = ServiceProcess("authsvc", [*ARGS, "--database", pg_url]).start(tmp_path / "a.log")
    b = ServiceProcess("authsvc", [*ARGS, "--database", pg_url]).start(tmp_path / "b.log")
    try:
        async with (
            grpc.aio.insecure_channel(a.grpc_target) as ca,
            grpc.aio.insecure_channel(b.grpc_target) as cb,
        ):
            sa, sb = auth_pb2_grpc.AuthServiceStub(ca), auth_pb2_grpc.AuthServiceStub(cb)
            account_id, key = await setup_key(sa)
            assert (await sb.Authorize(authz(key.secret))).decision == pb.DECISION_ALLOW  # cached on b
            watch = sb.WatchKeyChanges(pb.WatchKeyChangesRequest())
            try:
                assert (await asyncio.wait_for(watch.read(), 10)).kind == pb.KEY_CHANGE_KIND_SYNC
                started = time.monotonic()
                await sa.RevokeKey(pb.RevokeKeyRequest(key_id=key.key.id, actor=ACTOR))
                change = await asyncio.wait_for(watch.read(), 1.0)
                elapsed = time.monotonic() - started
                assert (change.kind, change.key_id, change.account_id) == (
                    pb.KEY_CHANGE_KIND_REVOKED,
                    key.key.id,
                    account_id,
                )
                assert elapsed < 1.0
                # b's cache was dropped too: the revoked key is refused there at once.
                assert (await sb.Authorize(authz(key.secret))).error_type == "invalid_api_key"
                await sa.SetAccountStatus(
                    pb.SetAccountStatusRequest(
                        account_id=account_id, status=pb.ACCOUNT_STATUS_READ_ONLY, actor=ACTOR
                    )
                )
                change = await asyncio.wait_for(watch.read(), 1.0)
                assert (change.kind, change.account_id) == (pb.KEY_CHANGE_KIND_ACCOUNT_UPDATED, account_id)
            finally:
                watch.cancel()
    finally:
        a.terminate()
        b.terminate()


# Implements only the RPCs the test calls: the generated base answers the others UNIMPLEMENTED, though
# its stubs declare every RPC abstract (hence the ignore[abstract] where one is built).
class Recorder(webhooks_pb2_grpc.WebhookServiceServicer):
    def __init__(self) -> None:
        self.accepted: list[webhooks_pb2.PublishEventRequest] = []
        self.got = asyncio.Event()

    async def PublishEvent(
        self, request: webhooks_pb2.PublishEventRequest, context: grpc.aio.ServicerContext
    ) -> webhooks_pb2.PublishEventResponse:
        self.accepted.append(request)
        self.got.set()
        return webhooks_pb2.PublishEventResponse(event=webhooks_pb2.Event(id="evt_1"))


async def test_revoke_event_survives_sigkill_right_after_commit(db_url: str, tmp_path: pathlib.Path) -> None:
    port = free_port()  # webhookd is down while the revoke happens
    args = [*ARGS, "--database", db_url, "--webhookd", f"127.0.0.1:{port}", "--outbox-backoff-cap", "0.5"]
    first = ServiceProcess("authsvc", args).start(tmp_path / "first.log")
    try:
        async with grpc.aio.insecure_channel(first.grpc_target) as channel:
            stub = auth_pb2_grpc.AuthServiceStub(channel)
            _, key = await setup_key(stub)
            await stub.RevokeKey(pb.RevokeKeyRequest(key_id=key.key.id, actor=ACTOR))
    finally:
        first.kill()
    engine = create_engine(db_url)
    try:
        rows = await SqlRepository(engine).outbox_rows()
    finally:
        await engine.dispose()
    assert [(r["type"], r["sent_at"]) for r in rows] == [("apikey.revoked", None)]

    recorder = Recorder()  # type: ignore[abstract]  # (see the class)
    webhookd = grpc.aio.server()
    webhooks_pb2_grpc.add_WebhookServiceServicer_to_server(recorder, webhookd)
    webhookd.add_insecure_port(f"127.0.0.1:{port}")
    await webhookd.start()
    second = ServiceProcess("authsvc", args).start(tmp_path / "second.log")
    try:
        await asyncio.wait_for(recorder.got.wait(), 40)
        event = recorder.accepted[0]
        assert event.type == "apikey.revoked" and event.data["keyId"] == key.key.id
        assert event.idempotency_key == rows[0]["id"]
    finally:
        second.terminate()
        await webhookd.stop(0)
