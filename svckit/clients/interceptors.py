"""The request id travels with every call: a client interceptor adds ``x-request-id`` from
``svckit.logs.request_id_var`` (set by whoever handles the request), so no call site builds it. Metadata
a caller passes is kept, an ``x-request-id`` among it included."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from svckit.logs import request_id_var

REQUEST_ID = "x-request-id"


def with_request_id(details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
    """``details`` with the context's request id added to its metadata (a copy: never the caller's)."""
    rid = request_id_var.get()
    if not rid:
        return details
    metadata = details.metadata
    if metadata is None:
        metadata = grpc.aio.Metadata((REQUEST_ID, rid))
    elif REQUEST_ID in metadata:
        return details
    else:
        metadata = grpc.aio.Metadata(*metadata, (REQUEST_ID, rid))
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
