"""``request.ctx`` of an edge request, typed: ``EdgeRequestContext``; and ``BareRequest``, an edge
request whose app is not typed, which ``edge.gate`` takes (``edge.context``'s ``EdgeContext`` holds the
gate, so the gate cannot name ``EdgeApp`` without an import cycle; it reads ``request.app.ctx.gate``
with its type stated)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from sanic import Request

if TYPE_CHECKING:
    from edge.authcache import Caller
    from edge.environments import Environment


class EdgeRequestContext(SimpleNamespace):  # SimpleNamespace: the bound of Sanic's request context type
    """``request.ctx``. The defaults are class attributes: a request's context is made as an empty
    ``SimpleNamespace`` is (no ``__init__`` setting them), and reading one never set finds the default."""

    # The request id (req_...), set by the gate (edge.gate.Gate.run, Gate.request_id).
    rid: str | None = None
    # When the gate took the request (unix seconds; edge.gate.Gate.run): the request log's time and latency.
    started: float = 0.0
    # The route's name in the latency histogram (edge.metrics.route_latency) when it is not the Sanic
    # route's path: a product route's template (edge.blueprints.products).
    route: str | None = None
    # The route offers CSV and the Accept header asks for it (edge.gate.guarded, negotiation.prefers_csv).
    csv: bool = False
    # The caller authsvc answered for, refusals included (their Deprecation/Sunset headers).
    caller: Caller | None = None
    # /v1/stream: the key, environment, source address and caller its handshake was admitted with.
    stream_auth: tuple[str, Environment, str, Caller] | None = None
    # /v1/stream: what the handshake answer selects (edge.server.EdgeProtocol); unset: the route's list.
    ws_subprotocols: list[str] | None


BareRequest = Request[Any, EdgeRequestContext]
