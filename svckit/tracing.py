"""Traces across the services (OpenTelemetry): one trace from a partner's request at the edge through
authsvc, webhookd and the product upstream to the webhook delivery it causes.

Spans are off by default. ``setup(service, endpoint)`` with an OTLP/HTTP endpoint (``--otlp-endpoint``,
e.g. ``http://collector:4318/v1/traces``) switches them on for the process; until then no span object is
made (``tracer`` is None). The trace context travels all the same: with spans off, a server "span" is a
context variable holding the ``traceparent`` it passes on (the caller's trace id, a random span id of its
own; a random trace id when the caller sent none), so every proxied request and every webhook delivery
carries a valid ``traceparent`` whether or not anything is exported, at the cost of two random numbers and a
context variable per request, no SDK.

Whose trace: a partner may send its own ``traceparent`` to the edge; its trace id then reaches the product
upstream and the deliveries of the events published while handling it, but only events of the partner's
own account. The edge binds the trace to the caller's account (``bind``), which travels beside it as
``tracestate: svc=<account>`` (edge -> upstream over HTTP, upstream -> webhookd as gRPC metadata);
webhookd keeps an event's trace only when that account is the event's (``remember_event``). Any other
event's deliveries get a trace id of their own, derived from the event id, the same on every attempt.

How the context travels: the W3C ``traceparent`` header on HTTP (edge -> product upstream,
``inject_into``; webhookd -> the partner's endpoint) and as gRPC metadata (``svckit.clients.interceptors``
adds it beside ``x-request-id``; ``svckit.grpc_server`` opens the server span, ``traced``). A webhook is
sent later by a worker, so webhookd keeps the ``traceparent`` of each event it stored (``remember_event``,
the latest ``EVENT_CONTEXTS`` per process) for the delivery's span (``start_delivery``). The request id is
the ``request.id`` attribute of every span.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import re
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any

import grpc

from svckit.flags import add_flag, env_name
from svckit.ids import Batched
from svckit.logs import request_id_var

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Tracer

REQUEST_ID = "request.id"
TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
# Our tracestate key: the account a trace belongs to (``svc=acct_...``).
STATE_KEY = "svc"
EVENT_CONTEXTS = 10_000
# The longest tracestate read (W3C: at most 32 entries of at most 256 characters each; ours is one).
MAX_TRACESTATE = 512

# (the current traceparent when spans are off, the account the trace is bound to): set by ``span`` and
# ``bind``, read by ``traceparent`` and ``tracestate``.
_trace: ContextVar[tuple[str, str]] = ContextVar("svckit_trace", default=("", ""))
_random = random.Random()

tracer: Tracer | None = None
_provider: TracerProvider | None = None
_events: OrderedDict[str, tuple[str, str]] = OrderedDict()  # event id -> (traceparent, request id)


_NO_TRACE, _NO_SPAN = "0" * 32, "0" * 16  # all zeros: not a valid trace id, parent id
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-[ -~]*)?")


# New traceparents and span ids made BATCH at a time from one draw of random digits (``svckit.ids.Batched``,
# as edge.responses.new_request_id makes request ids): a trace id and a span id drawn and formatted per
# request cost about 7,000 instructions, a batch's share is a few hundred. An all-zero id (not valid) has a
# chance of 2^-64 per span id and is not looked for.
def _reseed() -> None:
    """In a forked child: not the parent's generator state (no shared ids; ``Batched`` drops the rest)."""
    _random.seed()


os.register_at_fork(after_in_child=_reseed)


def _digits(count: int) -> str:
    return _random.getrandbits(4 * count).to_bytes(count // 2).hex()


def _new_traces(count: int) -> list[str]:
    d = _digits(48 * count)
    return [f"00-{d[at : at + 32]}-{d[at + 32 : at + 48]}-00" for at in range(0, 48 * count, 48)]


def _span_ids(count: int) -> list[str]:
    d = _digits(16 * count)
    return [d[at : at + 16] for at in range(0, 16 * count, 16)]


# The ``traceparent`` of a new trace (not sampled), and a new span id.
_new_trace = Batched(_new_traces).take
_span_id = Batched(_span_ids).take


def parse_traceparent(value: str | None) -> tuple[str, str, str] | None:
    """(trace id, parent id, flags) of a W3C ``traceparent`` value, lower-case hex; None when it is not a
    valid one (then a receiver starts a trace of its own). Version ``00`` is exactly 55 characters; a
    later version (not ``ff``) may have more after a dash, which is ignored. Pure."""
    if not value or len(value) > 512:
        return None
    found = _TRACEPARENT.fullmatch(value)
    if found is None:
        return None
    version, trace_id, parent_id, flags, more = found.groups()
    if version == "ff" or (version == "00" and more):
        return None
    if trace_id == _NO_TRACE or parent_id == _NO_SPAN:
        return None
    return trace_id, parent_id, flags


def new_traceparent(parent: str | None = None) -> str:
    """A ``traceparent`` for a new span: the child of ``parent`` (its trace id and flags) when that is
    valid, else the root of a new trace (random trace id, not sampled)."""
    parsed = parse_traceparent(parent) if parent else None
    if parsed is None:
        return _new_trace()
    return f"00-{parsed[0]}-{_span_id()}-{parsed[2]}"


def bound_account(state: str | None) -> str:
    """The account of our ``svc=`` entry of a ``tracestate`` value, or ""."""
    if not state or len(state) > MAX_TRACESTATE:
        return ""
    for entry in state.split(","):
        key, _, value = entry.strip().partition("=")
        if key == STATE_KEY:
            value = value.strip()
            ok = 0 < len(value) <= 64 and value.isascii() and value.replace("_", "").isalnum()
            return value if ok else ""
    return ""


def event_traceparent(event_id: str) -> str:
    """The parent of the deliveries of an event whose publishing trace is not known here (or not the
    event account's): a trace id and span id derived from the event id, so every attempt of one event,
    from any process, has the same trace id."""
    trace_id, span_id = _event_ids(event_id)
    return f"00-{trace_id}-{span_id}-01"  # sampled: its delivery spans are kept when on


def _event_ids(event_id: str) -> tuple[str, str]:
    """The trace id and span id ``event_traceparent`` derives from an event id."""
    digest = hashlib.blake2b(event_id.encode(), digest_size=24).hexdigest()
    return digest[:32], digest[32:48]


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


def continue_trace(parent: str | None) -> Token[tuple[str, str]]:
    """Spans off: a received request's trace as the context's, the child of ``parent`` (a traceparent
    value; a new trace when it is None or not valid), not bound to an account; undo it with
    ``_trace.reset`` of the token (``end_trace``). What ``span`` does with a carrier, without the context
    manager's calls (the edge's product requests)."""
    return _trace.set((new_traceparent(parent), ""))


def end_trace(token: Token[tuple[str, str]]) -> None:
    _trace.reset(token)


class _Continued:
    """Spans off: the trace of a received request (``carrier``) as the context's, for a ``with`` block."""

    __slots__ = ("carrier", "token")

    def __init__(self, carrier: Mapping[str, str]) -> None:
        self.carrier = carrier
        self.token: Token[tuple[str, str]] | None = None

    def __enter__(self) -> None:
        self.token = _trace.set(_received(self.carrier))

    def __exit__(self, *exc: object) -> None:
        if self.token is not None:
            _trace.reset(self.token)


def _received(carrier: Mapping[str, str]) -> tuple[str, str]:
    """(a traceparent of our own continuing ``carrier``'s, the account it is bound to)."""
    parent = carrier.get(TRACEPARENT)
    parsed = parse_traceparent(parent) if parent else None
    if parsed is None:
        return _new_trace(), ""
    return f"00-{parsed[0]}-{_span_id()}-{parsed[2]}", bound_account(carrier.get(TRACESTATE))


def span(
    name: str,
    carrier: Mapping[str, str] | None = None,
    request_id: str = "",
    *,
    kind: str = "INTERNAL",
) -> contextlib.AbstractContextManager[None]:
    """A span around a ``with`` block: the child of the context in ``carrier`` (a request's headers or
    gRPC metadata, with ``traceparent`` and our ``tracestate``; an empty one starts a trace) or else of the
    current span. ``request_id`` (default: the logging context's) is its ``request.id``. When spans are
    off, a received request's trace (``carrier`` given) is kept in a context variable; otherwise one
    shared do-nothing context manager."""
    if tracer is None:
        return _OFF if carrier is None else _Continued(carrier)
    return _span(tracer, name, carrier, request_id, kind)


@contextlib.contextmanager
def _span(
    tracer: Tracer, name: str, carrier: Mapping[str, str] | None, request_id: str, kind: str
) -> Iterator[None]:
    context = None
    token = None
    if carrier is not None:
        from opentelemetry.propagate import extract

        parent = carrier.get(TRACEPARENT, "")
        valid = parse_traceparent(parent) is not None
        context = extract({TRACEPARENT: parent} if valid else {})
        token = _trace.set(("", bound_account(carrier.get(TRACESTATE)) if valid else ""))
    attributes = {REQUEST_ID: request_id or request_id_var.get() or ""}
    try:
        with tracer.start_as_current_span(name, context=context, kind=_kind(kind), attributes=attributes):
            yield
    finally:
        if token is not None:
            _trace.reset(token)


def bind(account_id: str) -> None:
    """The current trace belongs to ``account_id`` (the edge, once it knows the caller): events of that
    account published within it continue it, no other's. Undone when the enclosing ``span`` ends."""
    _trace.set((_trace.get()[0], account_id))


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
    """The current span's ``traceparent`` value (with spans off, the received request's), or "" (no
    trace)."""
    if tracer is None:
        return _trace.get()[0]
    from opentelemetry.propagate import inject

    carrier: dict[str, str] = {}
    inject(carrier)
    return carrier.get(TRACEPARENT, "")


def tracestate() -> str:
    """``svc=<account>`` when the current trace is bound to an account (``bind``), else ""."""
    account = _trace.get()[1]
    return f"{STATE_KEY}={account}" if account else ""


def inject_into(headers: dict[str, str]) -> None:
    """Add the current trace's ``traceparent`` (and our ``tracestate``) to outgoing HTTP headers."""
    value = traceparent()
    if value:
        headers[TRACEPARENT] = value
        state = tracestate()
        if state:
            headers[TRACESTATE] = state


def remember_event(
    event_id: str, account_id: str, metadata: Iterable[tuple[str, str | bytes]] | None = None
) -> None:
    """Keep the trace that publishes ``event_id`` of ``account_id`` and its request id, for the event's
    deliveries (webhookd, as it stores an event), when that trace is bound to ``account_id``: another
    account's trace (a partner's own trace id) never reaches this account's endpoints. ``metadata``: the
    publishing call's (its ``traceparent`` and ``tracestate``), read when spans are off."""
    got = {k: v for k, v in metadata or () if k in (TRACEPARENT, TRACESTATE) and isinstance(v, str)}
    account = bound_account(got[TRACESTATE]) if TRACESTATE in got else _trace.get()[1]
    if not account or account != account_id:
        return
    value = traceparent() if tracer is not None else got.get(TRACEPARENT) or _trace.get()[0]
    if parse_traceparent(value) is None:
        return
    request_id = request_id_var.get() or ""
    if tracer is not None:
        from opentelemetry.trace import get_current_span

        attributes = getattr(get_current_span(), "attributes", None) or {}
        request_id = str(attributes.get(REQUEST_ID) or request_id)
    _events[event_id] = (value, request_id)
    _events.move_to_end(event_id)
    while len(_events) > EVENT_CONTEXTS:
        _events.popitem(last=False)


def start_delivery(event_id: str, headers: dict[str, str]) -> Any:
    """The ``traceparent`` of one delivery of ``event_id`` added to its ``headers``: a span of its own in
    the trace that published the event (``remember_event``), or else in the event's own trace
    (``event_traceparent``). With spans on, that span is returned (end it with ``end_delivery``); None
    when off."""
    known = _events.get(event_id)
    if tracer is None:
        if known is not None:
            headers[TRACEPARENT] = new_traceparent(known[0])
        else:  # ``new_traceparent(event_traceparent(event_id))`` without formatting and parsing it again
            trace_id, parent_id = _event_ids(event_id)
            valid = trace_id != _NO_TRACE and parent_id != _NO_SPAN  # parse_traceparent's rule
            headers[TRACEPARENT] = f"00-{trace_id}-{_span_id()}-01" if valid else _new_trace()
        return None
    parent, request_id = known if known is not None else (event_traceparent(event_id), "")
    from opentelemetry.propagate import extract, inject
    from opentelemetry.trace import set_span_in_context

    attributes = {REQUEST_ID: request_id, "event.id": event_id}
    delivery = tracer.start_span(
        "webhookd deliver",
        context=extract({TRACEPARENT: parent}),
        kind=_kind("CLIENT"),
        attributes=attributes,
    )
    inject(headers, context=set_span_in_context(delivery))
    headers.pop(TRACESTATE, None)  # ours stays inside: a partner gets the traceparent only
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
