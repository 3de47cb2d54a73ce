"""The portal's gRPC peers: one channel and stub per service, and the one mapping of their errors.

Every call goes through ``Peers.call``: a gRPC error becomes a ``PortalError`` with the HTTP status of
the error table, the public error type, the message, and the form field it names (messages of the
services start with ``field: ...``), so a page can show it beside the field.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable
from typing import Any, TypeVar

import grpc

from svckit.errors import http_status, type_from_rpc_error
from svckit.logs import request_id_var
from svckit.tls import Tls, channel
from travel.auth.v1 import auth_pb2_grpc, identity_pb2_grpc
from travel.webhooks.v1 import webhooks_pb2_grpc

T = TypeVar("T")
TIMEOUT = 10.0
_FIELD = re.compile(r"^([a-z_][a-z0-9_.]*): (.*)$", re.S)


class PortalError(Exception):
    def __init__(self, status: int, type: str, message: str, field: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.type = type
        self.message = message
        self.field = field


def portal_error(exc: grpc.RpcError) -> PortalError:
    error_type, message = type_from_rpc_error(exc)
    field = ""
    m = _FIELD.match(message or "")
    if m:
        field, message = m.group(1), m.group(2)
    return PortalError(http_status(error_type), error_type, message, field)


class Peers:
    def __init__(self, authsvc: str, webhookd: str, tls: Tls | None) -> None:
        self._auth_channel = channel(authsvc, tls, "authsvc")
        self._hooks_channel = channel(webhookd, tls, "webhookd")
        self.auth = auth_pb2_grpc.AuthServiceStub(self._auth_channel)
        self.identity = identity_pb2_grpc.IdentityServiceStub(self._auth_channel)
        self.webhooks = webhooks_pb2_grpc.WebhookServiceStub(self._hooks_channel)

    @staticmethod
    def metadata() -> tuple[tuple[str, str], ...]:
        rid = request_id_var.get()
        return (("x-request-id", rid),) if rid else ()

    async def call(self, method: Any, request: Any) -> Any:
        """``await peers.call(peers.auth.GetKey, pb.GetKeyRequest(...))`` with the request id passed on."""
        try:
            call: Awaitable[Any] = method(request, timeout=TIMEOUT, metadata=self.metadata())
            return await call
        except grpc.aio.AioRpcError as exc:
            raise portal_error(exc) from None

    async def close(self) -> None:
        await self._auth_channel.close()
        await self._hooks_channel.close()
