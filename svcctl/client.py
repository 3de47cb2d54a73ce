"""Small async helpers over travel.auth.v1 for scripts and the admin CLI."""

from __future__ import annotations

import argparse
from typing import Any

import grpc
from google.protobuf.duration_pb2 import Duration

from svckit.scopes import ALL_SCOPES
from svckit.tls import Tls, channel, tls_from_args
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc

DEMO_ACTOR = "svc:run_stack"


def connect(args: argparse.Namespace, service: str) -> grpc.aio.Channel:
    """The channel to ``service`` ("authsvc" or "webhookd") at the address its flag names, with svcctl's
    certificate (or plaintext with --insecure-dev)."""
    return channel(getattr(args, service), tls_from_args(args), service)


async def create_demo_key(
    authsvc_target: str, tls: Tls | None, account_id: str = "", replaces: str = ""
) -> dict[str, Any]:
    """A sandbox key with every scope for the account "Demo Partner", as svcctl (``tls``): the account is
    created unless ``account_id`` names it, and the key ``replaces`` (the previous demo key) is rolled
    with no grace period when it still can be, so each run hands out a fresh secret without keeping one.

    Returns ``{"account_id", "key_id", "secret"}``; the secret is shown only here.
    """
    async with channel(authsvc_target, tls, "authsvc") as auth:
        stub = auth_pb2_grpc.AuthServiceStub(auth)
        actor = pb.Actor(user=DEMO_ACTOR)
        if not account_id:
            account_id = (
                await stub.CreateAccount(
                    pb.CreateAccountRequest(name="Demo Partner", mode=pb.ACCOUNT_MODE_A, actor=actor),
                    wait_for_ready=True,
                    timeout=30,
                )
            ).account.id
        if replaces:
            try:
                rolled = await stub.RotateKey(
                    pb.RotateKeyRequest(key_id=replaces, grace_period=Duration(seconds=0), actor=actor),
                    wait_for_ready=True,
                    timeout=30,
                )
                return {"account_id": account_id, "key_id": rolled.new_key.id, "secret": rolled.secret}
            except grpc.aio.AioRpcError:
                pass  # revoked or gone meanwhile (in the portal, say): a new key instead
        created = await stub.CreateKey(
            pb.CreateKeyRequest(
                account_id=account_id,
                environment=pb.ENVIRONMENT_SANDBOX,
                name="demo sandbox key",
                scopes=list(ALL_SCOPES),
                actor=actor,
            ),
            wait_for_ready=True,
            timeout=30,
        )
    return {"account_id": account_id, "key_id": created.key.id, "secret": created.secret}
