"""A gRPC error of a peer as one exception, mapped once (as httpx's ``map_httpcore_exceptions``).

    ClientError          the peer answered with an error: ``type`` from the error table (svckit.errors),
    │                    ``status`` its HTTP status, ``message`` and the ``field`` it names
    ├── PeerUnavailable  the peer could not be reached or did not answer in time (UNAVAILABLE,
    │                    DEADLINE_EXCEEDED, CANCELLED): always ``service_unavailable``, 503
    └── CreditExhausted  a mode A credit hold that does not fit (``credit_exhausted``, 402): ``body()`` is
                         the partner's error body a product service answers before reaching its supplier

An error about one field names it in its ErrorInfo's metadata (``field``, svckit.errors); ``field`` is
that name, ``message`` the text without its leading ``field: `` (what a form shows beside the field),
``detail`` the whole text as sent.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import grpc

from svckit.cancellation import raise_if_cancelling
from svckit.errors import error_info, http_status

# The codes of a peer that cannot be reached or did not answer: the caller may try again later.
UNREACHABLE = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED}
)


class ClientError(Exception):
    """An error answered by a peer (or met on the way to it)."""

    def __init__(
        self,
        type: str,
        message: str,
        *,
        field: str = "",
        code: grpc.StatusCode = grpc.StatusCode.UNKNOWN,
        detail: str | None = None,
    ) -> None:
        self.detail = detail if detail is not None else (f"{field}: {message}" if field else message)
        super().__init__(self.detail)
        self.type = type
        self.status = http_status(type)
        self.message = message
        self.field = field
        self.code = code

    def __repr__(self) -> str:
        return f"{type(self).__name__}(type={self.type!r}, code={self.code.name}, message={self.detail!r})"


class PeerUnavailable(ClientError):
    """The peer cannot be reached, or did not answer within the deadline."""


class CreditExhausted(ClientError):
    """authsvc refused a credit hold: the booking does not fit the account's available credit."""

    def body(self) -> dict[str, Any]:
        """The HTTP 402 error body for the partner (the edge adds requestId and docUrl)."""
        return {"error": {"type": self.type, "message": self.message}}


def client_error(exc: grpc.RpcError) -> ClientError:
    """The ClientError of a gRPC error: the one place a gRPC status becomes an error of the table."""
    code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
    error_type, detail, metadata = error_info(exc)
    if code in UNREACHABLE:
        return PeerUnavailable("service_unavailable", detail, code=code, detail=detail)
    field = metadata.get("field", "")
    message = detail.removeprefix(f"{field}: ") if field else detail
    if error_type == "credit_exhausted":
        return CreditExhausted(error_type, message, field=field, code=code, detail=detail)
    return ClientError(error_type, message, field=field, code=code, detail=detail)


@contextlib.contextmanager
def mapped_errors() -> Iterator[None]:
    """``with mapped_errors(): await stub.X(...)``: a gRPC error leaves the block as a ClientError."""
    try:
        yield
    except grpc.aio.AioRpcError as exc:
        raise_if_cancelling(exc)  # grpc.aio lost a cancellation that landed as the call failed
        raise client_error(exc) from None
