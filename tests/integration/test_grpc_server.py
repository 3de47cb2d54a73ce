"""svckit.grpc_server: every method a service registers -- through the generic handler and through the
registered-method table the generated code fills -- is observed (request id, ServiceError mapping,
counts), wrapped once at registration. A real aio server on port 0."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import grpc
import pytest
from prometheus_client import REGISTRY

from svckit.errors import ServiceError, type_from_rpc_error
from svckit.grpc_server import start_server, stop_server
from svckit.logs import request_id_var

SERVICE = "test.grpcserver.Echo"


def _echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    if request == b"refuse":
        raise ServiceError("no such thing", type="not_found")
    rid = request_id_var.get()
    assert rid is not None  # set for every call, the caller's or a minted one
    return rid.encode()


async def _generic(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    return _echo(request, context)


async def _registered(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    return _echo(request, context)


async def _slow(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    await asyncio.sleep(0.01)  # other calls run meanwhile
    return _echo(request, context)


def _register(server: grpc.aio.Server) -> None:
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                SERVICE,
                {
                    "Generic": grpc.unary_unary_rpc_method_handler(_generic),
                    "Slow": grpc.unary_unary_rpc_method_handler(_slow),
                },
            ),
        )
    )
    server.add_registered_method_handlers(
        SERVICE, {"Registered": grpc.unary_unary_rpc_method_handler(_registered)}
    )


@pytest.fixture
async def channel() -> AsyncIterator[grpc.aio.Channel]:
    server, port, health = await start_server("127.0.0.1:0", [_register], [SERVICE])
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
            yield ch
    finally:
        await stop_server(server, health, 1)


def _count(method: str, code: str) -> float:
    value = REGISTRY.get_sample_value("grpc_server_handled_total", {"method": method, "code": code})
    return value or 0.0


@pytest.mark.parametrize("method", ["Generic", "Registered"])
async def test_every_call_is_observed(channel: grpc.aio.Channel, method: str) -> None:
    call = channel.unary_unary(f"/{SERVICE}/{method}")
    ok, not_found = _count(method, "OK"), _count(method, "NOT_FOUND")
    for _ in range(2):  # the second call goes through the handler wrapped for the first
        assert (
            await call(b"x", metadata=(("x-request-id", "req_fromcaller"),), timeout=10) == b"req_fromcaller"
        )
    minted = (await call(b"x", timeout=10)).decode()
    assert minted.startswith("req_") and minted != "req_fromcaller"
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call(b"refuse", timeout=10)
    assert refused.value.code() == grpc.StatusCode.NOT_FOUND
    assert type_from_rpc_error(refused.value) == ("not_found", "no such thing")
    assert _count(method, "OK") == ok + 3
    # The server counts a refused call once its status is sent, which the client may read first.
    deadline = time.monotonic() + 5
    while True:
        if _count(method, "NOT_FOUND") != not_found or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.01)
    assert _count(method, "NOT_FOUND") == not_found + 1


async def test_concurrent_calls_each_keep_their_own_request_id(channel: grpc.aio.Channel) -> None:
    call = channel.unary_unary(f"/{SERVICE}/Slow")
    ids = [f"req_concurrent{i:02d}" for i in range(20)]
    answers = await asyncio.gather(*(call(b"x", metadata=(("x-request-id", r),), timeout=10) for r in ids))
    assert [a.decode() for a in answers] == ids
    minted = await asyncio.gather(*(call(b"x", timeout=10) for _ in range(5)))
    assert len({m.decode() for m in minted}) == 5
