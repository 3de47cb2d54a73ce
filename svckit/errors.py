"""The public error types and their one mapping to HTTP statuses and gRPC status codes.

Every service has its own exception root deriving from ``ServiceError``:

    ServiceError                (svckit)     type, message; never carries a secret
    ├── AuthError               (authsvc)
    ├── WebhookError            (webhookd)
    └── EdgeError               (edge)

A ``ServiceError`` becomes a gRPC status with a ``google.rpc.ErrorInfo`` detail whose ``reason`` is the
error type (``to_grpc_status``), and a gRPC error becomes an HTTP body again (``type_from_rpc_error``).
The field an error is about travels in the ErrorInfo's metadata (``field``): given explicitly
(``metadata={"field": ...}``), or taken where the error is made from its message's ``field: ...`` form,
the services' one way of naming it (``field_of``); a caller reads it from the metadata
(``error_info``), never from the text.
The table below is the only place where an error type meets a status code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status


@dataclass(frozen=True, slots=True)
class ErrorKind:
    http_status: int
    grpc_code: grpc.StatusCode


# decisions.md "Errors": type -> HTTP status, plus the gRPC code services use for it.
ERROR_KINDS: dict[str, ErrorKind] = {
    "missing_api_key": ErrorKind(401, grpc.StatusCode.UNAUTHENTICATED),
    "invalid_api_key": ErrorKind(401, grpc.StatusCode.UNAUTHENTICATED),
    "environment_mismatch": ErrorKind(401, grpc.StatusCode.UNAUTHENTICATED),
    "missing_scope": ErrorKind(403, grpc.StatusCode.PERMISSION_DENIED),
    "ip_not_allowed": ErrorKind(403, grpc.StatusCode.PERMISSION_DENIED),
    "account_read_only": ErrorKind(403, grpc.StatusCode.PERMISSION_DENIED),
    # A live key asked for by an account that must be certified first (authsvc._certify_gate).
    "certification_required": ErrorKind(403, grpc.StatusCode.PERMISSION_DENIED),
    "missing_idempotency_key": ErrorKind(400, grpc.StatusCode.INVALID_ARGUMENT),
    "idempotency_key_reused": ErrorKind(422, grpc.StatusCode.FAILED_PRECONDITION),
    "idempotency_key_in_use": ErrorKind(409, grpc.StatusCode.ABORTED),
    "invalid_request": ErrorKind(400, grpc.StatusCode.INVALID_ARGUMENT),
    "invalid_customer_ref": ErrorKind(400, grpc.StatusCode.INVALID_ARGUMENT),
    "search_quota_exhausted": ErrorKind(402, grpc.StatusCode.RESOURCE_EXHAUSTED),
    "credit_exhausted": ErrorKind(402, grpc.StatusCode.RESOURCE_EXHAUSTED),
    "not_acceptable": ErrorKind(406, grpc.StatusCode.INVALID_ARGUMENT),
    "not_found": ErrorKind(404, grpc.StatusCode.NOT_FOUND),
    "method_not_allowed": ErrorKind(405, grpc.StatusCode.UNIMPLEMENTED),
    "request_timeout": ErrorKind(408, grpc.StatusCode.DEADLINE_EXCEEDED),
    "misdirected_request": ErrorKind(421, grpc.StatusCode.INVALID_ARGUMENT),
    "conflict": ErrorKind(409, grpc.StatusCode.FAILED_PRECONDITION),
    "rate_limited": ErrorKind(429, grpc.StatusCode.RESOURCE_EXHAUSTED),
    "request_header_fields_too_large": ErrorKind(431, grpc.StatusCode.INVALID_ARGUMENT),
    "payload_too_large": ErrorKind(413, grpc.StatusCode.INVALID_ARGUMENT),
    "uri_too_long": ErrorKind(414, grpc.StatusCode.INVALID_ARGUMENT),
    "unsupported_media_type": ErrorKind(415, grpc.StatusCode.INVALID_ARGUMENT),
    "service_unavailable": ErrorKind(503, grpc.StatusCode.UNAVAILABLE),
    # Only a certification run's injected fault (edge.certification): what a timed-out upstream answers.
    "gateway_timeout": ErrorKind(504, grpc.StatusCode.DEADLINE_EXCEEDED),
    # A product upstream's error that is not one of ours (edge.upstreamerrors): 502, or its 4xx kept.
    "upstream_error": ErrorKind(502, grpc.StatusCode.UNKNOWN),
    # Portal identity (travel.auth.v1.IdentityService).
    "invalid_credentials": ErrorKind(401, grpc.StatusCode.UNAUTHENTICATED),
    "second_factor_required": ErrorKind(401, grpc.StatusCode.UNAUTHENTICATED),
    "session_expired": ErrorKind(401, grpc.StatusCode.UNAUTHENTICATED),
    "forbidden": ErrorKind(403, grpc.StatusCode.PERMISSION_DENIED),
    "internal_error": ErrorKind(500, grpc.StatusCode.INTERNAL),
}

_GRPC_FALLBACK: dict[grpc.StatusCode, str] = {
    grpc.StatusCode.INVALID_ARGUMENT: "invalid_request",
    grpc.StatusCode.NOT_FOUND: "not_found",
    grpc.StatusCode.UNAUTHENTICATED: "invalid_api_key",
    # Our services name every 403 in ErrorInfo; a bare PERMISSION_DENIED is the allow list refusing a
    # service (svckit.peers): a fault of the deployment, not of the partner.
    grpc.StatusCode.PERMISSION_DENIED: "internal_error",
    grpc.StatusCode.RESOURCE_EXHAUSTED: "rate_limited",
    grpc.StatusCode.UNAVAILABLE: "service_unavailable",
    grpc.StatusCode.DEADLINE_EXCEEDED: "service_unavailable",
}


# A message about one field starts with its name: ``scopes: unknown scope``, ``data.customerRef: ...``.
_FIELD = re.compile(r"^([a-z_][A-Za-z0-9_.]*): ", re.S)


def field_of(message: str) -> str:
    """The field a service's ``message`` names (its ``field: ...`` form), else ""."""
    m = _FIELD.match(message)
    return m.group(1) if m else ""


class ServiceError(Exception):
    """Root of every error a service answers with on purpose. ``message`` is shown to callers."""

    type: str = "internal_error"
    domain: str = "travel"

    def __init__(self, message: str, *, type: str | None = None, metadata: dict[str, str] | None = None):
        super().__init__(message)
        if type is not None:
            self.type = type
        if self.type not in ERROR_KINDS:
            raise ValueError(f"unknown error type {self.type!r}")
        self.message = message
        self.metadata = dict(metadata or {})
        if "field" not in self.metadata and (field := field_of(message)):
            self.metadata["field"] = field

    @property
    def kind(self) -> ErrorKind:
        return ERROR_KINDS[self.type]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(type={self.type!r}, message={self.message!r})"


class InvalidInput(ServiceError):
    """Bad input found by a rule every process shares (scopes, allow lists); the message names the field.
    Each service's own ``invalid_request`` error derives from it."""

    type = "invalid_request"


def http_status(error_type: str) -> int:
    return ERROR_KINDS.get(error_type, ERROR_KINDS["internal_error"]).http_status


def to_grpc_status(error: ServiceError) -> grpc.Status:
    info = error_details_pb2.ErrorInfo(reason=error.type, domain=error.domain, metadata=error.metadata)
    detail = any_pb2.Any()
    detail.Pack(info)
    status = status_pb2.Status(code=error.kind.grpc_code.value[0], message=error.message, details=[detail])
    return rpc_status.to_status(status)


async def abort(context: Any, error: ServiceError) -> None:
    """Abort an aio servicer call with ``error`` (raises)."""
    await context.abort_with_status(to_grpc_status(error))


def type_from_rpc_error(exc: grpc.RpcError) -> tuple[str, str]:
    """(error type, message) of a gRPC error: ErrorInfo.reason when present, else by status code."""
    error_type, message, _ = error_info(exc)
    return error_type, message


def error_info(exc: grpc.RpcError) -> tuple[str, str, dict[str, str]]:
    """(error type, message, ErrorInfo metadata) of a gRPC error: the type is ErrorInfo.reason when
    present, else by status code (then no metadata)."""
    status = None
    try:
        status = rpc_status.from_call(exc)
    except Exception:  # a malformed trailer is treated as "no details"
        status = None
    code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
    message = exc.details() if hasattr(exc, "details") else str(exc)
    if status is not None:
        for detail in status.details:
            if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                detail.Unpack(info)
                if info.reason in ERROR_KINDS:
                    return info.reason, status.message, dict(info.metadata)
    return _GRPC_FALLBACK.get(code, "internal_error"), message or "internal error", {}
