"""authsvc's outbox against the real webhookd: a revoke becomes a stored apikey.revoked event."""

from __future__ import annotations

import asyncio
import pathlib

import grpc

from tests.support import ServiceProcess, event_data
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc
from travel.webhooks.v1 import webhooks_pb2 as wpb
from travel.webhooks.v1 import webhooks_pb2_grpc

ACTOR = pb.Actor(user="ops@example.test")
ARGS = ["--listen", "127.0.0.1:0", "--metrics-listen", ""]


async def test_revoke_reaches_webhookd(tmp_path: pathlib.Path) -> None:
    webhookd = ServiceProcess(
        "webhookd", [*ARGS, "--database", f"sqlite+aiosqlite:///{tmp_path / 'wh.db'}"]
    ).start(tmp_path / "webhookd.log")
    authsvc: ServiceProcess | None = None
    try:
        authsvc = ServiceProcess(
            "authsvc",
            [
                *ARGS,
                "--database",
                f"sqlite+aiosqlite:///{tmp_path / 'a.db'}",
                "--webhookd",
                webhookd.grpc_target,
            ],
        ).start(tmp_path / "authsvc.log")
        async with (
            grpc.aio.insecure_channel(authsvc.grpc_target) as ac,
            grpc.aio.insecure_channel(webhookd.grpc_target) as wc,
        ):
            auth = auth_pb2_grpc.AuthServiceStub(ac)
            hooks = webhooks_pb2_grpc.WebhookServiceStub(wc)
            account = (await auth.CreateAccount(pb.CreateAccountRequest(name="P", actor=ACTOR))).account
            key = await auth.CreateKey(
                pb.CreateKeyRequest(
                    account_id=account.id,
                    environment=pb.ENVIRONMENT_LIVE,
                    scopes=["account:read"],
                    actor=ACTOR,
                )
            )
            # A marker event to resume the stream after, so nothing published later can be missed.
            marker = await hooks.PublishEvent(
                wpb.PublishEventRequest(
                    account_id=account.id,
                    environment=wpb.ENVIRONMENT_LIVE,
                    type="ledger.low_balance",
                    state="low_balance",
                    data=event_data("ledger.low_balance"),
                )
            )
            stream = hooks.StreamEvents(
                wpb.StreamEventsRequest(
                    account_id=account.id, environment=wpb.ENVIRONMENT_LIVE, since_event_id=marker.event.id
                )
            )
            try:
                await auth.RevokeKey(pb.RevokeKeyRequest(key_id=key.key.id, reason="test", actor=ACTOR))

                async def next_revoked() -> wpb.Event:
                    while True:
                        msg = await stream.read()
                        assert msg is not grpc.aio.EOF
                        response: wpb.StreamEventsResponse = msg
                        if response.event.type == "apikey.revoked":
                            return response.event

                event = await asyncio.wait_for(next_revoked(), 30)
            finally:
                stream.cancel()
            assert event.account_id == account.id and event.environment == wpb.ENVIRONMENT_LIVE
            assert event.state == "revoked" and event.data["keyId"] == key.key.id
            assert key.secret not in event.envelope_json
    finally:
        if authsvc is not None:
            authsvc.terminate()
        webhookd.terminate()
