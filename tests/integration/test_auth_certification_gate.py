"""Certification gating in authsvc over real gRPC, on SQLite and PostgreSQL: with requireCertification on,
a live key is refused (certification_required) until the account is certified; sandbox keys never are;
an override needs a reason and is in the audit trail with it."""

from __future__ import annotations

import grpc

from authsvc.testing import ACTOR, error_of, new_account, running_authsvc
from travel.auth.v1 import auth_pb2 as pb


def key_request(account_id: str, env: pb.Environment.ValueType) -> pb.CreateKeyRequest:
    return pb.CreateKeyRequest(
        account_id=account_id, environment=env, name="k", scopes=["hotels:read"], actor=ACTOR
    )


async def test_live_keys_wait_for_certification(db_url: str) -> None:
    async with running_authsvc(db_url) as (_server, stub):
        account = await new_account(stub)
        other = await new_account(stub)
        assert not account.require_certification and not account.certification.HasField("certified_at")
        # Default off: nothing changes for an existing account.
        await stub.CreateKey(key_request(account.id, pb.ENVIRONMENT_LIVE))

        required = await stub.SetCertificationRequired(
            pb.SetCertificationRequiredRequest(account_id=account.id, required=True, actor=ACTOR)
        )
        assert required.account.require_certification
        before = len((await stub.ListKeys(pb.ListKeysRequest(account_id=account.id))).keys)
        code, etype, message = await error_of(stub.CreateKey(key_request(account.id, pb.ENVIRONMENT_LIVE)))
        assert (code, etype) == (grpc.StatusCode.PERMISSION_DENIED, "certification_required")
        assert "certification" in message
        assert len((await stub.ListKeys(pb.ListKeysRequest(account_id=account.id))).keys) == before
        # Sandbox keys are what certifying needs; another account is untouched.
        await stub.CreateKey(key_request(account.id, pb.ENVIRONMENT_SANDBOX))
        await stub.CreateKey(key_request(other.id, pb.ENVIRONMENT_LIVE))

        _, etype, _ = await error_of(
            stub.OverrideCertification(pb.OverrideCertificationRequest(account_id=account.id, actor=ACTOR))
        )
        assert etype == "invalid_request"
        certified = await stub.OverrideCertification(
            pb.OverrideCertificationRequest(
                account_id=account.id, reason="certified by phone, ticket 812", actor=ACTOR
            )
        )
        assert certified.account.certification.HasField("certified_at")
        created = await stub.CreateKey(key_request(account.id, pb.ENVIRONMENT_LIVE))
        assert created.key.environment == pb.ENVIRONMENT_LIVE

        audit = await stub.ListAuditEvents(pb.ListAuditEventsRequest(account_id=account.id))
        by_action = {e.action: e for e in audit.events}
        assert by_action["account.certification_required"].after["require_certification"] is True
        overridden = by_action["account.certified"]
        assert overridden.after["reason"] == "override: certified by phone, ticket 812"
        assert overridden.actor.user == ACTOR.user

        # Setting it to what it is writes nothing.
        again = await stub.SetCertificationRequired(
            pb.SetCertificationRequiredRequest(account_id=account.id, required=True, actor=ACTOR)
        )
        assert again.account.require_certification
        audit = await stub.ListAuditEvents(
            pb.ListAuditEventsRequest(account_id=account.id, action="account.certification_required")
        )
        assert len(audit.events) == 1
