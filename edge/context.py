"""The edge's typed contexts: ``EdgeContext`` of the app (``request.app.ctx``) and
``edge.requestcontext.EdgeRequestContext`` of a request (``request.ctx``); handlers take an
``EdgeRequest``.

Neither costs a request more than Sanic's untyped ``SimpleNamespace``s did: the app context is one
object made by ``create_app`` (slots: reading an attribute is a descriptor, no dict lookup), and the
request context a ``SimpleNamespace`` whose defaults are class attributes.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from cachetools import LRUCache
from sanic import Request, Sanic
from sanic.config import Config

from edge.config import EdgeConfig
from edge.requestcontext import EdgeRequestContext
from edge.streamlimits import StreamSlots

# Accounts' usage figures and keys' GET /v1/account bodies kept at most (each table).
KEPT = 10_000

if TYPE_CHECKING:
    import httpx
    from sqlalchemy.ext.asyncio import AsyncEngine

    from edge.authorizer import Authorizer
    from edge.certification import CertRecorder
    from edge.docsite import DocSite
    from edge.gate import Gate
    from edge.idempotency import SqlIdempotencyStore
    from edge.publisher import Publisher
    from edge.requestlog import RequestLog
    from edge.simulator import Simulator
    from edge.usagecounts import UsageCounter
    from svckit.clients import AuthClient, HooksClient
    from svckit.connguard import ConnectionGuard

__all__ = ["EdgeApp", "EdgeContext", "EdgeRequest", "EdgeRequestContext", "Stream"]


class Stream(Protocol):
    """An open /v1/stream session (edge.blueprints.stream.StreamSession, which imports this module)."""

    def finish(self, code: int, reason: str) -> None: ...


@dataclass(slots=True, eq=False)
class EdgeContext:
    """What the app keeps: made with its ``config`` by ``create_app``; the peers' clients and the rest
    below ``docs`` are opened in ``before_server_start`` (reading one before: AttributeError)."""

    config: EdgeConfig
    # GET /v1/account: (expiry, usage) per account, the GetUsage in flight per account, and the body
    # last built per key (with the caller and usage it was built from); each table bounded, its least
    # recently used entry evicted to make room.
    usage_cache: LRUCache[str, tuple[float, dict[str, Any]]] = field(default_factory=lambda: LRUCache(KEPT))
    usage_inflight: dict[str, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)
    account_bodies: LRUCache[str, tuple[object, object, bytes]] = field(
        default_factory=lambda: LRUCache(KEPT)
    )
    # The open /v1/stream sessions, finished at shutdown.
    streams: set[Stream] = field(default_factory=set)
    # Their count by key and by account (edge.streamlimits): what the per-key and per-account limits read.
    stream_slots: StreamSlots = field(default_factory=StreamSlots)
    # GET /openapi.json's document, built on first use.
    openapi: dict[str, Any] | None = None
    # GET /docs's pages (edge.docsite), made on first use; each page rendered on its first request.
    docs: DocSite | None = None
    # The connection limits' counts (svckit.connguard), set by svckit.webserver.start.
    connection_guard: ConnectionGuard | None = None

    auth: AuthClient = field(init=False)
    hooks: HooksClient = field(init=False)
    authorizer: Authorizer = field(init=False)
    engine: AsyncEngine = field(init=False)
    store: SqlIdempotencyStore = field(init=False)
    # The product upstreams' transport.
    http: httpx.AsyncBaseTransport = field(init=False)
    publisher: Publisher = field(init=False)
    gate: Gate = field(init=False)
    # The request log's buffer and flusher (edge.requestlog), flushed once more at shutdown.
    requests: RequestLog = field(init=False)
    # Exact usage counts (edge.usagecounts), flushed once more at shutdown; None: counting is off.
    usage: UsageCounter | None = None
    certs: CertRecorder = field(init=False)
    simulator: Simulator = field(init=False)
    # The key-change watch and the idempotency purge, cancelled after the server stops.
    tasks: list[asyncio.Future[None]] = field(init=False)


EdgeApp = Sanic[Config, EdgeContext]


class EdgeRequest(Request[EdgeApp, EdgeRequestContext]):
    __slots__ = ()  # Sanic's Request has slots: no dict per request

    @staticmethod
    def make_context() -> EdgeRequestContext:
        return EdgeRequestContext()
