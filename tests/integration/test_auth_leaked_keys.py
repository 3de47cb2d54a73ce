"""authsvc's RevokeLeakedKeys on SQLite and PostgreSQL: one call revokes every reported key of ours that
still works (the audit record, apikey.revoked and apikey.leaked in the outbox, a change for the watchers),
answers which hashes were ours, leaves a dead key as it is, and changes nothing when the batch comes again;
input it cannot take is refused with nothing changed."""

from __future__ import annotations

import asyncio
import hashlib

import grpc
import pytest
from google.protobuf import duration_pb2

from authsvc.testing import ACTOR, error_of, new_account, running_authsvc
from travel.auth.v1 import auth_pb2 as pb

REPORTER = "GitHub secret scanning"
SCANNER = pb.Actor(user="secret-scanning")


def sha(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


async def test_revoke_leaked_keys(db_url: str) -> None:
    async with running_authsvc(db_url) as (server, stub):
        account = await new_account(stub)

        async def key(env: pb.Environment.ValueType = pb.ENVIRONMENT_LIVE) -> pb.CreateKeyResponse:
            made: pb.CreateKeyResponse = await stub.CreateKey(
                pb.CreateKeyRequest(
                    account_id=account.id, environment=env, scopes=["account:read"], actor=ACTOR
                )
            )
            return made

        live, test, dead = await key(), await key(pb.ENVIRONMENT_SANDBOX), await key()
        await stub.RevokeKey(pb.RevokeKeyRequest(key_id=dead.key.id, reason="by hand", actor=ACTOR))
        old = await key()
        successor = await stub.RotateKey(
            pb.RotateKeyRequest(
                key_id=old.key.id, grace_period=duration_pb2.Duration(seconds=3600), actor=ACTOR
            )
        )
        unknown = "0" * 64
        tokens = [
            pb.LeakedToken(token_hash=sha(s), url="https://github.com/p/r/blob/x/a.py", source="content")
            for s in (live.secret, test.secret, dead.secret, old.secret)
        ] + [pb.LeakedToken(token_hash=unknown)]
        watch = stub.WatchKeyChanges(pb.WatchKeyChangesRequest())
        assert (await watch.read()).kind == pb.KEY_CHANGE_KIND_SYNC
        request = pb.RevokeLeakedKeysRequest(tokens=tokens, reporter=REPORTER, actor=SCANNER)
        first = await stub.RevokeLeakedKeys(request)
        assert [(k.key_id, k.revoked_now) for k in first.keys] == [
            (live.key.id, True),
            (test.key.id, True),
            (dead.key.id, False),
            (old.key.id, True),
        ]
        assert first.keys[1].environment == pb.ENVIRONMENT_SANDBOX
        changed = {(await asyncio.wait_for(watch.read(), 5)).key_id for _ in range(3)}
        assert changed == {live.key.id, test.key.id, old.key.id}
        watch.cancel()
        for k in (live, test, old):
            got = (await stub.GetKey(pb.GetKeyRequest(key_id=k.key.id))).key
            assert got.status == pb.KEY_STATUS_REVOKED
        assert (
            await stub.GetKey(pb.GetKeyRequest(key_id=successor.new_key.id))
        ).key.status == pb.KEY_STATUS_ACTIVE
        audits = (
            await stub.ListAuditEvents(
                pb.ListAuditEventsRequest(account_id=account.id, action="key.revoked", page_size=50)
            )
        ).events
        by_scanner = [a for a in audits if a.actor.user == "secret-scanning"]
        assert sorted(a.key_id for a in by_scanner) == sorted([live.key.id, test.key.id, old.key.id])
        assert all(
            a.after["reason"]
            == f"found in public at https://github.com/p/r/blob/x/a.py ({REPORTER}, content)"
            for a in by_scanner
        )
        outbox = await server.repo.claim_outbox(server.servicer.clock.now(), 60, 100)
        kinds = sorted((e.type, e.data["keyId"]) for e in outbox if e.data.get("keyId") != dead.key.id)
        assert kinds == sorted(
            [(t, k.key.id) for t in ("apikey.leaked", "apikey.revoked") for k in (live, test, old)]
        )
        # The same batch again: the same answer, nothing revoked, audited or queued.
        again = await stub.RevokeLeakedKeys(request)
        assert [(k.key_id, k.revoked_now) for k in again.keys] == [(k.key_id, False) for k in first.keys]
        audits_after = (
            await stub.ListAuditEvents(
                pb.ListAuditEventsRequest(account_id=account.id, action="key.revoked", page_size=50)
            )
        ).events
        assert len(audits_after) == len(audits)
        assert await server.repo.claim_outbox(server.servicer.clock.now(), 60, 100) == []


@pytest.mark.parametrize(
    "request_",
    [
        pb.RevokeLeakedKeysRequest(tokens=[pb.LeakedToken(token_hash="xyz")], reporter=REPORTER),
        pb.RevokeLeakedKeysRequest(tokens=[pb.LeakedToken(token_hash="A" * 64)], reporter=REPORTER),
        pb.RevokeLeakedKeysRequest(tokens=[pb.LeakedToken(token_hash="0" * 64)], reporter=""),
        pb.RevokeLeakedKeysRequest(tokens=[pb.LeakedToken(token_hash="0" * 64)] * 1001, reporter=REPORTER),
    ],
)
async def test_bad_requests_are_refused(sqlite_url: str, request_: pb.RevokeLeakedKeysRequest) -> None:
    async with running_authsvc(sqlite_url) as (_server, stub):
        code, etype, _message = await error_of(stub.RevokeLeakedKeys(request_))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and etype == "invalid_request"


async def test_concurrent_reports_of_the_same_keys_revoke_and_audit_each_once(db_url: str) -> None:
    async with running_authsvc(db_url) as (_server, stub):
        account = await new_account(stub)
        secrets = []
        for _ in range(20):
            made = await stub.CreateKey(
                pb.CreateKeyRequest(
                    account_id=account.id,
                    environment=pb.ENVIRONMENT_LIVE,
                    scopes=["account:read"],
                    actor=ACTOR,
                )
            )
            secrets.append(made.secret)
        request = pb.RevokeLeakedKeysRequest(
            tokens=[pb.LeakedToken(token_hash=sha(s)) for s in secrets], reporter=REPORTER, actor=SCANNER
        )
        answers = await asyncio.gather(*(stub.RevokeLeakedKeys(request) for _ in range(4)))
        revoked_now = [k.key_id for a in answers for k in a.keys if k.revoked_now]
        assert len(revoked_now) == len(set(revoked_now)) == 20
        audits = (
            await stub.ListAuditEvents(
                pb.ListAuditEventsRequest(account_id=account.id, action="key.revoked", page_size=100)
            )
        ).events
        assert len(audits) == 20
