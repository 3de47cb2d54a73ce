"""Edge configuration: what `python -m edge serve` flags (or a test) decide."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from edge.authcache import DENIAL_CACHE_SIZE
from edge.environments import listen_hosts
from edge.requestlog import SUCCESSES_PER_SECOND
from edge.routetable import DEFAULT_ROUTES, RouteTable
from edge.secretscanning import ScanningConfig
from edge.sources import Network
from edge.unknownkeys import UNKNOWN_KEY_BURST, UNKNOWN_KEY_RATE
from edge.usagecounts import FLUSH_INTERVAL as USAGE_FLUSH_INTERVAL
from svckit import addresses
from svckit.apikeys import DEFAULT_BRAND
from svckit.connlimits import ConnectionLimits
from svckit.pacing import Pacing
from svckit.tls import Tls

DEFAULT_LIVE_LISTEN = addresses.EDGE_LIVE
DEFAULT_SANDBOX_LISTEN = addresses.EDGE_SANDBOX


def _hosts_of(listen: str) -> tuple[str, ...]:
    host, _, port = listen.rpartition(":")
    return tuple(listen_hosts(host, int(port)))


# The Host values of the default listeners (edge.environments.listen_hosts): localhost and 127.0.0.1.
DEFAULT_LIVE_HOSTS = _hosts_of(DEFAULT_LIVE_LISTEN)
DEFAULT_SANDBOX_HOSTS = _hosts_of(DEFAULT_SANDBOX_LISTEN)
MAX_BODY_BYTES = 1024 * 1024
# The repository's docs/, next to the edge package: the Markdown GET /docs/<page> renders.
DEFAULT_DOCS_DIR = str(Path(__file__).resolve().parent.parent / "docs")


@dataclass
class EdgeConfig:
    # One gRPC target, or several IP:PORT addresses comma-separated (svckit.clients.channels.target).
    authsvc: str = addresses.AUTHSVC
    webhookd: str = addresses.WEBHOOKD
    database: str = "sqlite+aiosqlite:///var/edge.db"
    live_hosts: Sequence[str] = DEFAULT_LIVE_HOSTS
    sandbox_hosts: Sequence[str] = DEFAULT_SANDBOX_HOSTS
    trusted_proxies: Sequence[Network] = ()
    routes: RouteTable = field(default_factory=lambda: RouteTable.from_json(DEFAULT_ROUTES))
    # docUrl of every error body is <docs_base>/errors#<type> (docs/errors.md); --docs-base / EDGE_DOCS_BASE.
    # Empty: this edge's own docs on the host the request came to, <scheme>://<Host>/docs (edge.docurls).
    docs_base: str = ""
    # The Markdown pages GET /docs/<page> renders (edge.docsite); --docs-dir / EDGE_DOCS_DIR.
    docs_dir: str = DEFAULT_DOCS_DIR
    max_body_bytes: int = MAX_BODY_BYTES
    # Requests a second per API key whose own limit (authsvc's rate_limit) is 0, by environment: the one
    # place these defaults are stated. Per edge process, or across every edge with ``redis``; bursts of
    # two seconds' worth; 0 switches it off.
    rate_limit_live: float = 100.0
    rate_limit_sandbox: float = 25.0
    # Redis URL (redis://host:port/db) sharing the per-key limits between edges (edge.sharedlimit);
    # empty: each edge limits alone (edge.ratelimit).
    redis: str = ""
    # Prefix of the Redis keys (one per API key): several deployments may share one Redis.
    redis_prefix: str = "svc:ratelimit:"
    # A Redis slower than this (connect or answer, seconds) counts as down for the request: a limit must
    # not cost a request more.
    redis_timeout: float = 0.25
    # GET /v1/account's usage figure is cached this long per account (one GetUsage per second at most).
    usage_cache_seconds: float = 1.0
    # Exact usage counts (edge.usagecounts): on unless --no-usage-counts; flushed to authsvc this often
    # (seconds; the most a killed edge loses; default edge.usagecounts.FLUSH_INTERVAL).
    usage_counts: bool = True
    usage_flush_interval: float = USAGE_FLUSH_INTERVAL
    authsvc_timeout: float = 2.0
    # Denials of unknown keys cached at most (LRU): bounds what a flood of made-up keys can grow.
    denial_cache_size: int = DENIAL_CACHE_SIZE
    # Look-ups of keys authsvc does not know, per source: a second, and at once (edge.unknownkeys).
    unknown_key_rate: float = UNKNOWN_KEY_RATE
    unknown_key_burst: int = UNKNOWN_KEY_BURST
    # Refusal pacing (svckit.pacing): past its source's allowance a 429, or a refusal of a request with
    # no accepted key, is answered later (--refusal-delay, --refusal-rate, --refusal-burst, --refusals-held).
    pacing: Pacing = field(default_factory=Pacing)
    # Connection limits (svckit.connlimits): open connections per client address, per /24 and in all, and
    # how long an anonymous one may idle (--connections, --connections-per-address, --connections-per-block,
    # --anonymous-keep-alive).
    connections: ConnectionLimits = field(default_factory=ConnectionLimits)
    webhookd_timeout: float = 10.0
    upstream_timeout: float = 30.0
    # A product upstream's answer longer than this is refused (503), never cut.
    upstream_max_body: int = 16 * 1024 * 1024
    # Signs the identity of each product request (svckit.edgeassertion) for upstreams behind a proxy that
    # ends TLS; None: mutual TLS alone (--upstream-signing-key-file).
    upstream_signing_key: Ed25519PrivateKey | None = field(default=None, repr=False)
    stream_ping_seconds: float = 20.0
    # Successful requests filed in the request log per second by this process (edge.requestlog); errors
    # and reads of whole events (GET /v1/events/{id}) are filed whatever it says.
    request_log_successes: int = SUCCESSES_PER_SECOND
    # /v1/stream's limits (edge.streamlimits; docs/edge.md "Stream limits"), the one place their defaults
    # are stated. Open streams per API key and per account (all its keys), counted per edge process, 0: no
    # limit; one more is refused with 429 rate_limited before the upgrade.
    stream_max_per_key: int = 10
    stream_max_per_account: int = 100
    # New streams a second per account (all its keys), in bursts of up to stream_open_burst: one more is
    # refused with 429 before the upgrade. Each accepted stream costs a webhookd subscription. 0: no limit.
    stream_opens_per_second: float = 10.0
    stream_open_burst: int = 30
    # Inbound messages a second per connection, in bursts of up to stream_message_burst (a token bucket);
    # past it the connection is closed with 1008. 0: no limit.
    stream_messages_per_second: float = 5.0
    stream_message_burst: int = 20
    # The largest inbound WebSocket message (bytes): a larger one closes the connection with 1009.
    stream_max_message_bytes: int = 16 * 1024
    # An idle keep-alive connection is closed after this long; a request head (and a new connection's
    # first one, counted from connect) must be complete this long after it started; a request body
    # this long after its head ended.
    keep_alive_timeout: float = 120.0
    header_timeout: float = 60.0
    body_timeout: float = 60.0
    # The built-in sandbox simulator publishes a creation's outcome this long after answering 202.
    sandbox_confirm_seconds: float = 0.5
    # AES-256 key sealing stored idempotent responses (edge.idempotency); None: only bodies holding a
    # secret are sealed, with a key of this process.
    idempotency_key: bytes | None = None
    # Tests inject an httpx transport for the product upstreams; None: real network.
    upstream_transport: httpx.AsyncBaseTransport | None = None
    name: str = "edge"
    # Processes serving the two listeners (--workers; edge.workers): above 1, a supervising parent and
    # that many workers sharing the ports with SO_REUSEPORT, each with its own watch, caches and metrics.
    workers: int = 1
    # Key prefixes (brands) accepted, the first naming new keys (svckit.apikeys; --key-prefixes).
    key_prefixes: tuple[str, ...] = (DEFAULT_BRAND,)
    # The secret-scanning routes (edge.blueprints.leaks; --secret-scanning-*).
    secret_scanning: ScanningConfig = field(default_factory=ScanningConfig)
    # Mutual TLS to authsvc and webhookd (svckit.tls); None is plaintext (--insecure-dev).
    tls: Tls | None = field(default=None, repr=False)
