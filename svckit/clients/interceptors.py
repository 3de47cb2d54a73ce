"""The request id travels with every call: a client interceptor adds ``x-request-id`` from
``svckit.logs.request_id_var`` (set by whoever handles the request), so no call site builds it. Metadata
a caller passes is kept, an ``x-request-id`` among it included.

The same interceptor adds the portal's ``x-portal-session`` from ``session_token_var``, set by the portal
once it has read the signed-in user's cookie: authsvc and webhookd act on a portal call only for the user
of that session (svckit.portal_calls). Only the portal sets it.

And the current trace's ``traceparent`` and ``tracestate`` when the process traces (``svckit.tracing``,
which a server loads and switches on). The client library never imports it: a product service that
installed the clients on their own has no OpenTelemetry, and a process that never loaded
``svckit.tracing`` cannot be tracing."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

import grpc

from svckit.logs import request_id_var
from svckit.portal_calls import SESSION_HEADER

REQUEST_ID = "x-request-id"

# The portal session token the calls of this request are made for ("" for none).
session_token_var: ContextVar[str] = ContextVar("portal_session_token", default="")


def trace_headers() -> tuple[tuple[str, str], tuple[str, str]]:
    """(``traceparent``, the current trace's) and (``tracestate``, the account the trace is bound to) when
    this process traces, each value "" for none."""
    tracing = sys.modules.get("svckit.tracing")  # loaded by a server's own start, never from here
    if tracing is None:
        return ("", ""), ("", "")
    return (tracing.TRACEPARENT, tracing.traceparent()), (tracing.TRACESTATE, tracing.tracestate())


def with_request_id(details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
    """``details`` with the context's request id and portal session added to its metadata (a copy: never
    the caller's)."""
    added = [
        (k, v)
        for k, v in (
            (REQUEST_ID, request_id_var.get()),
            (SESSION_HEADER, session_token_var.get()),
            *trace_headers(),
        )
        if v
    ]
    metadata = details.metadata
    if metadata is not None:
        added = [(k, v) for k, v in added if k not in metadata]
    if not added:
        return details
    metadata = grpc.aio.Metadata(*(metadata or ()), *added)
    return grpc.aio.ClientCallDetails(
        details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
    )


class UnaryRequestId(grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[misc]  # grpc is untyped
    """Adds ``x-request-id`` to unary calls."""

    async def intercept_unary_unary(
        self, continuation: Callable[..., Any], client_call_details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        return await continuation(with_request_id(client_call_details), request)


class StreamRequestId(grpc.aio.UnaryStreamClientInterceptor):  # type: ignore[misc]  # grpc is untyped
    """Adds ``x-request-id`` to server-streaming calls."""

    async def intercept_unary_stream(
        self, continuation: Callable[..., Any], client_call_details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        return await continuation(with_request_id(client_call_details), request)


def request_id_interceptors() -> list[grpc.aio.ClientInterceptor]:
    """The interceptors for a channel: one per kind of call (grpc.aio files an interceptor object under
    the first kind it implements only, so one class for both would leave streams without the id)."""
    return [UnaryRequestId(), StreamRequestId()]


@contextlib.contextmanager
def request_id_context(rid: str | None) -> Iterator[None]:
    """The calls made inside carry ``rid`` (nothing changes when it is empty or already the context's)."""
    if not rid or request_id_var.get() == rid:
        yield
        return
    token = request_id_var.set(rid)
    try:
        yield
    finally:
        request_id_var.reset(token)
