"""API keys in authsvc over real gRPC on loopback, on SQLite and PostgreSQL (db_url): their
lifecycle, rotation grace, Authorize's refusals, updates, rate limits, revocation and last use."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import grpc
from google.protobuf import duration_pb2, field_mask_pb2

from authsvc._keys import environment_of, hash_secret
from authsvc.testing import ACTOR, error_of, new_account, new_key, running_authsvc
from tests.integration.auth_requests import LIVE, SANDBOX, authz
from travel.auth.v1 import auth_pb2 as pb


async def test_key_lifecycle(db_url: str) -> None:
    async with running_authsvc(db_url) as (server, stub):
        account = await new_account(stub)
        assert account.id.startswith("acct_") and account.status == pb.ACCOUNT_STATUS_ACTIVE
        created = await new_key(stub, account.id)
        secret, key = created.secret, created.key
        assert secret.startswith("svc_live_") and environment_of(secret) == "live"
        assert key.id.startswith("key_") and key.hint == f"svc_live_...{secret[-4:]}"
        assert key.status == pb.KEY_STATUS_ACTIVE
        stored = await server.repo.get_key(key.id)
        assert stored.secret_hash == hash_secret(secret) and secret not in repr(stored)

        auth = await stub.Authenticate(pb.AuthenticateRequest(api_key=secret))
        assert auth.key.id == key.id and auth.account.id == account.id

        ok = await stub.Authorize(authz(secret))
        assert ok.decision == pb.DECISION_ALLOW and ok.key.id == key.id
        assert 0 < ok.cache_ttl.ToTimedelta().total_seconds() <= 60
        got = (await stub.GetKey(pb.GetKeyRequest(key_id=key.id))).key
        assert got.scopes == ["hotels:read", "hotels:write"] and not hasattr(got, "secret")

        # Rotation: new id and secret, same name/scopes; both work until the old one expires.
        rotated = await stub.RotateKey(
            pb.RotateKeyRequest(key_id=key.id, grace_period=duration_pb2.Duration(seconds=3600), actor=ACTOR)
        )
        assert rotated.new_key.id != key.id and rotated.secret != secret
        assert rotated.new_key.name == key.name and list(rotated.new_key.scopes) == list(key.scopes)
        assert (
            rotated.new_key.rotated_from_key_id == key.id
            and rotated.old_key.rotated_to_key_id == rotated.new_key.id
        )
        assert rotated.old_key.status == pb.KEY_STATUS_EXPIRING
        expires = rotated.old_key.expires_at.ToDatetime(dt.UTC)
        assert dt.timedelta(minutes=59) < expires - dt.datetime.now(dt.UTC) <= dt.timedelta(hours=1)
        for s in (secret, rotated.secret):
            assert (await stub.Authorize(authz(s))).decision == pb.DECISION_ALLOW
        # The old key's answer kept before the rotation is not given again: it now shows the expiry.
        assert (await stub.Authorize(authz(secret))).key.status == pb.KEY_STATUS_EXPIRING
        old_ttl = (await stub.Authorize(authz(secret))).cache_ttl.ToTimedelta().total_seconds()
        assert old_ttl <= 60

        # Revocation is immediate, even with the key cached.
        revoked = await stub.RevokeKey(
            pb.RevokeKeyRequest(key_id=rotated.new_key.id, reason="leak", actor=ACTOR)
        )
        assert revoked.key.status == pb.KEY_STATUS_REVOKED
        denied = await stub.Authorize(authz(rotated.secret))
        assert (denied.decision, denied.error_type) == (pb.DECISION_DENY, "invalid_api_key")
        code, etype, _ = await error_of(stub.Authenticate(pb.AuthenticateRequest(api_key=rotated.secret)))
        assert (code, etype) == (grpc.StatusCode.UNAUTHENTICATED, "invalid_api_key")

        events = (await stub.ListAuditEvents(pb.ListAuditEventsRequest(account_id=account.id))).events
        assert [e.action for e in events] == [
            "account.created",
            "key.created",
            "key.rotated",
            "key.created",
            "key.revoked",
        ]
        for e in events:
            assert e.actor.user == ACTOR.user and e.actor.source_address == ACTOR.source_address
        assert events[4].key_id == rotated.new_key.id and events[4].after["reason"] == "leak"

        rows = await server.repo.outbox_rows()
        assert [(r["type"], r["sent_at"]) for r in rows] == [("apikey.revoked", None)]


async def test_grace_zero_expires_old_key_at_once_and_bad_grace_changes_nothing(db_url: str) -> None:
    async with running_authsvc(db_url) as (server, stub):
        account = await new_account(stub)
        created = await new_key(stub, account.id)
        before = await server.repo.count_audit()
        for seconds in (-1, 7 * 86400 + 1):
            code, etype, msg = await error_of(
                stub.RotateKey(
                    pb.RotateKeyRequest(
                        key_id=created.key.id,
                        actor=ACTOR,
                        grace_period=duration_pb2.Duration(seconds=seconds),
                    )
                )
            )
            assert (code, etype) == (
                grpc.StatusCode.INVALID_ARGUMENT,
                "invalid_request",
            ) and "grace_period" in msg
        assert await server.repo.count_audit() == before
        assert (await stub.GetKey(pb.GetKeyRequest(key_id=created.key.id))).key.status == pb.KEY_STATUS_ACTIVE
        rotated = await stub.RotateKey(
            pb.RotateKeyRequest(
                key_id=created.key.id, grace_period=duration_pb2.Duration(seconds=0), actor=ACTOR
            )
        )
        assert rotated.old_key.status == pb.KEY_STATUS_EXPIRED
        assert (await stub.Authorize(authz(created.secret))).error_type == "invalid_api_key"
        assert (await stub.Authorize(authz(rotated.secret))).decision == pb.DECISION_ALLOW
        code, etype, _ = await error_of(
            stub.RotateKey(pb.RotateKeyRequest(key_id=created.key.id, actor=ACTOR))
        )
        assert etype == "conflict"


async def test_default_grace_is_24_hours(sqlite_url: str) -> None:
    async with running_authsvc(sqlite_url) as (_server, stub):
        account = await new_account(stub)
        created = await new_key(stub, account.id)
        rotated = await stub.RotateKey(pb.RotateKeyRequest(key_id=created.key.id, actor=ACTOR))
        left = rotated.old_key.expires_at.ToDatetime(dt.UTC) - dt.datetime.now(dt.UTC)
        assert dt.timedelta(hours=23, minutes=59) < left <= dt.timedelta(hours=24)


async def test_authorize_refusals_over_grpc(db_url: str) -> None:
    async with running_authsvc(db_url) as (_server, stub):
        account = await new_account(stub)
        live = (await new_key(stub, account.id, allowed_sources=("192.0.2.0/24", "2001:db8::/32"))).secret
        test = (await new_key(stub, account.id, environment=SANDBOX)).secret
        cases = [
            (authz(""), "missing_api_key"),
            (authz("svc_live_nonsense"), "invalid_api_key"),
            (authz(live[:-1] + ("A" if live[-1] != "A" else "B")), "invalid_api_key"),
            (authz(test, env=LIVE), "environment_mismatch"),
            (authz(live, env=SANDBOX), "environment_mismatch"),
            (authz(live, scope="esim:read"), "missing_scope"),
            (authz(live, source="198.51.100.1"), "ip_not_allowed"),
            (authz(live, source="2001:db9::1"), "ip_not_allowed"),
            (authz(live, source="2001:db8::42"), ""),
            (authz(live, source="192.0.2.99", scope="hotels:write", write=True), ""),
            (authz(test, env=SANDBOX, source="10.1.2.3"), ""),
        ]
        for request, expected in cases:
            resp = await stub.Authorize(request)
            assert resp.error_type == expected, (request.required_scope, request.source_address, resp)
            assert (resp.decision == pb.DECISION_ALLOW) == (expected == "")
        missing = await stub.Authorize(authz(live, scope="flights:write"))
        assert "flights:write" in missing.error_message
        await stub.SetAccountStatus(
            pb.SetAccountStatusRequest(account_id=account.id, status=pb.ACCOUNT_STATUS_READ_ONLY, actor=ACTOR)
        )
        ro = await stub.Authorize(authz(live, scope="hotels:write", write=True))
        assert ro.error_type == "account_read_only"
        assert (await stub.Authorize(authz(live))).decision == pb.DECISION_ALLOW
        for bad, field in [
            (pb.AuthorizeRequest(api_key=live, required_scope="hotels:read"), "environment"),
            (authz(live, scope="hotels:delete"), "required_scope"),
            (authz(live, source="not-an-ip"), "source_address"),
        ]:
            code, etype, msg = await error_of(stub.Authorize(bad))
            assert (code, etype) == (grpc.StatusCode.INVALID_ARGUMENT, "invalid_request") and field in msg


async def test_bad_input_is_refused_and_changes_nothing(db_url: str) -> None:
    async with running_authsvc(db_url) as (server, stub):
        account = await new_account(stub)
        key = (await new_key(stub, account.id)).key

        async def snapshot() -> tuple[int, list[pb.ApiKey]]:
            keys = (await stub.ListKeys(pb.ListKeysRequest(account_id=account.id, include_revoked=True))).keys
            return await server.repo.count_audit(), list(keys)

        before = await snapshot()
        create: dict[str, Any] = dict(
            account_id=account.id, environment=LIVE, name="k", scopes=["hotels:read"], actor=ACTOR
        )
        bad_creates = [
            ({**create, "scopes": ["hotels:delete"]}, "invalid_request", "scopes"),
            ({**create, "scopes": []}, "invalid_request", "scopes"),
            ({**create, "allowed_sources": ["10.0.0.0/33"]}, "invalid_request", "allowed_sources"),
            ({**create, "allowed_sources": ["10.0.0.1/8"]}, "invalid_request", "host bits"),
            (
                {**create, "allowed_sources": [f"10.0.{i}.0/24" for i in range(51)]},
                "invalid_request",
                "at most",
            ),
            ({**create, "name": "n" * 201}, "invalid_request", "name"),
            ({**create, "environment": pb.ENVIRONMENT_UNSPECIFIED}, "invalid_request", "environment"),
            ({**create, "actor": pb.Actor()}, "invalid_request", "actor.user"),
            ({**create, "account_id": "acct_doesnotexist"}, "not_found", "account_id"),
            ({**create, "account_id": "bogus"}, "invalid_request", "account_id"),
        ]
        for fields, etype, needle in bad_creates:
            _, got, msg = await error_of(stub.CreateKey(pb.CreateKeyRequest(**fields)))
            assert got == etype and needle in msg, (fields, got, msg)
        mask = field_mask_pb2.FieldMask
        bad_updates = [
            (
                pb.UpdateKeyRequest(
                    key_id=key.id, update_mask=mask(paths=["scopes"]), scopes=["x:y"], actor=ACTOR
                ),
                "invalid_request",
            ),
            (
                pb.UpdateKeyRequest(key_id=key.id, update_mask=mask(paths=["secret"]), actor=ACTOR),
                "invalid_request",
            ),
            (pb.UpdateKeyRequest(key_id=key.id, actor=ACTOR), "invalid_request"),
            (
                pb.UpdateKeyRequest(
                    key_id=key.id,
                    update_mask=mask(paths=["allowed_sources"]),
                    allowed_sources=["::1/129"],
                    actor=ACTOR,
                ),
                "invalid_request",
            ),
            (
                pb.UpdateKeyRequest(key_id="key_unknown", update_mask=mask(paths=["name"]), actor=ACTOR),
                "not_found",
            ),
            (
                pb.UpdateKeyRequest(key_id=key.id, update_mask=mask(paths=["name"]), name="x"),
                "invalid_request",
            ),
        ]
        for request, etype in bad_updates:
            assert (await error_of(stub.UpdateKey(request)))[1] == etype
        for call in [
            stub.RevokeKey(pb.RevokeKeyRequest(key_id="key_unknown", actor=ACTOR)),
            stub.RotateKey(pb.RotateKeyRequest(key_id="key_unknown", actor=ACTOR)),
            stub.GetKey(pb.GetKeyRequest(key_id="key_unknown")),
            stub.GetAccount(pb.GetAccountRequest(account_id="acct_unknown")),
            stub.SetAccountStatus(
                pb.SetAccountStatusRequest(
                    account_id="acct_unknown", status=pb.ACCOUNT_STATUS_READ_ONLY, actor=ACTOR
                )
            ),
        ]:
            assert (await error_of(call))[1] == "not_found"
        _, etype, _ = await error_of(stub.RevokeKey(pb.RevokeKeyRequest(key_id=key.id)))  # no actor
        assert etype == "invalid_request"
        _, etype, _ = await error_of(stub.CreateAccount(pb.CreateAccountRequest(name="", actor=ACTOR)))
        assert etype == "invalid_request"
        _, etype, _ = await error_of(
            stub.CreateAccount(pb.CreateAccountRequest(name="x", admin_emails=["not-mail"], actor=ACTOR))
        )
        assert etype == "invalid_request"
        assert await snapshot() == before


async def test_update_key_audits_changes_and_invalidates_the_cache(db_url: str) -> None:
    async with running_authsvc(db_url) as (_server, stub):
        account = await new_account(stub)
        created = await new_key(stub, account.id)
        for _ in range(2):  # the second answer is the one kept from the first
            assert (await stub.Authorize(authz(created.secret))).decision == pb.DECISION_ALLOW
        updated = await stub.UpdateKey(
            pb.UpdateKeyRequest(
                key_id=created.key.id,
                update_mask=field_mask_pb2.FieldMask(paths=["scopes", "allowed_sources", "name"]),
                name="batch",
                scopes=["esim:read"],
                allowed_sources=["2001:db8::/48"],
                actor=ACTOR,
            )
        )
        assert updated.key.name == "batch" and list(updated.key.scopes) == ["esim:read"]
        again = await stub.Authorize(authz(created.secret))  # the very request whose answer was kept
        assert again.error_type == "ip_not_allowed" and again.key.name == "batch"
        assert (
            await stub.Authorize(authz(created.secret, source="2001:db8::1"))
        ).error_type == "missing_scope"
        assert (await stub.Authorize(authz(created.secret, "esim:read"))).error_type == "ip_not_allowed"
        events = (
            await stub.ListAuditEvents(
                pb.ListAuditEventsRequest(account_id=account.id, key_id=created.key.id)
            )
        ).events
        last = events[-1]
        assert last.action == "key.updated"
        assert dict(last.before)["name"] == "checkout" and dict(last.after)["name"] == "batch"
        assert list(last.after["scopes"]) == ["esim:read"]
        assert list(last.before["allowed_sources"]) == [] and list(last.after["allowed_sources"]) == [
            "2001:db8::/48"
        ]


async def test_a_keys_rate_limit_is_set_at_create_and_update_audited_and_sent_to_the_edge(
    db_url: str,
) -> None:
    async with running_authsvc(db_url) as (_server, stub):
        account = await new_account(stub)
        default = await new_key(stub, account.id)
        assert default.key.rate_limit == 0  # the environment's default
        created = await stub.CreateKey(
            pb.CreateKeyRequest(
                account_id=account.id,
                environment=LIVE,
                name="batch",
                scopes=["account:read"],
                rate_limit=7,
                actor=ACTOR,
            )
        )
        assert created.key.rate_limit == 7
        assert (await stub.Authorize(authz(created.secret, "account:read"))).key.rate_limit == 7  # now cached
        rate_only = field_mask_pb2.FieldMask(paths=["rate_limit"])
        for bad in (-1, 100_001):
            request = pb.UpdateKeyRequest(
                key_id=created.key.id, update_mask=rate_only, rate_limit=bad, actor=ACTOR
            )
            _, etype, message = await error_of(stub.UpdateKey(request))
            assert etype == "invalid_request" and "rate_limit" in message
        updated = await stub.UpdateKey(
            pb.UpdateKeyRequest(key_id=created.key.id, update_mask=rate_only, rate_limit=250, actor=ACTOR)
        )
        assert updated.key.rate_limit == 250 and updated.key.name == "batch"
        assert (await stub.Authorize(authz(created.secret, "account:read"))).key.rate_limit == 250
        events = (
            await stub.ListAuditEvents(
                pb.ListAuditEventsRequest(account_id=account.id, key_id=created.key.id)
            )
        ).events
        assert [e.action for e in events] == ["key.created", "key.updated"]
        assert dict(events[-1].before) == {"rate_limit": 7} and dict(events[-1].after) == {"rate_limit": 250}
        rotated = await stub.RotateKey(pb.RotateKeyRequest(key_id=created.key.id, actor=ACTOR))
        assert rotated.new_key.rate_limit == 250  # the successor keeps the limit
        _, etype, _ = await error_of(
            stub.CreateKey(
                pb.CreateKeyRequest(
                    account_id=account.id,
                    environment=LIVE,
                    scopes=["account:read"],
                    rate_limit=-5,
                    actor=ACTOR,
                )
            )
        )
        assert etype == "invalid_request"


async def test_revoke_twice_is_idempotent(db_url: str) -> None:
    async with running_authsvc(db_url) as (server, stub):
        account = await new_account(stub)
        key = (await new_key(stub, account.id)).key
        a = await stub.RevokeKey(pb.RevokeKeyRequest(key_id=key.id, actor=ACTOR))
        b = await stub.RevokeKey(pb.RevokeKeyRequest(key_id=key.id, actor=ACTOR))
        assert a.key.revoked_at == b.key.revoked_at
        assert len(await server.repo.outbox_rows()) == 1
        _, etype, _ = await error_of(
            stub.UpdateKey(
                pb.UpdateKeyRequest(
                    key_id=key.id, update_mask=field_mask_pb2.FieldMask(paths=["name"]), name="x", actor=ACTOR
                )
            )
        )
        assert etype == "conflict"


async def test_last_used_is_batched(db_url: str) -> None:
    async with running_authsvc(db_url, last_used_interval=3.0) as (server, stub):
        account = await new_account(stub)
        created = await new_key(stub, account.id)
        assert (await server.repo.get_key(created.key.id)).last_used_at is None
        first = await stub.Authorize(authz(created.secret))
        assert not first.key.HasField("last_used_at")
        # Within a second the kept answer is given again as it was; a use is recorded at most once a second.
        again = await stub.Authorize(authz(created.secret))
        assert again == first
        await asyncio.sleep(1.05)
        seen = server.servicer.last_used.seen(created.key.id)
        answer = await stub.Authorize(authz(created.secret))
        # Authorize answers with the use before it (from memory), to the second.
        assert seen is not None and seen.microsecond == 0
        assert answer.key.last_used_at.ToDatetime(tzinfo=dt.UTC) == seen
        recorded = server.servicer.last_used.seen(created.key.id)
        assert recorded is not None and recorded > seen  # this call was recorded
        assert answer.key.status == pb.KEY_STATUS_ACTIVE
        # Shown at once from memory, stored by the next flush: one write for many requests.
        assert (await stub.GetKey(pb.GetKeyRequest(key_id=created.key.id))).key.HasField("last_used_at")
        deadline = asyncio.get_running_loop().time() + 10
        while (await server.repo.get_key(created.key.id)).last_used_at is None:
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.05)
        stored = (await server.repo.get_key(created.key.id)).last_used_at
        assert stored is not None and abs((dt.datetime.now(dt.UTC) - stored).total_seconds()) < 60
