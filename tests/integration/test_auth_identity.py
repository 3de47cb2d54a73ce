"""travel.auth.v1.IdentityService against a real authsvc on SQLite and PostgreSQL: invites, sign-in,
throttling, sessions (idle and absolute expiry, sign-out, password change, removal), roles, the last
owner, TOTP, and the audit trail naming the portal user."""

from __future__ import annotations

import datetime as dt
from typing import Any

import grpc
import pyotp
import pytest
from google.protobuf import struct_pb2, timestamp_pb2

from authsvc.testing import ACTOR, error_of, new_account, new_key, running_authsvc
from svckit.clock import FakeClock
from svckit.secretbox import new_key as new_secrets_key
from svckit.secretbox import parse_key
from travel.auth.v1 import auth_pb2 as apb
from travel.auth.v1 import identity_pb2 as pb
from travel.auth.v1 import identity_pb2_grpc

PASSWORD = "correct horse battery staple"


async def _user(
    ids: identity_pb2_grpc.IdentityServiceStub,
    account_id: str,
    email: str,
    role: pb.UserRole.ValueType,
    session: str = "",
) -> tuple[pb.User, str]:
    invite = await ids.CreateInvite(
        pb.CreateInviteRequest(
            account_id=account_id, email=email, role=role, session_token=session, actor=ACTOR
        )
    )
    assert invite.token.startswith("inv_")
    accepted = await ids.AcceptInvite(
        pb.AcceptInviteRequest(token=invite.token, password=PASSWORD, source_address="192.0.2.1")
    )
    return accepted.user, accepted.session_token


async def test_identity_journey(db_url: str) -> None:
    clock = FakeClock(dt.datetime.now(dt.UTC))
    key = parse_key(new_secrets_key())
    async with running_authsvc(db_url, clock=clock, secrets_key=key) as (server, stub):
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            ids = identity_pb2_grpc.IdentityServiceStub(channel)
            account = await new_account(stub)
            owner, owner_session = await _user(ids, account.id, "Owner@Partner.example", pb.USER_ROLE_OWNER)
            assert owner.email == "owner@partner.example" and owner.role == pb.USER_ROLE_OWNER

            # An invite token works once.
            invite = await ids.CreateInvite(
                pb.CreateInviteRequest(
                    email="dev@partner.example", role=pb.USER_ROLE_DEVELOPER, session_token=owner_session
                )
            )
            dev = await ids.AcceptInvite(pb.AcceptInviteRequest(token=invite.token, password=PASSWORD))
            code, etype, _ = await error_of(
                ids.AcceptInvite(pb.AcceptInviteRequest(token=invite.token, password=PASSWORD))
            )
            assert etype == "invalid_credentials"

            # A developer may not invite, change roles or remove.
            _, etype, _ = await error_of(
                ids.CreateInvite(
                    pb.CreateInviteRequest(
                        email="x@partner.example", role=pb.USER_ROLE_VIEWER, session_token=dev.session_token
                    )
                )
            )
            assert etype == "forbidden"
            _, etype, _ = await error_of(
                ids.RemoveUser(pb.RemoveUserRequest(session_token=dev.session_token, user_id=owner.id))
            )
            assert etype == "forbidden"

            # Sign-in: the same refusal for an unknown e-mail and a wrong password.
            _, e1, m1 = await error_of(ids.SignIn(pb.SignInRequest(email="nobody@x.example", password="x")))
            _, e2, m2 = await error_of(
                ids.SignIn(pb.SignInRequest(email="owner@partner.example", password="wrong password!"))
            )
            assert (e1, m1) == (e2, m2) and e1 == "invalid_credentials"
            signed = await ids.SignIn(
                pb.SignInRequest(email="owner@partner.example", password=PASSWORD, source_address="192.0.2.9")
            )
            assert signed.session_token != owner_session  # a new session on every sign-in
            got = await ids.GetSession(pb.GetSessionRequest(session_token=signed.session_token))
            assert got.user.id == owner.id

            # The last owner stays; a second owner can then be removed, and its sessions end.
            _, etype, _ = await error_of(
                ids.RemoveUser(pb.RemoveUserRequest(session_token=owner_session, user_id=owner.id))
            )
            assert etype == "conflict"
            await ids.SetUserRole(
                pb.SetUserRoleRequest(
                    session_token=owner_session, user_id=dev.user.id, role=pb.USER_ROLE_OWNER
                )
            )
            await ids.RemoveUser(pb.RemoveUserRequest(session_token=owner_session, user_id=dev.user.id))
            _, etype, _ = await error_of(
                ids.GetSession(pb.GetSessionRequest(session_token=dev.session_token))
            )
            assert etype == "session_expired"
            listed = await ids.ListUsers(pb.ListUsersRequest(session_token=owner_session, page_size=1))
            assert [u.id for u in listed.users] == [owner.id] and not listed.next_page_token

            # Idle timeout: 30 minutes without a request ends a session; use keeps it alive until 12 h.
            clock.advance(29 * 60)
            await ids.GetSession(pb.GetSessionRequest(session_token=signed.session_token))
            clock.advance(29 * 60)
            await ids.GetSession(pb.GetSessionRequest(session_token=signed.session_token))
            clock.advance(30 * 60)
            _, etype, _ = await error_of(
                ids.GetSession(pb.GetSessionRequest(session_token=signed.session_token))
            )
            assert etype == "session_expired"
            fresh = await ids.SignIn(pb.SignInRequest(email="owner@partner.example", password=PASSWORD))
            signed_in_at = clock.now()
            for _ in range(30):
                clock.advance(29 * 60)
                try:
                    await ids.GetSession(pb.GetSessionRequest(session_token=fresh.session_token))
                except grpc.aio.AioRpcError:
                    break
            assert clock.now() - signed_in_at == dt.timedelta(minutes=25 * 29)  # the first step past 12 h

            # Password change ends every session and hands out a new one.
            s1 = (
                await ids.SignIn(pb.SignInRequest(email="owner@partner.example", password=PASSWORD))
            ).session_token
            s2 = (
                await ids.SignIn(pb.SignInRequest(email="owner@partner.example", password=PASSWORD))
            ).session_token
            new_pw = "another long passphrase"
            changed = await ids.ChangePassword(
                pb.ChangePasswordRequest(session_token=s1, current_password=PASSWORD, new_password=new_pw)
            )
            for old in (s1, s2):
                _, etype, _ = await error_of(ids.GetSession(pb.GetSessionRequest(session_token=old)))
                assert etype == "session_expired"
            s3 = changed.session_token

            # TOTP: enrol, then sign-in needs the code, and a code works once.
            begun = await ids.BeginTotpEnrollment(pb.BeginTotpEnrollmentRequest(session_token=s3))
            seed = pyotp.parse_uri(begun.provisioning_uri).secret
            totp = pyotp.TOTP(seed)
            clock.advance(30)
            confirmed = await ids.ConfirmTotpEnrollment(
                pb.ConfirmTotpEnrollmentRequest(session_token=s3, code=totp.at(clock.now()))
            )
            assert confirmed.user.totp_enabled
            _, etype, _ = await error_of(
                ids.SignIn(pb.SignInRequest(email="owner@partner.example", password=new_pw))
            )
            assert etype == "second_factor_required"
            clock.advance(30)
            code_now = totp.at(clock.now())
            await ids.SignIn(
                pb.SignInRequest(email="owner@partner.example", password=new_pw, totp_code=code_now)
            )
            _, etype, _ = await error_of(
                ids.SignIn(
                    pb.SignInRequest(email="owner@partner.example", password=new_pw, totp_code=code_now)
                )
            )
            assert etype == "second_factor_required"  # replayed code

            # The account's TOTP rule: only an owner sets it; an admin without TOTP may then only enrol.
            admin, admin_session = await _user(ids, account.id, "admin@partner.example", pb.USER_ROLE_ADMIN)
            viewer, viewer_session = await _user(
                ids, account.id, "viewer@partner.example", pb.USER_ROLE_VIEWER
            )
            _, etype, _ = await error_of(
                ids.SetTotpRequirement(
                    pb.SetTotpRequirementRequest(session_token=admin_session, required=True)
                )
            )
            assert etype == "forbidden"
            before = await ids.GetSession(pb.GetSessionRequest(session_token=admin_session))
            assert not before.account_requires_totp and not before.totp_enrolment_required
            await ids.SetTotpRequirement(pb.SetTotpRequirementRequest(session_token=s3, required=True))
            got_admin = await ids.GetSession(pb.GetSessionRequest(session_token=admin_session))
            assert got_admin.account_requires_totp and got_admin.totp_enrolment_required
            got_viewer = await ids.GetSession(pb.GetSessionRequest(session_token=viewer_session))
            assert got_viewer.account_requires_totp and not got_viewer.totp_enrolment_required
            got_owner = await ids.GetSession(pb.GetSessionRequest(session_token=s3))
            assert not got_owner.totp_enrolment_required  # enrolled above
            assert viewer.id and admin.id

            # Throttle: after 5 failures for an e-mail even the right password is refused alike.
            for _ in range(5):
                await error_of(
                    ids.SignIn(pb.SignInRequest(email="owner@partner.example", password="nope nope nope"))
                )
            code, etype, msg = await error_of(
                ids.SignIn(
                    pb.SignInRequest(email="owner@partner.example", password=new_pw, totp_code="000000")
                )
            )
            assert (code, etype) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "rate_limited")
            assert msg == m1

            # A key operation with the portal user as actor is filtered by that user in the audit trail.
            await stub.CreateKey(
                apb.CreateKeyRequest(
                    account_id=account.id,
                    environment=apb.ENVIRONMENT_SANDBOX,
                    name="portal key",
                    scopes=["hotels:read"],
                    actor=apb.Actor(user=owner.email, source_address="192.0.2.9", user_id=owner.id),
                )
            )
            await new_key(stub, account.id)
            since = timestamp_pb2.Timestamp()
            since.FromDatetime(clock.now() - dt.timedelta(days=1))
            audit = await stub.ListAuditEvents(
                apb.ListAuditEventsRequest(
                    account_id=account.id, actor_user_id=owner.id, action="key.created", since=since
                )
            )
            assert [(e.action, e.actor.user_id, e.actor.user) for e in audit.events] == [
                ("key.created", owner.id, owner.email)
            ]
            users_audit = await stub.ListAuditEvents(apb.ListAuditEventsRequest(account_id=account.id))
            actions = [e.action for e in users_audit.events]
            for action in (
                "account.totp_requirement_changed",
                "user.invited",
                "user.joined",
                "user.role_changed",
                "user.removed",
                "user.totp_enabled",
            ):
                assert action in actions
            for secret in (owner_session, invite.token, s3, seed):
                assert all(secret not in str(e) for e in users_audit.events)


@pytest.mark.parametrize("secrets_key", [None])
async def test_totp_enrolment_needs_the_secrets_key(sqlite_url: str, secrets_key: None) -> None:
    async with running_authsvc(sqlite_url) as (server, stub):
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            ids = identity_pb2_grpc.IdentityServiceStub(channel)
            account = await new_account(stub)
            _, session = await _user(ids, account.id, "o@partner.example", pb.USER_ROLE_OWNER)
            _, etype, _ = await error_of(
                ids.BeginTotpEnrollment(pb.BeginTotpEnrollmentRequest(session_token=session))
            )
            assert etype == "conflict"


async def test_record_audit_event_names_the_session_user(db_url: str) -> None:
    async with running_authsvc(db_url) as (server, stub):
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            ids = identity_pb2_grpc.IdentityServiceStub(channel)
            account = await new_account(stub)
            other = await new_account(stub, name="Other")
            dev, dev_session = await _user(ids, account.id, "dev@partner.example", pb.USER_ROLE_DEVELOPER)
            _, viewer_session = await _user(ids, account.id, "v@partner.example", pb.USER_ROLE_VIEWER)

            def request(**kw: Any) -> pb.RecordAuditEventRequest:
                after = struct_pb2.Struct()
                after.update(kw.pop("after", {"endpoint_id": "we_1", "environment": "live"}))
                fields = {"session_token": dev_session, "action": "webhook_endpoint.created", **kw}
                return pb.RecordAuditEventRequest(after=after, **fields)

            # The actor is the session's user, whatever actor or account the caller also sends.
            got = await ids.RecordAuditEvent(
                request(
                    source_address="198.51.100.4",
                    account_id=other.id,
                    actor=apb.Actor(user="someone@else.example", user_id="usr_forged"),
                )
            )
            assert got.event.account_id == account.id and got.event.action == "webhook_endpoint.created"
            assert (got.event.actor.user, got.event.actor.user_id) == (dev.email, dev.id)
            assert got.event.actor.source_address == "198.51.100.4"
            listed = await stub.ListAuditEvents(
                apb.ListAuditEventsRequest(account_id=account.id, action="webhook_endpoint.created")
            )
            assert [(e.id, e.actor.user_id, dict(e.after)) for e in listed.events] == [
                (got.event.id, dev.id, {"endpoint_id": "we_1", "environment": "live"})
            ]
            other_trail = await stub.ListAuditEvents(apb.ListAuditEventsRequest(account_id=other.id))
            assert all(e.action != "webhook_endpoint.created" for e in other_trail.events)

            # Refused, and nothing written: a viewer, a stale session, an action authsvc writes itself,
            # a secret in the details, an operator call without an actor.
            refusals = [
                (request(session_token=viewer_session), "forbidden"),
                (request(session_token="ps_gone"), "session_expired"),
                (request(action="key.revoked"), "invalid_request"),
                (request(after={"new": "whsec_" + "A" * 40}), "invalid_request"),
                (request(after={"signing_secret": "x"}), "invalid_request"),
                (request(session_token="", account_id=account.id), "invalid_request"),
                (request(session_token="", account_id="acct_nonexistent", actor=ACTOR), "not_found"),
            ]
            for bad, expected in refusals:
                _, etype, message = await error_of(ids.RecordAuditEvent(bad))
                assert etype == expected, (bad, message)
                assert "AAAA" not in message
            after = await stub.ListAuditEvents(apb.ListAuditEventsRequest(account_id=account.id))
            assert [e.action for e in after.events].count("webhook_endpoint.created") == 1
            assert "whsec_" not in str(after.events)

            # An operator (svcctl) names itself and the account.
            op = await ids.RecordAuditEvent(request(session_token="", account_id=account.id, actor=ACTOR))
            assert (op.event.actor.user, op.event.actor.user_id) == (ACTOR.user, "")


async def test_disable_totp_needs_the_password_and_the_account_rules(db_url: str) -> None:
    clock = FakeClock(dt.datetime.now(dt.UTC))
    async with running_authsvc(db_url, clock=clock, secrets_key=parse_key(new_secrets_key())) as (
        server,
        stub,
    ):
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            ids = identity_pb2_grpc.IdentityServiceStub(channel)
            account = await new_account(stub)
            owner, owner_session = await _user(ids, account.id, "o@partner.example", pb.USER_ROLE_OWNER)

            async def enrol(session: str) -> None:
                begun = await ids.BeginTotpEnrollment(pb.BeginTotpEnrollmentRequest(session_token=session))
                clock.advance(30)
                code = pyotp.TOTP(pyotp.parse_uri(begun.provisioning_uri).secret).at(clock.now())
                await ids.ConfirmTotpEnrollment(
                    pb.ConfirmTotpEnrollmentRequest(session_token=session, code=code)
                )

            def disable(session: str, password: str = PASSWORD) -> Any:
                return ids.DisableTotp(pb.DisableTotpRequest(session_token=session, password=password))

            _, etype, _ = await error_of(disable(owner_session))
            assert etype == "conflict"  # not on
            await enrol(owner_session)
            _, etype, message = await error_of(disable(owner_session, "not my password!"))
            assert etype == "invalid_credentials" and message.startswith("password:")
            # While the account requires TOTP of owners and admins, an owner cannot turn it off.
            await ids.SetTotpRequirement(
                pb.SetTotpRequirementRequest(session_token=owner_session, required=True)
            )
            _, etype, _ = await error_of(disable(owner_session))
            assert etype == "conflict"
            await ids.SetTotpRequirement(
                pb.SetTotpRequirementRequest(session_token=owner_session, required=False)
            )
            off = await disable(owner_session)
            assert not off.user.totp_enabled
            # Sign-in needs no code any more; the audit trail says who turned it off.
            await ids.SignIn(pb.SignInRequest(email="o@partner.example", password=PASSWORD))
            trail = await stub.ListAuditEvents(
                apb.ListAuditEventsRequest(account_id=account.id, action="user.totp_disabled")
            )
            assert [(e.actor.user_id, e.after["totp"]) for e in trail.events] == [(owner.id, "off")]
