"""webhookd's one client of authsvc (over gRPC, mutual TLS unless ``tls`` is None): who an account's
alert e-mails go to (GetAlertRecipients: its portal owners and admins and its extra addresses; an
authsvc too old for that RPC: GetAccount's admin_emails), and its commercial mode, for the event kinds
that exist in one mode only (svckit.events.mode_refusal). The gRPC errors are mapped here, once."""

from __future__ import annotations

from typing import TYPE_CHECKING

import grpc

from svckit.portal_calls import PortalUser
from svckit.prototables import USER_ROLE
from svckit.tls import channel as tls_channel
from travel.auth.v1 import auth_pb2, auth_pb2_grpc, identity_pb2, identity_pb2_grpc
from webhookd._errors import InvalidRequest, Unavailable

if TYPE_CHECKING:
    from svckit.tls import Tls

MODES = {auth_pb2.ACCOUNT_MODE_A: "A", auth_pb2.ACCOUNT_MODE_B: "B"}
# An account's mode never changes: remembered, at most this many accounts.
MAX_CACHED_MODES = 100_000


class Accounts:
    def __init__(self, target: str, tls: Tls | None = None, timeout: float = 5.0) -> None:
        self.target = target
        self.tls = tls
        self.timeout = timeout
        self._channel: grpc.aio.Channel | None = None
        self._modes: dict[str, str] = {}

    def _stub(self) -> auth_pb2_grpc.AuthServiceStub:
        if self._channel is None:
            self._channel = tls_channel(self.target, self.tls, "authsvc")
        return auth_pb2_grpc.AuthServiceStub(self._channel)

    async def _account(self, account_id: str) -> auth_pb2.Account:
        stub = self._stub()
        response: auth_pb2.GetAccountResponse = await stub.GetAccount(
            auth_pb2.GetAccountRequest(account_id=account_id), timeout=self.timeout
        )
        return response.account

    async def admin_emails(self, account_id: str) -> list[str]:
        """The account's extra addresses only (GetAccount). Raises grpc errors as they are: the mailer
        falls back to its configured addresses."""
        return list((await self._account(account_id)).admin_emails)

    async def alert_recipients(self, account_id: str) -> list[str]:
        """Who the account's alert e-mails go to, as authsvc answers it (GetAlertRecipients); from an
        authsvc that does not know the RPC yet (UNIMPLEMENTED), the account's admin_emails as before.
        Raises other grpc errors as they are: the mailer falls back to its configured addresses."""
        stub = self._stub()
        try:
            response: auth_pb2.GetAlertRecipientsResponse = await stub.GetAlertRecipients(
                auth_pb2.GetAlertRecipientsRequest(account_id=account_id), timeout=self.timeout
            )
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.UNIMPLEMENTED:
                raise
            return await self.admin_emails(account_id)
        return list(response.recipients)

    async def mode(self, account_id: str) -> str:
        """ "A" or "B"; an unknown account is invalid_request, authsvc unreachable service_unavailable
        (so nothing is stored that could not be checked)."""
        mode = self._modes.get(account_id)
        if mode is not None:
            return mode
        try:
            account = await self._account(account_id)
        except grpc.aio.AioRpcError as exc:
            if exc.code() in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT):
                raise InvalidRequest(f"account_id: no account {account_id}") from None
            raise Unavailable("the account service cannot be reached to check the account's mode") from None
        mode = MODES.get(account.mode, "")
        if len(self._modes) >= MAX_CACHED_MODES:
            self._modes.clear()
        self._modes[account_id] = mode
        return mode

    async def portal_user(self, token: str) -> PortalUser | None:
        """The portal user a call's session token is of, as authsvc resolves it (GetSession); None when
        authsvc does not know it, or cannot be asked: the portal's call is then refused
        (svckit.portal_calls)."""
        self._stub()  # opens the channel
        stub = identity_pb2_grpc.IdentityServiceStub(self._channel)
        try:
            got: identity_pb2.GetSessionResponse = await stub.GetSession(
                identity_pb2.GetSessionRequest(session_token=token), timeout=self.timeout
            )
        except grpc.aio.AioRpcError:
            return None
        u = got.user
        role = USER_ROLE.get(u.role)
        return PortalUser(u.account_id, u.id, u.email, role, got.session.id, got.session.source_address)

    async def close(self) -> None:
        """Close the channel to authsvc, if one was opened (webhookd's stop)."""
        if self._channel is not None:
            channel, self._channel = self._channel, None
            await channel.close()
