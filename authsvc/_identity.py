"""travel.auth.v1.IdentityService: portal users, invites, sign-in and server-side sessions.

Passwords are argon2id hashes (argon2-cffi, on bounded workers of their own with load shedding:
authsvc._password_work); session and invite tokens are
random, returned once and stored as SHA-256 hashes; TOTP seeds are sealed with AES-256-GCM (the user
id as associated data). Sign-in answers one message for an unknown e-mail, a wrong password and a
throttled attempt alike, so nothing tells whether an address has an account. Each attempt is counted
before its password is checked (IdentityRepository.reserve_attempt) and refunded when it succeeds.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import logging
import math
import secrets
from collections.abc import Sequence

import grpc
import pyotp
from google.protobuf.json_format import MessageToDict

from authsvc import _convert as cv
from authsvc import _identity_rules as rules
from authsvc import _validate as v
from authsvc._audit_rules import recorded_event_problem, role_action
from authsvc._errors import (
    Conflict,
    Forbidden,
    InvalidCredentials,
    InvalidRequest,
    NotFound,
    SecondFactorRequired,
    SessionExpired,
    Throttled,
)
from authsvc._identity_sql import IdentityRepository, Invite, Session, User
from authsvc._model import Actor
from authsvc._password_work import Overloaded, PasswordWork
from svckit import roles
from svckit.clock import Clock, SystemClock
from svckit.ids import new_id
from svckit.pages import BAD_PAGE_TOKEN, page_parts, page_token
from svckit.peers import portal_token_var
from svckit.portal_calls import PortalUser
from svckit.protos import timestamp as ts
from svckit.prototables import USER_ROLE
from svckit.secretbox import SecretBox
from svckit.vocabulary import UserRole
from travel.auth.v1 import identity_pb2 as pb
from travel.auth.v1 import identity_pb2_grpc

log = logging.getLogger(__name__)

INVITE_TTL = dt.timedelta(days=7)
SIGN_IN_REFUSED = "Incorrect e-mail address or password, or too many attempts; try again in a few minutes."
TOTP_ISSUER = "svc portal"
# Seconds a check refused because the hashing queue is full is told to wait.
SHED_RETRY_AFTER = 5


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _email(value: str) -> str:
    email = value.strip().lower()
    if len(email) > v.MAX_EMAIL or not v.EMAIL.match(email):
        raise InvalidRequest("email: not an e-mail address")
    return email


def _role(value: int) -> UserRole:
    try:
        return USER_ROLE.word(value)
    except ValueError:
        raise InvalidRequest("role: must be one of USER_ROLE_OWNER, _ADMIN, _DEVELOPER, _VIEWER") from None


def user_pb(u: User) -> pb.User:
    return pb.User(
        id=u.id,
        account_id=u.account_id,
        email=u.email,
        role=USER_ROLE.pb(u.role),
        totp_enabled=u.totp_seed is not None,
        created_at=ts(u.created_at),
        last_sign_in_at=ts(u.last_sign_in_at),
    )


def session_pb(s: Session) -> pb.Session:
    return pb.Session(
        id=s.id,
        user_id=s.user_id,
        created_at=ts(s.created_at),
        last_seen_at=ts(s.last_seen_at),
        expires_at=ts(rules.session_expires_at(s.created_at, s.last_seen_at)),
        source_address=s.source_address,
        user_agent=s.user_agent,
    )


class IdentityServicer(identity_pb2_grpc.IdentityServiceServicer):
    def __init__(
        self,
        repo: IdentityRepository,
        *,
        secrets_key: bytes | Sequence[bytes] | None = None,
        clock: Clock | None = None,
        work: PasswordWork | None = None,
    ) -> None:
        self.repo = repo
        self.clock: Clock = clock or SystemClock()
        # A keyring, newest first: seeds name their key (enc2:), for `python -m authsvc reseal`.
        self.box = SecretBox(secrets_key, key_ids=True) if secrets_key else None
        self.work = work or PasswordWork()

    # -- helpers ---------------------------------------------------------------------------------

    def _new_session(self, user: User, source: str, agent: str, now: dt.datetime) -> tuple[Session, str]:
        token = "ps_" + secrets.token_urlsafe(32)
        session = Session(new_id("ses"), user.id, now, now, source[: v.MAX_SOURCE], agent[: v.MAX_USER_AGENT])
        return session, token

    @staticmethod
    def _shed(retry_after: float | None = None) -> Throttled:
        log.debug("password hashing queue full or sign-in budget spent: check refused")
        wait = SHED_RETRY_AFTER if retry_after is None else max(1, math.ceil(retry_after))
        return Throttled(SIGN_IN_REFUSED, metadata={"retry_after": str(wait)})

    async def _verify(self, password_hash: str, password: str) -> bool:
        try:
            async with self.work.admitted():
                return await self.work.verify(password_hash, password)
        except Overloaded:
            raise self._shed() from None

    async def _hash(self, password: str, email: str) -> str:
        problem = rules.password_problem(password, email)
        if problem:
            raise InvalidRequest(f"password: {problem}")
        try:
            async with self.work.admitted():
                return await self.work.hash(password)
        except Overloaded:
            raise self._shed() from None

    async def _signed_in(self, token: str) -> tuple[User, Session]:
        """The user of a live session token (and marks the session used)."""
        if not token:
            raise SessionExpired("session_token: not signed in")
        session = await self.repo.session_by_hash(token_hash(token))
        now = self.clock.now()
        if session is None:
            raise SessionExpired("session_token: the session has ended; sign in again")
        state = rules.session_state(session.created_at, session.last_seen_at, now)
        if state != "live":
            await self.repo.delete_session(session.id)
            raise SessionExpired(
                f"session_token: the session has ended ({state.replace('_', ' ')}); sign in again"
            )
        try:
            user = await self.repo.get_user(session.user_id)
        except NotFound:
            raise SessionExpired("session_token: the session has ended; sign in again") from None
        if rules.needs_touch(session.last_seen_at, now):
            await self.repo.touch_session(session.id, now)
            session = dataclasses.replace(session, last_seen_at=now)
        return user, session

    async def portal_user(self, token: str) -> PortalUser | None:
        """The user a portal call's session token is of (svckit.portal_calls); None when it has ended."""
        try:
            user, session = await self._signed_in(token)
        except SessionExpired:
            return None
        return PortalUser(user.account_id, user.id, user.email, user.role, session.id, session.source_address)

    async def _current_code(self, user: User, session: Session, code: str) -> None:
        """Replacing a second factor needs that factor: a stolen session cannot swap it for its own. A
        wrong code is a failed attempt of the sign-in throttle (e-mail and address), as at sign-in."""
        now = self.clock.now()
        verdict, reserved = await self.repo.reserve_attempt(
            user.email, session.source_address, now, rules.THROTTLE_WINDOW
        )
        if reserved is None:
            raise Throttled(SIGN_IN_REFUSED, metadata={"retry_after": str(int(verdict.retry_after) + 1)})
        step = rules.totp_step(self._unseal(user.totp_seed or "", user.id), code, now, user.totp_last_step)
        if step is None or not await self.repo.use_totp_step(user.id, step):
            raise InvalidCredentials(
                "current_code: enter the current code of your authenticator app to replace it"
            )
        await self.repo.release_attempt(reserved)

    def _may(self, user: User, action: roles.Action) -> None:
        if not roles.allowed(user.role, action):
            raise Forbidden(f"the {user.role} role may not do {action}")

    @staticmethod
    def _actor(user: User, source: str) -> Actor:
        return Actor(user.email, source[: v.MAX_SOURCE], user.id)

    def _seal(self, seed: str, user_id: str) -> str:
        if self.box is None:
            raise Conflict(
                "TOTP enrolment needs authsvc's secrets key (--secrets-key-file / AUTHSVC_SECRETS_KEY)"
            )
        return self.box.seal(seed, user_id)

    def _unseal(self, stored: str, user_id: str) -> str:
        if self.box is None:
            raise Conflict(
                "TOTP sign-in needs authsvc's secrets key (--secrets-key-file / AUTHSVC_SECRETS_KEY)"
            )
        return self.box.open(stored, user_id)

    # -- invites ---------------------------------------------------------------------------------

    async def CreateInvite(
        self, request: pb.CreateInviteRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateInviteResponse:
        role = _role(request.role)
        email = _email(request.email)
        # From the portal, always its user's session (peers.guard checked it): never the operator's path.
        token = request.session_token or portal_token_var.get()
        if token:
            inviter, session = await self._signed_in(token)
            if not roles.may_assign(inviter.role, None, role):
                raise Forbidden(f"the {inviter.role} role may not invite a user as {role}")
            account_id = inviter.account_id
            actor = self._actor(inviter, request.actor.source_address or session.source_address)
        else:
            account_id = v.ident(request.account_id, "account_id", "acct")
            actor = v.actor(request.actor.user, request.actor.source_address)
        now = self.clock.now()
        token = "inv_" + secrets.token_urlsafe(32)
        invite = Invite(new_id("inv"), account_id, email, role, now, now + INVITE_TTL, None)
        await self.repo.create_invite(invite, token_hash(token), actor)
        log.info(
            "portal invite created",
            extra={"account_id": account_id, "invite_id": invite.id, "actor": actor.user},
        )
        return pb.CreateInviteResponse(
            invite=pb.Invite(
                id=invite.id,
                account_id=account_id,
                email=email,
                role=USER_ROLE.pb(role),
                created_at=ts(now),
                expires_at=ts(invite.expires_at),
            ),
            token=token,
        )

    async def AcceptInvite(
        self, request: pb.AcceptInviteRequest, context: grpc.aio.ServicerContext
    ) -> pb.AcceptInviteResponse:
        invite = await self.repo.invite_by_hash(token_hash(request.token)) if request.token else None
        now = self.clock.now()
        if invite is None or invite.accepted_at is not None or invite.expires_at <= now:
            raise InvalidCredentials("token: this invitation link is not valid (used, expired or unknown)")
        password_hash = await self._hash(request.password, invite.email)
        user = User(
            new_id("usr"),
            invite.account_id,
            invite.email,
            invite.role,
            password_hash,
            None,
            None,
            0,
            now,
            now,
        )
        session, token = self._new_session(user, request.source_address, request.user_agent, now)
        await self.repo.accept_invite(invite, user, session, token_hash(token), now)
        log.info("portal invite accepted", extra={"user_id": user.id, "account_id": user.account_id})
        return pb.AcceptInviteResponse(user=user_pb(user), session_token=token)

    # -- sign-in ---------------------------------------------------------------------------------

    async def SignIn(self, request: pb.SignInRequest, context: grpc.aio.ServicerContext) -> pb.SignInResponse:
        email = request.email.strip().lower()[: v.MAX_EMAIL]
        address = request.source_address[: v.MAX_SOURCE]
        try:
            # Shed before anything else: a refused attempt costs no hash and no database work.
            async with self.work.admitted(sign_in=True):
                return await self._sign_in(request, email, address)
        except Overloaded as exc:
            raise self._shed(exc.retry_after) from None

    async def _sign_in(self, request: pb.SignInRequest, email: str, address: str) -> pb.SignInResponse:
        now = self.clock.now()
        # The attempt is counted (as a failure) before the password is checked, atomically with the
        # throttle's check: concurrent attempts beyond the limit are refused unevaluated.
        verdict, reserved = await self.repo.reserve_attempt(email, address, now, rules.THROTTLE_WINDOW)
        if reserved is None:
            log.info("portal sign-in throttled", extra={"retry_after": round(verdict.retry_after)})
            raise Throttled(SIGN_IN_REFUSED, metadata={"retry_after": str(int(verdict.retry_after) + 1)})
        user = await self.repo.user_by_email(email) if email else None
        # An unknown e-mail costs a verification all the same (timing tells nothing).
        ok = await self.work.verify(user.password_hash if user else self.work.dummy_hash, request.password)
        if user is None or not ok:
            raise InvalidCredentials(SIGN_IN_REFUSED)  # the reserved attempt stays as the failure
        if user.totp_seed is not None:
            if not request.totp_code:
                await self.repo.release_attempt(reserved)  # the password was right; no code was tried
                raise SecondFactorRequired("totp_code: enter the 6-digit code from your authenticator app")
            step = rules.totp_step(
                self._unseal(user.totp_seed, user.id), request.totp_code, now, user.totp_last_step
            )
            if step is None or not await self.repo.use_totp_step(user.id, step):
                raise SecondFactorRequired("totp_code: the code is not valid; enter the current code")
        await self.repo.release_attempt(reserved)
        session, token = self._new_session(user, address, request.user_agent, now)
        await self.repo.sign_in(user, session, token_hash(token), now)
        log.info("portal sign-in", extra={"user_id": user.id, "session_id": session.id})
        return pb.SignInResponse(user=user_pb(user), session_token=token)

    async def GetSession(
        self, request: pb.GetSessionRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetSessionResponse:
        user, session = await self._signed_in(request.session_token)
        required = await self.repo.requires_totp(user.account_id)
        return pb.GetSessionResponse(
            user=user_pb(user),
            session=session_pb(session),
            totp_enrolment_required=rules.totp_enrolment_required(
                required, user.role, user.totp_seed is not None
            ),
            account_requires_totp=required,
        )

    async def SetTotpRequirement(
        self, request: pb.SetTotpRequirementRequest, context: grpc.aio.ServicerContext
    ) -> pb.SetTotpRequirementResponse:
        user, _ = await self._signed_in(request.session_token)
        self._may(user, "account.security")
        await self.repo.set_requires_totp(
            user.account_id, request.required, self._actor(user, request.source_address), self.clock.now()
        )
        return pb.SetTotpRequirementResponse(required=request.required)

    async def SignOut(
        self, request: pb.SignOutRequest, context: grpc.aio.ServicerContext
    ) -> pb.SignOutResponse:
        session = (
            await self.repo.session_by_hash(token_hash(request.session_token))
            if request.session_token
            else None
        )
        if session is not None:
            await self.repo.delete_session(session.id)
        return pb.SignOutResponse()

    # -- users -----------------------------------------------------------------------------------

    async def ListUsers(
        self, request: pb.ListUsersRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListUsersResponse:
        user, _ = await self._signed_in(request.session_token)
        self._may(user, "users.read")
        size = v.page_size(request.page_size)
        after: tuple[float, str] | None = None
        if request.page_token:
            try:
                created, user_id = page_parts(request.page_token, 2)
                after = (float(created), user_id)
            except ValueError:  # BadPageToken included
                raise InvalidRequest(BAD_PAGE_TOKEN) from None
        rows = await self.repo.list_users(user.account_id, size + 1, after)
        out = pb.ListUsersResponse(users=[user_pb(u) for u in rows[:size]])
        if len(rows) > size:
            last = rows[size - 1]
            out.next_page_token = page_token(repr(last.created_at.timestamp()), last.id)
        return out

    async def _change_user(self, token: str, user_id: str, role: str | None, source: str) -> User:
        """Set ``user_id``'s role, or remove the user (role None), as the user of session ``token``."""
        actor_user, _ = await self._signed_in(token)
        target_id = v.ident(user_id, "user_id", "usr")

        def check(target: User, owners: int) -> None:
            if target.account_id != actor_user.account_id:
                raise NotFound(f"user_id: no user {target_id!r}")
            what = f"change a {target.role} to {role}" if role else f"remove a {target.role}"
            if not roles.may_assign(actor_user.role, target.role, role):
                raise Forbidden(f"the {actor_user.role} role may not {what}")
            if not roles.last_owner_kept(owners, target.role, role):
                raise Conflict("user_id: the account's last owner must stay an owner")

        return await self.repo.change_user(
            target_id, role, check, self._actor(actor_user, source), self.clock.now()
        )

    async def SetUserRole(
        self, request: pb.SetUserRoleRequest, context: grpc.aio.ServicerContext
    ) -> pb.SetUserRoleResponse:
        role = _role(request.role)
        updated = await self._change_user(
            request.session_token, request.user_id, role, request.source_address
        )
        return pb.SetUserRoleResponse(user=user_pb(updated))

    async def RemoveUser(
        self, request: pb.RemoveUserRequest, context: grpc.aio.ServicerContext
    ) -> pb.RemoveUserResponse:
        await self._change_user(request.session_token, request.user_id, None, request.source_address)
        return pb.RemoveUserResponse()

    async def ChangePassword(
        self, request: pb.ChangePasswordRequest, context: grpc.aio.ServicerContext
    ) -> pb.ChangePasswordResponse:
        user, _ = await self._signed_in(request.session_token)
        if not await self._verify(user.password_hash, request.current_password):
            raise InvalidCredentials("current_password: not your current password")
        new_hash = await self._hash(request.new_password, user.email)
        now = self.clock.now()
        session, token = self._new_session(user, request.source_address, request.user_agent, now)
        await self.repo.set_password(
            user, new_hash, session, token_hash(token), self._actor(user, request.source_address), now
        )
        return pb.ChangePasswordResponse(session_token=token)

    async def BeginTotpEnrollment(
        self, request: pb.BeginTotpEnrollmentRequest, context: grpc.aio.ServicerContext
    ) -> pb.BeginTotpEnrollmentResponse:
        user, session = await self._signed_in(request.session_token)
        if user.totp_seed is not None:
            await self._current_code(user, session, request.current_code)
        seed = pyotp.random_base32()
        await self.repo.update_user(user.id, totp_pending_seed=self._seal(seed, user.id))
        uri = pyotp.TOTP(seed, interval=rules.TOTP_STEP).provisioning_uri(
            name=user.email, issuer_name=TOTP_ISSUER
        )
        return pb.BeginTotpEnrollmentResponse(provisioning_uri=uri)

    async def ConfirmTotpEnrollment(
        self, request: pb.ConfirmTotpEnrollmentRequest, context: grpc.aio.ServicerContext
    ) -> pb.ConfirmTotpEnrollmentResponse:
        user, session = await self._signed_in(request.session_token)
        if user.totp_pending_seed is None:
            raise Conflict("code: start the enrolment first")
        now = self.clock.now()
        step = rules.totp_step(self._unseal(user.totp_pending_seed, user.id), request.code, now, 0)
        if step is None:
            raise InvalidRequest("code: the code is not valid; enter the current code from the app")
        await self.repo.confirm_totp(user, step, self._actor(user, session.source_address), now)
        return pb.ConfirmTotpEnrollmentResponse(user=user_pb(await self.repo.get_user(user.id)))

    async def DisableTotp(
        self, request: pb.DisableTotpRequest, context: grpc.aio.ServicerContext
    ) -> pb.DisableTotpResponse:
        user, session = await self._signed_in(request.session_token)
        if not await self._verify(user.password_hash, request.password):
            raise InvalidCredentials("password: not your current password")
        required = await self.repo.requires_totp(user.account_id)
        problem = rules.totp_removal_problem(required, user.role, user.totp_seed is not None)
        if problem:
            raise Conflict(problem)
        await self.repo.disable_totp(
            user, self._actor(user, request.source_address or session.source_address), self.clock.now()
        )
        log.info("portal totp disabled", extra={"user_id": user.id})
        return pb.DisableTotpResponse(user=user_pb(await self.repo.get_user(user.id)))

    async def ListSessions(
        self, request: pb.ListSessionsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListSessionsResponse:
        user, current = await self._signed_in(request.session_token)
        now = self.clock.now()
        live = [
            s for s in await self.repo.list_sessions(user.id)
            if rules.session_state(s.created_at, s.last_seen_at, now) == "live"
        ]  # fmt: skip
        return pb.ListSessionsResponse(sessions=[session_pb(s) for s in live], current_session_id=current.id)

    async def RevokeSession(
        self, request: pb.RevokeSessionRequest, context: grpc.aio.ServicerContext
    ) -> pb.RevokeSessionResponse:
        user, _ = await self._signed_in(request.session_token)
        session_id = v.ident(request.session_id, "session_id", "ses")
        if await self.repo.delete_session(session_id, user.id) == 0:
            raise NotFound(f"session_id: no session {session_id!r} of yours")
        return pb.RevokeSessionResponse()

    # -- audit of operations done elsewhere ------------------------------------------------------

    async def RecordAuditEvent(
        self, request: pb.RecordAuditEventRequest, context: grpc.aio.ServicerContext
    ) -> pb.RecordAuditEventResponse:
        before = MessageToDict(request.before)
        after = MessageToDict(request.after)
        problem = recorded_event_problem(request.action, before, after)
        if problem:
            raise InvalidRequest(problem)
        token = request.session_token or portal_token_var.get()
        if token:
            user, session = await self._signed_in(token)
            self._may(user, role_action(request.action))
            account_id = user.account_id
            actor = self._actor(user, request.source_address or session.source_address)
        else:
            account_id = v.ident(request.account_id, "account_id", "acct")
            await self.repo.keys.get_account(account_id)
            actor = v.actor(request.actor.user, request.actor.source_address)
        event = await self.repo.record_event(
            account_id, request.action, actor, self.clock.now(), before, after
        )
        log.info(
            "audit event recorded",
            extra={"account_id": account_id, "action": request.action, "audit_id": event.id},
        )
        return pb.RecordAuditEventResponse(event=cv.audit_event(event))
