"""The edge's WatchKeyChanges loop against a real gRPC server that plays a scripted authsvc: a watch that
heartbeats and then goes silent (a dead network TCP has not noticed yet) counts as broken."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc

from edge.authcache import CacheUse
from edge.authorizer import Authorizer
from svckit.clients import AuthClient
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc


# Implements only the RPCs the test calls: the generated base answers the others UNIMPLEMENTED, though
# its stubs declare every RPC abstract (hence the ignore[abstract] where one is built).
class ScriptedWatch(auth_pb2_grpc.AuthServiceServicer):
    """SYNC, then ``heartbeats`` heartbeats if the watcher asked for them, then silence with the stream
    left open. Counts the watches opened."""

    def __init__(self, heartbeats: int) -> None:
        self.heartbeats = heartbeats
        self.watches: list[pb.WatchKeyChangesRequest] = []

    async def WatchKeyChanges(self, request: pb.WatchKeyChangesRequest, context: Any) -> AsyncIterator[Any]:
        self.watches.append(request)
        yield pb.WatchKeyChangesResponse(kind=pb.KEY_CHANGE_KIND_SYNC)
        if request.HasField("heartbeat_interval"):
            for _ in range(self.heartbeats):
                await asyncio.sleep(request.heartbeat_interval.ToTimedelta().total_seconds())
                yield pb.WatchKeyChangesResponse(kind=pb.KEY_CHANGE_KIND_HEARTBEAT)
        await asyncio.Event().wait()


@contextlib.asynccontextmanager
async def watching(servicer: ScriptedWatch) -> AsyncIterator[Authorizer]:
    server = grpc.aio.server()
    auth_pb2_grpc.add_AuthServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    auth = AuthClient(f"127.0.0.1:{port}", None)
    authz = Authorizer(auth)
    task = asyncio.ensure_future(authz.watch_forever())
    try:
        yield authz
    finally:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        await auth.close()
        await server.stop(0)


async def test_a_watch_gone_silent_is_broken_and_reconnected() -> None:
    servicer = ScriptedWatch(heartbeats=3)  # type: ignore[abstract]  # (see the class)
    async with watching(servicer) as authz:
        assert await authz.wait_synced(5)
        assert servicer.watches[0].heartbeat_interval.ToTimedelta().total_seconds() > 0  # the edge asks
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        # Heartbeats keep it trusted; the silence after them makes the edge give up and watch anew.
        while len(servicer.watches) < 2:
            assert loop.time() < deadline, "a silent watch was never given up"
            await asyncio.sleep(0.02)
        assert authz.reconnects >= 1


async def test_a_watch_from_an_authsvc_without_heartbeats_is_kept() -> None:
    """An authsvc that predates heartbeats is not mistaken for a dead one (the edge would otherwise flush
    its cache on every reconnect)."""
    servicer = ScriptedWatch(heartbeats=0)  # type: ignore[abstract]  # (see the class)
    async with watching(servicer) as authz:
        assert await authz.wait_synced(5)
        await asyncio.sleep(1.5)  # three times WATCH_SILENCE
        assert len(servicer.watches) == 1 and authz.reconnects == 0
        assert authz.cache_use() is CacheUse.FIRST
