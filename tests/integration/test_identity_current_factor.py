"""Replacing a factor needs that factor (a stolen session alone replaces none): a new authenticator needs
a current code of the enrolled one, a new password the current password. Against a real authsvc."""

from __future__ import annotations

import datetime as dt

import grpc
import pyotp

from authsvc.testing import ACTOR, error_of, new_account, running_authsvc
from svckit.clock import FakeClock
from svckit.secretbox import new_key as new_secrets_key
from svckit.secretbox import parse_key
from travel.auth.v1 import identity_pb2 as pb
from travel.auth.v1 import identity_pb2_grpc

PASSWORD = "correct horse battery staple"


async def test_replacing_totp_or_the_password_needs_the_current_one(sqlite_url: str) -> None:
    clock = FakeClock(dt.datetime.now(dt.UTC))
    async with running_authsvc(sqlite_url, clock=clock, secrets_key=parse_key(new_secrets_key())) as (
        server,
        stub,
    ):
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            ids = identity_pb2_grpc.IdentityServiceStub(channel)
            account = await new_account(stub)
            invite = await ids.CreateInvite(
                pb.CreateInviteRequest(
                    account_id=account.id, email="o@partner.example", role=pb.USER_ROLE_OWNER, actor=ACTOR
                )
            )
            session = (
                await ids.AcceptInvite(pb.AcceptInviteRequest(token=invite.token, password=PASSWORD))
            ).session_token
            # The first authenticator: the session is enough.
            begun = await ids.BeginTotpEnrollment(pb.BeginTotpEnrollmentRequest(session_token=session))
            first = pyotp.TOTP(pyotp.parse_uri(begun.provisioning_uri).secret)
            await ids.ConfirmTotpEnrollment(
                pb.ConfirmTotpEnrollmentRequest(session_token=session, code=first.at(clock.now()))
            )

            # Replacing it: no code, a wrong one, or the one just used are refused.
            clock.advance(30)
            for code in ("", "000000" if first.at(clock.now()) != "000000" else "111111"):
                _, etype, message = await error_of(
                    ids.BeginTotpEnrollment(
                        pb.BeginTotpEnrollmentRequest(session_token=session, current_code=code)
                    )
                )
                assert etype == "invalid_credentials" and message.startswith("current_code: "), message
            current = first.at(clock.now())
            begun = await ids.BeginTotpEnrollment(
                pb.BeginTotpEnrollmentRequest(session_token=session, current_code=current)
            )
            _, etype, _ = await error_of(  # a code works once
                ids.BeginTotpEnrollment(
                    pb.BeginTotpEnrollmentRequest(session_token=session, current_code=current)
                )
            )
            assert etype == "invalid_credentials"
            second = pyotp.TOTP(pyotp.parse_uri(begun.provisioning_uri).secret)
            clock.advance(30)
            await ids.ConfirmTotpEnrollment(
                pb.ConfirmTotpEnrollmentRequest(session_token=session, code=second.at(clock.now()))
            )

            # Guessing is the sign-in throttle's failures: past them even the right code is refused.
            clock.advance(30)
            guesses = [
                (
                    await error_of(
                        ids.BeginTotpEnrollment(
                            pb.BeginTotpEnrollmentRequest(session_token=session, current_code="00000x")
                        )
                    )
                )[1]
                for _ in range(5)
            ]
            # Three failures above already: two more guesses, then none is evaluated.
            assert guesses == ["invalid_credentials"] * 2 + ["rate_limited"] * 3, guesses
            _, etype, _ = await error_of(
                ids.BeginTotpEnrollment(
                    pb.BeginTotpEnrollmentRequest(session_token=session, current_code=second.at(clock.now()))
                )
            )
            assert etype == "rate_limited"
            clock.advance(16 * 60)  # past the throttle's window

            # A new password needs the current one.
            _, etype, message = await error_of(
                ids.ChangePassword(
                    pb.ChangePasswordRequest(
                        session_token=session, current_password="not it at all", new_password=PASSWORD + "!"
                    )
                )
            )
            assert etype == "invalid_credentials" and message.startswith("current_password: ")
            changed = await ids.ChangePassword(
                pb.ChangePasswordRequest(
                    session_token=session, current_password=PASSWORD, new_password=PASSWORD + "!"
                )
            )
            assert changed.session_token
