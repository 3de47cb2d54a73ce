"""Helpers for tests and benchmarks: a real authsvc on loopback port 0, and its client stub."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc

from authsvc._server import AuthServer, run_server
from svckit.errors import type_from_rpc_error
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc

ACTOR = pb.Actor(user="alice@partner.example", source_address="192.0.2.10")


@contextlib.asynccontextmanager
async def running_authsvc(
    database: str, **kwargs: Any
) -> AsyncIterator[tuple[AuthServer, auth_pb2_grpc.AuthServiceStub]]:
    server = await run_server("127.0.0.1:0", database, **kwargs)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            yield server, auth_pb2_grpc.AuthServiceStub(channel)
    finally:
        await server.stop(0)


async def error_of(call: Any) -> tuple[grpc.StatusCode, str, str]:
    """Await a call expected to fail: (status code, error type from ErrorInfo, message)."""
    try:
        await call
    except grpc.aio.AioRpcError as exc:
        error_type, message = type_from_rpc_error(exc)
        return exc.code(), error_type, message
    raise AssertionError("the call succeeded")


async def new_account(
    stub: auth_pb2_grpc.AuthServiceStub, allowance: int = 0, name: str = "Partner"
) -> pb.Account:
    resp: pb.CreateAccountResponse = await stub.CreateAccount(
        pb.CreateAccountRequest(
            name=name, mode=pb.ACCOUNT_MODE_A, daily_search_allowance=allowance, actor=ACTOR
        )
    )
    return resp.account


async def new_key(
    stub: auth_pb2_grpc.AuthServiceStub,
    account_id: str,
    environment: pb.Environment.ValueType = pb.ENVIRONMENT_LIVE,
    scopes: tuple[str, ...] = ("hotels:read", "hotels:write"),
    allowed_sources: tuple[str, ...] = (),
    name: str = "checkout",
) -> pb.CreateKeyResponse:
    resp: pb.CreateKeyResponse = await stub.CreateKey(
        pb.CreateKeyRequest(
            account_id=account_id,
            environment=environment,
            name=name,
            scopes=list(scopes),
            allowed_sources=list(allowed_sources),
            actor=ACTOR,
        )
    )
    return resp
