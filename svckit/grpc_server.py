"""gRPC aio server plumbing shared by the services: request ids, metrics, health, reflection."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from time import perf_counter
from typing import Any, cast

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio
from grpc_reflection.v1alpha import reflection

from svckit import tracing
from svckit.errors import ServiceError, to_grpc_status
from svckit.ids import new_request_id
from svckit.logs import request_id_var
from svckit.metrics import GRPC_HANDLED, GRPC_LATENCY
from svckit.outage import INTERNAL_MESSAGE, OUTAGE_MESSAGE, OutageLog
from svckit.peers import SessionResolver, guard
from svckit.tls import Tls

log = logging.getLogger(__name__)

REQUEST_ID_HEADER = "x-request-id"
# Calls failed by an outage (the database, a peer): one line per 10 s with their count (svckit.outage).
OUTAGES = OutageLog(log)


async def unexpected(context: grpc.aio.ServicerContext, exc: Exception) -> None:
    """Abort a call a handler failed with ``exc`` (raises): an outage (svckit.outage.classify: the
    database refusing or losing a connection, a peer not answering) is UNAVAILABLE
    ``service_unavailable``, anything else INTERNAL ``internal_error``; neither carries the error's
    text, which goes to the log only (an outage's counted, a bug's with its traceback)."""
    if OUTAGES.count(exc) is not None:
        error = ServiceError(OUTAGE_MESSAGE, type="service_unavailable")
    else:
        log.error("call failed", exc_info=exc)
        error = ServiceError(INTERNAL_MESSAGE)
    await context.abort_with_status(to_grpc_status(error))


def request_id_of(metadata: Iterable[tuple[str, Any]] | None) -> str:
    """The caller's ``x-request-id`` (1-128 characters), else a new one."""
    for key, value in metadata or ():
        if key == REQUEST_ID_HEADER and isinstance(value, str) and 0 < len(value) <= 128:
            return value
    return new_request_id()


def observe(method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """``handler`` of ``method`` mapping stray ServiceErrors to statuses (any other error: ``unexpected``),
    counting and timing its calls.
    Built once per method, with its metric children bound, when the server registers it
    (``Registering``): a call pays for no interceptor and no label look-up. The request id for logs is
    set when the call is routed (``_WrappedGeneric.service``)."""
    name = method.rsplit("/", 1)[-1]
    latency = GRPC_LATENCY.labels(name)
    handled: dict[object, Any] = {None: GRPC_HANDLED.labels(name, "OK")}

    def count(context: grpc.aio.ServicerContext) -> None:
        code = context.code()
        child = handled.get(code)
        if child is None:
            label = code.name if isinstance(code, grpc.StatusCode) else str(code)
            child = handled[code] = GRPC_HANDLED.labels(name, label)
        child.inc()

    if handler.unary_unary is not None:
        inner_uu = handler.unary_unary

        async def unary_unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            start = perf_counter()
            try:
                return await inner_uu(request, context)
            except ServiceError as exc:
                await context.abort_with_status(to_grpc_status(exc))
            except grpc.aio.BaseError:  # the call aborted (context.abort) or the server stopping
                raise
            except Exception as exc:
                await unexpected(context, exc)
            finally:
                latency.observe(perf_counter() - start)
                count(context)

        return handler._replace(unary_unary=unary_unary)  # a named tuple: the serializers stay
    if handler.unary_stream is not None:
        inner_us = handler.unary_stream

        async def unary_stream(request: Any, context: grpc.aio.ServicerContext) -> Any:
            start = perf_counter()
            try:
                async for item in inner_us(request, context):
                    yield item
            except ServiceError as exc:
                await context.abort_with_status(to_grpc_status(exc))
            except grpc.aio.BaseError:  # the call aborted (context.abort) or the server stopping
                raise
            except Exception as exc:
                await unexpected(context, exc)
            finally:
                latency.observe(perf_counter() - start)
                count(context)

        return handler._replace(unary_stream=unary_stream)  # a named tuple: the serializers stay
    return handler


Wrap = Callable[[str, grpc.RpcMethodHandler], grpc.RpcMethodHandler]


class _WrappedGeneric(grpc.GenericRpcHandler):  # type: ignore[misc]  # grpc is untyped
    """A generic handler whose method handlers come wrapped, each wrapped once; routing a call here sets
    its request id for logs, from the metadata grpc has already read for routing. grpc.aio routes a call
    in the task that then runs its handler, and each task has its own copy of the context, so the id
    needs no reset and never leaks into another call."""

    def __init__(self, inner: grpc.GenericRpcHandler, wrap: Wrap) -> None:
        self._inner = inner
        self._wrap = wrap
        # method -> (the inner handler, its wrapped form); one entry per method the inner one serves.
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        handler = self._inner.service(handler_call_details)
        if handler is None:
            return None
        method: str = handler_call_details.method
        hit = self._wrapped.get(method)
        if hit is None or hit[0] is not handler:
            hit = self._wrapped[method] = (handler, self._wrap(method, handler))
        request_id_var.set(request_id_of(handler_call_details.invocation_metadata))
        return hit[1]


class Registering:
    """The server as the ``add_*_to_server`` functions see it: every method handler they register is
    wrapped once (observability; with mTLS, the allow list inside it), where a server interceptor would
    run, and allocate its wrappers, on every call.

    Methods come to the server as generic handlers only. grpc.aio's serving loop keeps one pending
    request per *registered* method and waits on all of them (``asyncio.wait``) for every call it
    accepts: with the 38 methods of authsvc that wait was half the server's Python time per call. As
    generic handlers there is one pending request; the generated code already adds every method both
    ways, so the registered table is served as one more generic handler (reached only if none before
    it serves the method)."""

    def __init__(self, server: grpc.aio.Server, wrap: Wrap) -> None:
        self.server = server
        self.wrap = wrap

    def add_generic_rpc_handlers(self, handlers: Iterable[grpc.GenericRpcHandler]) -> None:
        self.server.add_generic_rpc_handlers(tuple(_WrappedGeneric(h, self.wrap) for h in handlers))

    def add_registered_method_handlers(
        self, service: str, handlers: dict[str, grpc.RpcMethodHandler]
    ) -> None:
        self.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, handlers),))


Registrar = Callable[[grpc.aio.Server], None]


async def start_server(
    listen: str,
    registrars: Iterable[Registrar],
    service_names: Sequence[str],
    tls: Tls | None = None,
    portal_sessions: SessionResolver | None = None,
) -> tuple[grpc.aio.Server, int, health_aio.HealthServicer]:
    """Build, bind and start an aio server with health and reflection, every method observed (``observe``).
    Returns (server, port, health).

    ``listen`` is ``host:port``; port 0 binds a free port. With ``tls`` the port requires a client
    certificate from its CA and every call passes the allow list (``svckit.peers``); without, plaintext
    (``--insecure-dev``). ``portal_sessions`` resolves the session a call from the portal carries
    (svckit.portal_calls); without it the portal's certificate may only sign in.
    """
    server = grpc.aio.server(
        options=[
            ("grpc.so_reuseport", 0),
            ("grpc.keepalive_time_ms", 20_000),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
        ],
    )
    # Spans only when this process set tracing up before starting its server (svckit.tracing).
    if tls is None:

        def wrap(method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
            return observe(method, tracing.traced(method, handler))
    else:

        def wrap(method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
            return observe(method, tracing.traced(method, guard(method, handler, portal_sessions)))

    registering = cast(grpc.aio.Server, Registering(server, wrap))
    for register in registrars:
        register(registering)
    health = health_aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, registering)
    names = [
        *service_names,
        health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
        reflection.SERVICE_NAME,
    ]
    reflection.enable_server_reflection(names, registering)
    if tls is None:
        port = server.add_insecure_port(listen)
    else:
        port = server.add_secure_port(listen, tls.server_credentials())
    if port == 0:
        raise OSError(f"could not bind gRPC listener {listen}")
    await server.start()
    for name in [*service_names, ""]:
        await health.set(name, health_pb2.HealthCheckResponse.SERVING)
    return server, port, health


async def stop_server(server: grpc.aio.Server, health: health_aio.HealthServicer, grace: float) -> None:
    """Graceful stop: report NOT_SERVING, refuse new calls, let running ones finish for ``grace``."""
    await health.enter_graceful_shutdown()
    await server.stop(grace)
