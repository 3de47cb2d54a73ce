"""While authsvc's key-change listener is disconnected (its PostgreSQL connection ended, as in a database
outage or failover) the process cannot hear another's revocation. Before, it kept answering from its key
cache and kept heartbeating its watch streams, so edges kept trusting theirs: a key revoked just as the
listener lost its connection stayed accepted until the listener was back (the operators' drill: 9 s in the
database phase). Now, until it listens again, the process reads every key (no cache), and its watch
streams send no heartbeat (edges stop trusting their caches first) and a new stream no SYNC."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from google.protobuf import duration_pb2

from authsvc._model import Actor
from authsvc.testing import new_account, new_key, running_authsvc
from svckit.clock import utcnow
from svckit.ids import new_id
from tests.conftest import PG_DB, PG_HOST, PG_PORT
from tests.integration.auth_requests import authz
from travel.auth.v1 import auth_pb2 as pb


async def test_a_process_that_cannot_hear_reads_every_key_and_stops_heartbeats(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running_authsvc(pg_url) as (server, stub):
        assert server.listener is not None
        account = await new_account(stub)
        made = await new_key(stub, account.id)
        assert (await stub.Authorize(authz(made.secret))).decision == pb.DECISION_ALLOW  # now cached
        watch = stub.WatchKeyChanges(
            pb.WatchKeyChangesRequest(heartbeat_interval=duration_pb2.Duration(nanos=100_000_000))
        )
        real_connect = asyncpg.connect
        back = asyncio.Event()

        async def connect_when_back(*args: object, **kwargs: object) -> asyncpg.Connection:
            await back.wait()
            return await real_connect(*args, **kwargs)

        try:
            assert (await watch.read()).kind == pb.KEY_CHANGE_KIND_SYNC
            monkeypatch.setattr(asyncpg, "connect", connect_when_back)
            admin = await real_connect(host=PG_HOST, port=PG_PORT, user="postgres", database=PG_DB)
            try:
                killed = await admin.fetchval(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE query LIKE $1 AND pid <> pg_backend_pid()",
                    f"LISTEN %{server.listener.channel}%",
                )
            finally:
                await admin.close()
            assert killed == 1
            while (await asyncio.wait_for(watch.read(), 30)).kind != pb.KEY_CHANGE_KIND_SYNC:
                pass  # heartbeats until the listener noticed; then a sync: drop every cache
            # Revoked meanwhile, its NOTIFY unheard here (as one made on another authsvc process).
            await server.repo.revoke_key(
                made.key.id, "test", Actor("ops:test", "192.0.2.9"), utcnow(), new_id("obx")
            )
            got = await stub.Authorize(authz(made.secret))
            assert (got.decision, got.error_type) == (pb.DECISION_DENY, "invalid_api_key")
            following = asyncio.ensure_future(watch.read())
            done, _ = await asyncio.wait({following}, timeout=1.0)
            assert not done  # silent, though heartbeats were asked for every 0.1 s: none while deaf
            back.set()
            assert (await asyncio.wait_for(following, 30)).kind == pb.KEY_CHANGE_KIND_SYNC
            assert (await asyncio.wait_for(watch.read(), 30)).kind == pb.KEY_CHANGE_KIND_HEARTBEAT
        finally:
            back.set()
            watch.cancel()
