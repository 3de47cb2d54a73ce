"""An edge watches one authsvc and asks any: on PostgreSQL each authsvc process hears of a revocation made on
another from NOTIFY, in its own time, so the edge's watch may tell of it before the authsvc it then asks
has heard. That authsvc's ALLOW, kept for its TTL (up to 60 s), outlived the only drop the watch sends (the
operators' drill: a revoked key still accepted by an edge 15 s after its revocation, at any phase). Now a
key the watch told was revoked is refused whatever authsvc answers, and no answer about a changed key or
account is kept, for edge.authcache.HOLD. Here the authsvc asked is a real one that has not been told yet."""

from __future__ import annotations

from authsvc.testing import ACTOR, new_account, new_key, running_authsvc
from edge.authorizer import Authorizer
from edge.environments import Environment
from svckit.clients import AuthClient
from travel.auth.v1 import auth_pb2 as pb


async def test_a_key_the_watch_told_revoked_is_refused_though_the_authsvc_asked_still_allows(
    sqlite_url: str,
) -> None:
    async with (
        running_authsvc(sqlite_url) as (server, stub),
        AuthClient(f"127.0.0.1:{server.port}", None) as auth,
    ):
        account = await new_account(stub)
        made = await new_key(stub, account.id, scopes=("account:read",))
        secret, key_id = made.secret, made.key.id
        authz = Authorizer(auth)
        ask = (secret, Environment.LIVE, "account:read", "192.0.2.1", False, "req_1")
        authz.apply_change(pb.KEY_CHANGE_KIND_SYNC, "", "")  # the watch is up: the cache answers first
        assert (await authz.answer(*ask)).allowed
        # The watch (on another authsvc) tells of the revocation before the authsvc asked has heard of it.
        authz.apply_change(pb.KEY_CHANGE_KIND_REVOKED, key_id, account.id)
        for _ in range(3):
            got = await authz.answer(*ask)
            assert (got.allowed, got.error_type) == (False, "invalid_api_key")
        assert len(authz.cache) == 0  # the authsvc's ALLOW was not kept
        # Another key of the account, changed the same way but not revoked, is answered; not kept meanwhile.
        other = await new_key(stub, account.id, scopes=("account:read",))
        authz.apply_change(pb.KEY_CHANGE_KIND_UPDATED, other.key.id, account.id)
        assert (await authz.answer(other.secret, *ask[1:])).allowed
        assert len(authz.cache) == 0
        await stub.RevokeKey(pb.RevokeKeyRequest(key_id=key_id, reason="test", actor=ACTOR))
        assert not (await authz.answer(*ask)).allowed
