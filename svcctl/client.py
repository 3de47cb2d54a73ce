"""Small async helpers over travel.auth.v1 for scripts and the admin CLI."""

from __future__ import annotations

from typing import Any

import grpc

from authsvc._scopes import ALL_SCOPES
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc

DEMO_ACTOR = "svc:run_stack"


def auth_channel(target: str) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(target)


async def create_demo_key(authsvc_target: str) -> dict[str, Any]:
    """Create the account "Demo Partner" and a sandbox key with every scope.

    Returns ``{"account_id", "key_id", "secret"}``; the secret is shown only here.
    """
    async with auth_channel(authsvc_target) as channel:
        stub = auth_pb2_grpc.AuthServiceStub(channel)
        actor = pb.Actor(user=DEMO_ACTOR)
        account = (
            await stub.CreateAccount(
                pb.CreateAccountRequest(name="Demo Partner", mode=pb.ACCOUNT_MODE_A, actor=actor),
                wait_for_ready=True,
                timeout=30,
            )
        ).account
        created = await stub.CreateKey(
            pb.CreateKeyRequest(
                account_id=account.id,
                environment=pb.ENVIRONMENT_SANDBOX,
                name="demo sandbox key",
                scopes=list(ALL_SCOPES),
                actor=actor,
            ),
            timeout=30,
        )
    return {"account_id": account.id, "key_id": created.key.id, "secret": created.secret}
