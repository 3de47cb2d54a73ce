"""The billing service (certificate ``billing``) over mutual TLS against a real authsvc: it turns an
account read-only after an unpaid settlement charge and lifts it once the payment is recorded, audited as
service ``billing``; everything else is refused by the allow list (svckit.peers)."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import grpc
import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from authsvc._server import AuthServer
from authsvc.testing import ACTOR
from svckit.clients import AuthClient, ClientError
from svckit.devca import files
from tests.support import ROOT, tls_of
from travel.auth.v1 import auth_pb2 as pb

BILLING = "billing"
# Who billing vouches for: the payment it recorded.
PAID = pb.Actor(user="billing:inv_5c1d9e2b7a40 paid")
UNPAID = pb.Actor(user="billing:inv_5c1d9e2b7a40 unpaid")


def booking(secret: str) -> pb.AuthorizeRequest:
    """A business write (a booking), which a read-only account is refused."""
    return pb.AuthorizeRequest(
        api_key=secret, environment=pb.ENVIRONMENT_LIVE, required_scope="hotels:write", is_write=True
    )


async def test_billing_lifts_read_only_and_may_do_nothing_else(
    authsvc: AuthServer, pki: pathlib.Path
) -> None:
    target = f"127.0.0.1:{authsvc.port}"
    async with AuthClient(target, tls_of(pki, "svcctl")) as admin:
        account = (
            await admin.create_account(
                pb.CreateAccountRequest(name="Partner", mode=pb.ACCOUNT_MODE_A, actor=ACTOR)
            )
        ).account
        created = await admin.create_key(
            pb.CreateKeyRequest(
                account_id=account.id,
                environment=pb.ENVIRONMENT_LIVE,
                scopes=["hotels:read", "hotels:write"],
                actor=ACTOR,
            )
        )
        assert (await admin.authorize(booking(created.secret))).decision == pb.DECISION_ALLOW

        async with AuthClient(target, tls_of(pki, BILLING)) as billing:
            # The settlement charge stays unpaid past readOnlyAfter: billing makes the account read-only.
            turned = await billing.set_account_status(
                pb.SetAccountStatusRequest(
                    account_id=account.id, status=pb.ACCOUNT_STATUS_READ_ONLY, actor=UNPAID
                )
            )
            assert turned.account.status == pb.ACCOUNT_STATUS_READ_ONLY
            refused = await admin.authorize(booking(created.secret))
            assert (refused.decision, refused.error_type) == (pb.DECISION_DENY, "account_read_only")
            # The payment is recorded: billing reads the status and lifts it.
            got = await billing.get_account(pb.GetAccountRequest(account_id=account.id))
            assert got.account.status == pb.ACCOUNT_STATUS_READ_ONLY
            lifted = await billing.set_account_status(
                pb.SetAccountStatusRequest(account_id=account.id, status=pb.ACCOUNT_STATUS_ACTIVE, actor=PAID)
            )
            assert lifted.account.status == pb.ACCOUNT_STATUS_ACTIVE
            assert (await admin.authorize(booking(created.secret))).decision == pb.DECISION_ALLOW

            # Anything else: refused by the allow list, before authsvc does anything.
            calls = [
                billing.create_key(
                    pb.CreateKeyRequest(
                        account_id=account.id,
                        environment=pb.ENVIRONMENT_LIVE,
                        scopes=["hotels:read"],
                        actor=PAID,
                    )
                ),
                billing.list_keys(pb.ListKeysRequest(account_id=account.id)),
                billing.list_audit_events(pb.ListAuditEventsRequest(account_id=account.id)),
            ]
            for call in calls:
                with pytest.raises(ClientError) as denied:
                    await call
                assert denied.value.code == grpc.StatusCode.PERMISSION_DENIED
                assert f"the service {BILLING!r} may not call" in denied.value.detail

        # The audit trail, newest first, names billing as the calling service and what it vouched for.
        trail = await admin.list_audit_events(
            pb.ListAuditEventsRequest(
                account_id=account.id, action="account.status_changed", newest_first=True
            )
        )
        assert [
            (e.actor.service, e.actor.user, e.before["status"], e.after["status"]) for e in trail.events
        ] == [
            (BILLING, PAID.user, "read_only", "active"),
            (BILLING, UNPAID.user, "active", "read_only"),
        ]
        keys = await admin.list_keys(pb.ListKeysRequest(account_id=account.id))
        assert [k.id for k in keys.keys] == [created.key.id]  # the refused CreateKey made nothing


def test_svcctl_certs_init_makes_a_billing_certificate(tmp_path: pathlib.Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "svcctl", "certs", "init", "--dir", str(tmp_path), "--identity", BILLING],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    _, cert, key = files(tmp_path, BILLING)
    assert pathlib.Path(key).stat().st_mode & 0o777 == 0o600
    loaded = x509.load_pem_x509_certificate(pathlib.Path(cert).read_bytes())
    assert loaded.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == BILLING
