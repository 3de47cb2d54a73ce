"""On PostgreSQL an authsvc process hears its own committed key changes through its listener too, not only
from the handler that made them. A RevokeKey whose COMMIT went through but whose handler never reached its
own publish -- the caller's deadline ran out or its connection broke during the commit (the handler is
cancelled), or the commit's answer was lost with the connection -- left that process's grant cache and its
edges' caches allowing the revoked key until their entries expired (up to 60 s): the caller retried on the
other authsvc, which found the key already revoked and published nothing, and the listener skipped the
NOTIFY as its own (the operators' drill: a revoked key still accepted by edge #1 15 s after its revocation).
A change heard both ways reaches the watchers once (authsvc._watch.ChangeHub.publish_once)."""

from __future__ import annotations

import asyncio

from authsvc._model import Actor
from authsvc.testing import ACTOR, new_account, new_key, running_authsvc
from svckit.clock import utcnow
from svckit.ids import new_id
from tests.integration.auth_requests import authz
from travel.auth.v1 import auth_pb2 as pb


async def test_a_revocation_committed_without_its_publish_is_still_heard_by_its_own_process(
    pg_url: str,
) -> None:
    async with running_authsvc(pg_url) as (server, stub):
        account = await new_account(stub)
        made = await new_key(stub, account.id)
        assert (await stub.Authorize(authz(made.secret))).decision == pb.DECISION_ALLOW  # now cached
        watch = stub.WatchKeyChanges(pb.WatchKeyChangesRequest())
        try:
            assert (await watch.read()).kind == pb.KEY_CHANGE_KIND_SYNC
            # What RevokeKey's handler commits; the handler itself stops here (cancelled after the commit).
            await server.repo.revoke_key(
                made.key.id, "test", Actor("ops:test", "192.0.2.9"), utcnow(), new_id("obx")
            )
            change = await asyncio.wait_for(watch.read(), 30)
            assert (change.kind, change.key_id) == (pb.KEY_CHANGE_KIND_REVOKED, made.key.id)
            got = await stub.Authorize(authz(made.secret))
            assert (got.decision, got.error_type) == (pb.DECISION_DENY, "invalid_api_key")
        finally:
            watch.cancel()


async def test_a_change_heard_from_the_handler_and_the_listener_reaches_watchers_once(pg_url: str) -> None:
    async with running_authsvc(pg_url) as (server, stub):
        account = await new_account(stub)
        first, second = await new_key(stub, account.id), await new_key(stub, account.id)
        watch = stub.WatchKeyChanges(pb.WatchKeyChangesRequest())
        try:
            assert (await watch.read()).kind == pb.KEY_CHANGE_KIND_SYNC
            await stub.RevokeKey(pb.RevokeKeyRequest(key_id=first.key.id, reason="test", actor=ACTOR))
            # Heard only through the listener, which delivers NOTIFYs in commit order: once this arrives the
            # first revocation's NOTIFY has been handled too.
            await server.repo.revoke_key(
                second.key.id, "test", Actor("ops:test", "192.0.2.9"), utcnow(), new_id("obx")
            )
            seen: list[str] = []
            while second.key.id not in seen:
                change = await asyncio.wait_for(watch.read(), 30)
                assert change.kind == pb.KEY_CHANGE_KIND_REVOKED
                seen.append(change.key_id)
            assert seen == [first.key.id, second.key.id]
        finally:
            watch.cancel()
