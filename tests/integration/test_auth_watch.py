"""authsvc's WatchKeyChanges stream over real gRPC on loopback, on SQLite and PostgreSQL (db_url):
the sync, changes, heartbeats, and the end of the stream when the server stops."""

from __future__ import annotations

import asyncio

import grpc
from google.protobuf import duration_pb2, field_mask_pb2

from authsvc.testing import ACTOR, new_account, new_key, running_authsvc
from travel.auth.v1 import auth_pb2 as pb


async def test_watch_heartbeats_only_for_a_watcher_that_asks(sqlite_url: str) -> None:
    async with running_authsvc(sqlite_url) as (_server, stub):
        beating = stub.WatchKeyChanges(
            pb.WatchKeyChangesRequest(heartbeat_interval=duration_pb2.Duration(nanos=100_000_000))
        )
        quiet = stub.WatchKeyChanges(pb.WatchKeyChangesRequest())
        try:
            assert (await asyncio.wait_for(beating.read(), 5)).kind == pb.KEY_CHANGE_KIND_SYNC
            assert (await asyncio.wait_for(quiet.read(), 5)).kind == pb.KEY_CHANGE_KIND_SYNC
            for _ in range(3):  # silence is answered with heartbeats
                assert (await asyncio.wait_for(beating.read(), 5)).kind == pb.KEY_CHANGE_KIND_HEARTBEAT
            account = await new_account(stub)
            key = await new_key(stub, account.id)
            await stub.RevokeKey(pb.RevokeKeyRequest(key_id=key.key.id, actor=ACTOR))
            while (msg := await asyncio.wait_for(beating.read(), 5)).kind == pb.KEY_CHANGE_KIND_HEARTBEAT:
                pass
            assert (msg.kind, msg.key_id) == (pb.KEY_CHANGE_KIND_REVOKED, key.key.id)
            # A watcher that did not ask never gets one: its next message after SYNC is the change.
            msg = await asyncio.wait_for(quiet.read(), 5)
            assert (msg.kind, msg.key_id) == (pb.KEY_CHANGE_KIND_REVOKED, key.key.id)
        finally:
            beating.cancel()
            quiet.cancel()


async def test_watch_starts_with_sync_and_sees_changes_fast(db_url: str) -> None:
    async with running_authsvc(db_url) as (_server, stub):
        account = await new_account(stub)
        k1 = await new_key(stub, account.id)
        k2 = await new_key(stub, account.id)
        call = stub.WatchKeyChanges(pb.WatchKeyChangesRequest())
        scoped = stub.WatchKeyChanges(pb.WatchKeyChangesRequest(account_id=account.id))
        other = await new_account(stub, name="Other")
        k3 = await new_key(stub, other.id)
        try:
            first = await asyncio.wait_for(call.read(), 5)
            assert first.kind == pb.KEY_CHANGE_KIND_SYNC
            assert (await asyncio.wait_for(scoped.read(), 5)).kind == pb.KEY_CHANGE_KIND_SYNC
            await stub.RevokeKey(pb.RevokeKeyRequest(key_id=k3.key.id, actor=ACTOR))
            await stub.RevokeKey(pb.RevokeKeyRequest(key_id=k1.key.id, actor=ACTOR))
            await stub.RotateKey(pb.RotateKeyRequest(key_id=k2.key.id, actor=ACTOR))
            await stub.UpdateKey(
                pb.UpdateKeyRequest(
                    key_id=k2.key.id,
                    name="n",
                    actor=ACTOR,
                    update_mask=field_mask_pb2.FieldMask(paths=["name"]),
                )
            )
            await stub.SetAccountStatus(
                pb.SetAccountStatusRequest(
                    account_id=account.id, status=pb.ACCOUNT_STATUS_READ_ONLY, actor=ACTOR
                )
            )
            got = [await asyncio.wait_for(call.read(), 1) for _ in range(5)]
            assert [(m.kind, m.key_id) for m in got] == [
                (pb.KEY_CHANGE_KIND_REVOKED, k3.key.id),
                (pb.KEY_CHANGE_KIND_REVOKED, k1.key.id),
                (pb.KEY_CHANGE_KIND_ROTATED, k2.key.id),
                (pb.KEY_CHANGE_KIND_UPDATED, k2.key.id),
                (pb.KEY_CHANGE_KIND_ACCOUNT_UPDATED, ""),
            ]
            first_scoped = await asyncio.wait_for(scoped.read(), 1)
            assert (first_scoped.kind, first_scoped.key_id) == (pb.KEY_CHANGE_KIND_REVOKED, k1.key.id)
        finally:
            call.cancel()
            scoped.cancel()


async def test_stop_ends_watch_streams_promptly(sqlite_url: str) -> None:
    async with running_authsvc(sqlite_url) as (server, stub):
        watch = stub.WatchKeyChanges(pb.WatchKeyChangesRequest())
        assert (await asyncio.wait_for(watch.read(), 5)).kind == pb.KEY_CHANGE_KIND_SYNC
        started = asyncio.get_running_loop().time()
        await server.stop(30)
        assert await asyncio.wait_for(watch.read(), 5) is grpc.aio.EOF
        assert asyncio.get_running_loop().time() - started < 10
