"""webhookd's one client of authsvc (over gRPC, mutual TLS unless ``tls`` is None): who an account's
alert e-mails go to (GetAlertRecipients: its portal owners and admins and its extra addresses; an
authsvc too old for that RPC: GetAccount's admin_emails), and its commercial mode, for the event kinds
that exist in one mode only (svckit.events.mode_refusal). The calls go through ``svckit.clients.AuthClient``
(one channel, round robin over several authsvc addresses, retries of its reads), whose one error mapping
(``ClientError``, its ``code`` the gRPC status) is read here."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import grpc
from cachetools import LRUCache

from svckit.clients import AuthClient, ClientError
from svckit.clients.auth import auth_target
from svckit.portal_calls import PortalUser
from svckit.prototables import ACCOUNT_MODE, USER_ROLE
from travel.auth.v1 import auth_pb2, identity_pb2
from webhookd._errors import InvalidRequest, Unavailable

if TYPE_CHECKING:
    from svckit.tls import Tls

# An account's mode never changes: remembered, at most this many accounts.
MAX_CACHED_MODES = 100_000


class Accounts:
    def __init__(self, addresses: str | Iterable[str], tls: Tls | None = None, timeout: float = 5.0) -> None:
        auth_target(addresses)  # a bad --authsvc stops the start, not the first alert
        self.addresses = addresses
        self.tls = tls
        self.timeout = timeout
        self._client: AuthClient | None = None
        self._modes: LRUCache[str, str] = LRUCache(MAX_CACHED_MODES)  # least recently used evicted

    def _auth(self) -> AuthClient:
        """The client, its channel opened on first use (inside the running loop)."""
        if self._client is None:
            self._client = AuthClient(self.addresses, self.tls, timeout=self.timeout)
        return self._client

    async def _account(self, account_id: str) -> auth_pb2.Account:
        response = await self._auth().get_account(auth_pb2.GetAccountRequest(account_id=account_id))
        return response.account

    async def admin_emails(self, account_id: str) -> list[str]:
        """The account's extra addresses only (GetAccount). Raises the ClientError: the mailer falls back
        to its configured addresses."""
        return list((await self._account(account_id)).admin_emails)

    async def alert_recipients(self, account_id: str) -> list[str]:
        """Who the account's alert e-mails go to, as authsvc answers it (GetAlertRecipients); from an
        authsvc that does not know the RPC yet (UNIMPLEMENTED), the account's admin_emails as before.
        Raises other ClientErrors: the mailer falls back to its configured addresses."""
        request = auth_pb2.GetAlertRecipientsRequest(account_id=account_id)
        try:
            response = await self._auth().get_alert_recipients(request)
        except ClientError as exc:
            if exc.code != grpc.StatusCode.UNIMPLEMENTED:
                raise
            return await self.admin_emails(account_id)
        return list(response.recipients)

    async def mode(self, account_id: str) -> str:
        """ "A" or "B"; an unknown account is invalid_request, authsvc unreachable service_unavailable
        (so nothing is stored that could not be checked)."""
        mode: str | None = self._modes.get(account_id)
        if mode is not None:
            return mode
        try:
            account = await self._account(account_id)
        except ClientError as exc:
            if exc.code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT):
                raise InvalidRequest(f"account_id: no account {account_id}") from None
            raise Unavailable("the account service cannot be reached to check the account's mode") from None
        mode = str(ACCOUNT_MODE.get(account.mode))
        self._modes[account_id] = mode
        return mode

    async def portal_user(self, token: str) -> PortalUser | None:
        """The portal user a call's session token is of, as authsvc resolves it (GetSession); None when
        authsvc does not know it, or cannot be asked: the portal's call is then refused
        (svckit.portal_calls)."""
        try:
            got = await self._auth().get_session(identity_pb2.GetSessionRequest(session_token=token))
        except ClientError:
            return None
        u = got.user
        role = USER_ROLE.get(u.role)
        return PortalUser(u.account_id, u.id, u.email, role, got.session.id, got.session.source_address)

    async def close(self) -> None:
        """Close the channel to authsvc, if one was opened (webhookd's stop)."""
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()
