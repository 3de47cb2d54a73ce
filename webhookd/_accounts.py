"""webhookd's one client of authsvc (GetAccount over gRPC, mutual TLS unless ``tls`` is None): an
account's admin e-mails, for disable alerts, and its commercial mode, for the event kinds that exist in
one mode only (svckit.events.mode_refusal). The gRPC errors are mapped here, once."""

from __future__ import annotations

from typing import TYPE_CHECKING

import grpc

from svckit.tls import channel as tls_channel
from travel.auth.v1 import auth_pb2, auth_pb2_grpc
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

    async def _account(self, account_id: str) -> auth_pb2.Account:
        if self._channel is None:
            self._channel = tls_channel(self.target, self.tls, "authsvc")
        stub = auth_pb2_grpc.AuthServiceStub(self._channel)
        response: auth_pb2.GetAccountResponse = await stub.GetAccount(
            auth_pb2.GetAccountRequest(account_id=account_id), timeout=self.timeout
        )
        return response.account

    async def admin_emails(self, account_id: str) -> list[str]:
        """Raises grpc errors as they are: the mailer falls back to its configured addresses."""
        return list((await self._account(account_id)).admin_emails)

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

    async def close(self) -> None:
        """Close the channel to authsvc, if one was opened (webhookd's stop)."""
        if self._channel is not None:
            channel, self._channel = self._channel, None
            await channel.close()
