"""Traces across the services (OpenTelemetry): one trace from a partner's request at the edge through
authsvc, webhookd and the product upstream to the webhook delivery it causes.

Off by default. ``setup(service, endpoint)`` with an OTLP/HTTP endpoint (``--otlp-endpoint``, e.g.
``http://collector:4318/v1/traces``) switches it on for the process; until then every function here
returns at once and no span object is made (``tracer`` is None), so tracing costs a request one global
look-up when off.

How the context travels: the W3C ``traceparent`` header on HTTP (edge -> product upstream,
``inject_into``; webhookd -> the partner's endpoint) and as gRPC metadata (``svckit.clients.interceptors``
adds it beside ``x-request-id``; ``svckit.grpc_server`` opens the server span, ``traced``). A webhook is
sent later by a worker, so webhookd keeps the ``traceparent`` of each event it stored (``remember_event``,
the latest ``EVENT_CONTEXTS`` per process) for the delivery's span (``start_delivery``). The request id is
the ``request.id`` attribute of every span.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import grpc

from svckit.flags import add_flag, env_name
from svckit.logs import request_id_var

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Tracer

REQUEST_ID = "request.id"
TRACEPARENT = "traceparent"
EVENT_CONTEXTS = 10_000

tracer: Tracer | None = None
_provider: TracerProvider | None = None
_events: OrderedDict[str, tuple[str, str]] = OrderedDict()  # event id -> (traceparent, request id)


def add_tracing_args(parser: Any, service: str) -> None:
    """``--otlp-endpoint`` (``<SERVICE>_OTLP_ENDPOINT``): where spans go; empty, the default, is off."""
    add_flag(
        parser,
        "--otlp-endpoint",
        env=env_name(service, "otlp_endpoint"),
        default="",
        help="OTLP/HTTP traces URL (http://collector:4318/v1/traces); empty: no tracing",
    )


def setup(service: str, endpoint: str = "", exporter: SpanExporter | None = None) -> bool:
    """Switch tracing on for this process when ``endpoint`` (OTLP/HTTP, batched) or ``exporter`` (a test's
    in-memory one, each span exported when it ends) is given; whether it is on."""
    global tracer, _provider
    if not endpoint and exporter is None:
        return False
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    if endpoint:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    _provider = provider
    tracer = provider.get_tracer("svckit.tracing")
    return True


def shutdown() -> None:
    """Export what is pending and switch tracing off (a service's last step)."""
    global tracer, _provider
    if _provider is not None:
        _provider.shutdown()
    tracer, _provider = None, None


def _kind(name: str) -> Any:
    from opentelemetry.trace import SpanKind

    return getattr(SpanKind, name)


_OFF: contextlib.AbstractContextManager[None] = contextlib.nullcontext()


def span(
    name: str,
    carrier: Mapping[str, str] | None = None,
    request_id: str = "",
    *,
    kind: str = "INTERNAL",
) -> contextlib.AbstractContextManager[None]:
    """A span around a ``with`` block: the child of the context in ``carrier`` (a request's headers or
    gRPC metadata, with ``traceparent``; an empty one starts a trace) or else of the current span.
    ``request_id`` (default: the logging context's) is its ``request.id``. When tracing is off, one
    shared do-nothing context manager."""
    if tracer is None:
        return _OFF
    return _span(tracer, name, carrier, request_id, kind)


@contextlib.contextmanager
def _span(
    tracer: Tracer, name: str, carrier: Mapping[str, str] | None, request_id: str, kind: str
) -> Iterator[None]:
    context = None
    if carrier is not None:
        from opentelemetry.propagate import extract

        context = extract({TRACEPARENT: carrier.get(TRACEPARENT, "")} if carrier else {})
    attributes = {REQUEST_ID: request_id or request_id_var.get() or ""}
    with tracer.start_as_current_span(name, context=context, kind=_kind(kind), attributes=attributes):
        yield


def server_span(
    name: str, headers: Mapping[str, str], request_id: str
) -> contextlib.AbstractContextManager[None]:
    """The span of a request a server received, continuing the caller's trace (``traceparent``)."""
    return span(name, headers, request_id, kind="SERVER")


def annotate(request_id: str) -> None:
    """Set the current span's ``request.id`` (for a server that learns it after the span began)."""
    if tracer is not None:
        from opentelemetry.trace import get_current_span

        get_current_span().set_attribute(REQUEST_ID, request_id)


def traceparent() -> str:
    """The current span's ``traceparent`` value, or "" (tracing off, or no span)."""
    if tracer is None:
        return ""
    from opentelemetry.propagate import inject

    carrier: dict[str, str] = {}
    inject(carrier)
    return carrier.get(TRACEPARENT, "")


def inject_into(headers: dict[str, str]) -> None:
    """Add the current span's ``traceparent`` to outgoing HTTP headers (nothing when off)."""
    value = traceparent()
    if value:
        headers[TRACEPARENT] = value


def remember_event(event_id: str) -> None:
    """Keep the current span's context and request id for ``event_id``'s deliveries (webhookd, as it
    stores an event)."""
    value = traceparent()
    if value:
        from opentelemetry.trace import get_current_span

        attributes = getattr(get_current_span(), "attributes", None) or {}
        _events[event_id] = (value, str(attributes.get(REQUEST_ID) or request_id_var.get() or ""))
        _events.move_to_end(event_id)
        while len(_events) > EVENT_CONTEXTS:
            _events.popitem(last=False)


def start_delivery(event_id: str, headers: dict[str, str]) -> Any:
    """A span for one delivery of ``event_id``, continuing the trace that published it, its
    ``traceparent`` added to the delivery's ``headers``; None (nothing done) when tracing is off or the
    event was stored by another process. End it with ``end_delivery``."""
    if tracer is None:
        return None
    known = _events.get(event_id)
    if known is None:
        return None
    from opentelemetry.propagate import extract, inject
    from opentelemetry.trace import set_span_in_context

    parent, request_id = known
    attributes = {REQUEST_ID: request_id, "event.id": event_id}
    delivery = tracer.start_span(
        "webhookd deliver",
        context=extract({TRACEPARENT: parent}),
        kind=_kind("CLIENT"),
        attributes=attributes,
    )
    inject(headers, context=set_span_in_context(delivery))
    return delivery


def end_delivery(delivery: Any, status: int) -> None:
    """End a ``start_delivery`` span with the endpoint's HTTP status (0: none came back)."""
    if delivery is not None:
        delivery.set_attribute("http.response.status_code", status)
        delivery.end()


def traced(method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """``handler`` of the gRPC ``method`` inside a server span continuing the caller's trace (the
    ``traceparent`` metadata); ``handler`` itself when tracing is off, so an untraced server pays nothing.
    ``svckit.grpc_server`` wraps every method with it, where a server interceptor would run."""
    if tracer is None:
        return handler
    name = method.lstrip("/")

    def metadata(context: grpc.aio.ServicerContext) -> dict[str, str]:
        return {k: v for k, v in context.invocation_metadata() or () if isinstance(v, str)}

    if handler.unary_unary is not None:
        inner_uu = handler.unary_unary

        async def unary_unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            with span(name, metadata(context), kind="SERVER"):
                return await inner_uu(request, context)

        return handler._replace(unary_unary=unary_unary)  # a named tuple: the serializers stay
    if handler.unary_stream is not None:
        inner_us = handler.unary_stream

        async def unary_stream(request: Any, context: grpc.aio.ServicerContext) -> Any:
            with span(name, metadata(context), kind="SERVER"):
                async for item in inner_us(request, context):
                    yield item

        return handler._replace(unary_stream=unary_stream)  # a named tuple: the serializers stay
    return handler
