"""gRPC aio server plumbing shared by the services: request ids, metrics, health, reflection."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio
from grpc_reflection.v1alpha import reflection

from svckit.errors import ServiceError, to_grpc_status
from svckit.ids import new_id
from svckit.logs import request_id_var
from svckit.metrics import GRPC_HANDLED, GRPC_LATENCY
from svckit.peers import AllowListInterceptor
from svckit.tls import Tls

log = logging.getLogger(__name__)

REQUEST_ID_HEADER = "x-request-id"


def _request_id(context: grpc.aio.ServicerContext) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == REQUEST_ID_HEADER and isinstance(value, str) and 0 < len(value) <= 128:
            return value
    return new_id("req")


def _code_of(context: grpc.aio.ServicerContext) -> str:
    code = context.code()
    if code is None:
        return "OK"
    return code.name if isinstance(code, grpc.StatusCode) else str(code)


class ObservabilityInterceptor(grpc.aio.ServerInterceptor):
    """Sets the request id for logs, maps stray ServiceErrors to statuses, counts and times calls."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        method = handler_call_details.method.rsplit("/", 1)[-1]
        if handler.unary_unary is not None:
            inner_uu = handler.unary_unary

            async def unary_unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                token = request_id_var.set(_request_id(context))
                start = time.perf_counter()
                try:
                    return await inner_uu(request, context)
                except ServiceError as exc:
                    await context.abort_with_status(to_grpc_status(exc))
                finally:
                    GRPC_LATENCY.labels(method).observe(time.perf_counter() - start)
                    GRPC_HANDLED.labels(method, _code_of(context)).inc()
                    request_id_var.reset(token)

            return grpc.unary_unary_rpc_method_handler(
                unary_unary,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            inner_us = handler.unary_stream

            async def unary_stream(request: Any, context: grpc.aio.ServicerContext) -> Any:
                token = request_id_var.set(_request_id(context))
                start = time.perf_counter()
                try:
                    async for item in inner_us(request, context):
                        yield item
                except ServiceError as exc:
                    await context.abort_with_status(to_grpc_status(exc))
                finally:
                    GRPC_LATENCY.labels(method).observe(time.perf_counter() - start)
                    GRPC_HANDLED.labels(method, _code_of(context)).inc()
                    request_id_var.reset(token)

            return grpc.unary_stream_rpc_method_handler(
                unary_stream,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler


Registrar = Callable[[grpc.aio.Server], None]


async def start_server(
    listen: str,
    registrars: Iterable[Registrar],
    service_names: Sequence[str],
    tls: Tls | None = None,
) -> tuple[grpc.aio.Server, int, health_aio.HealthServicer]:
    """Build, bind and start an aio server with health and reflection. Returns (server, port, health).

    ``listen`` is ``host:port``; port 0 binds a free port. With ``tls`` the port requires a client
    certificate from its CA and every call passes the allow list (``svckit.peers``); without, plaintext
    (``--insecure-dev``).
    """
    interceptors: list[grpc.aio.ServerInterceptor] = [ObservabilityInterceptor()]
    if tls is not None:
        interceptors.append(AllowListInterceptor())
    server = grpc.aio.server(
        interceptors=interceptors,
        options=[
            ("grpc.so_reuseport", 0),
            ("grpc.keepalive_time_ms", 20_000),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
        ],
    )
    for register in registrars:
        register(server)
    health = health_aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    names = [
        *service_names,
        health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
        reflection.SERVICE_NAME,
    ]
    reflection.enable_server_reflection(names, server)
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
