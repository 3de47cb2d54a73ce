"""The edge's WatchKeyChanges loop against a real gRPC server that plays a scripted authsvc: a watch that
heartbeats and then goes silent (a dead network TCP has not noticed yet) counts as broken; heartbeats that
are only held up stop the cache answering first but keep the watch."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc

from edge.authcache import Answer, CacheUse, Caller
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
async def watching(servicer: auth_pb2_grpc.AuthServiceServicer) -> AsyncIterator[Authorizer]:
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


class HeldUp(auth_pb2_grpc.AuthServiceServicer):
    """SYNC, heartbeats, then one held up for ``pause`` seconds (as a busy edge receives them, issue 20),
    then heartbeats again, on the one stream."""

    def __init__(self, pause: float) -> None:
        self.pause = pause
        self.watches: list[pb.WatchKeyChangesRequest] = []
        self.paused = asyncio.Event()
        self.resumed = asyncio.Event()

    async def WatchKeyChanges(self, request: pb.WatchKeyChangesRequest, context: Any) -> AsyncIterator[Any]:
        self.watches.append(request)
        interval = request.heartbeat_interval.ToTimedelta().total_seconds()
        yield pb.WatchKeyChangesResponse(kind=pb.KEY_CHANGE_KIND_SYNC)
        for n in range(1_000):
            if n == 3:
                self.paused.set()
                try:
                    await asyncio.sleep(self.pause)
                finally:  # also when the edge gave the stream up meanwhile
                    self.resumed.set()
            await asyncio.sleep(interval)
            yield pb.WatchKeyChangesResponse(kind=pb.KEY_CHANGE_KIND_HEARTBEAT)


async def test_heartbeats_held_up_keep_the_watch_and_the_cache() -> None:
    """Under the soak's stream flood the edge read authsvc's heartbeats up to 0.6 s late (sent on time,
    delivered late): it tore the watch down after 0.5 s, and each reconnect's SYNC emptied the cache and
    had every open stream re-check its key with authsvc. Now a silence only stops the cache answering
    first (revocation stays within its bound); the stream is kept, and once the held-up heartbeat is read
    the cache, still full, answers first again."""
    servicer = HeldUp(pause=1.5)  # type: ignore[abstract]  # (see ScriptedWatch)
    async with watching(servicer) as authz:
        assert await authz.wait_synced(5)
        cached = Answer(True, caller=Caller("key_1", "acct_1", "live", (), "active"))
        authz.cache.put(("k",), cached, 60, authz.monotonic(), authz.cache.generation)
        await asyncio.wait_for(servicer.resumed.wait(), 10)  # silent for longer than WATCH_SILENCE by now
        assert authz.cache_use() is not CacheUse.FIRST
        assert (len(servicer.watches), authz.reconnects) == (1, 0)
        heard = authz.watch_heard
        for _ in range(500):  # until the next heartbeat is read
            if authz.watch_heard != heard:
                break
            await asyncio.sleep(0.02)
        assert authz.cache_use() is CacheUse.FIRST
        assert (len(servicer.watches), authz.reconnects) == (1, 0)
        assert authz.cache.get(("k",), authz.monotonic()) == cached
