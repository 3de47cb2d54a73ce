"""Test and benchmark helpers for the edge: a recording HTTP upstream on loopback (threaded, real
HTTP), a route table pointing at it, and starting authsvc/webhookd/edge as real processes.
Not used by the service itself."""

from __future__ import annotations

import json
import pathlib
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class UpstreamRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.time)


class Upstream:
    """A product upstream. ``?status=N`` answers N, ``?sleep=S`` waits S seconds first; the JSON answer
    echoes what arrived (method, path, the X- headers the edge adds, traceparent), or with ``?error=T``
    (and ``&message=M``) is an error body of type T, with ``?text=X`` the plain text X; ``?retry_after=S``
    adds that header."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.requests: list[UpstreamRequest] = []
        self.lock = threading.Lock()
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                split = urlsplit(self.path)
                query = parse_qs(split.query)
                req = UpstreamRequest(
                    self.command, split.path, query, {k.lower(): v for k, v in self.headers.items()}, body
                )
                with upstream.lock:
                    upstream.requests.append(req)
                if "sleep" in query:
                    time.sleep(float(query["sleep"][0]))
                status = int(query.get("status", ["200"])[0])
                content_type = "application/json"
                if "error" in query:  # a product service's error body (docs/product-services.md "Errors")
                    error = {"type": query["error"][0], "message": query.get("message", ["m"])[0]}
                    out = json.dumps({"error": error}).encode()
                elif "text" in query:  # not JSON
                    out, content_type = query["text"][0].encode(), "text/plain"
                else:
                    out = self._echo(req)
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                if "retry_after" in query:
                    self.send_header("Retry-After", query["retry_after"][0])
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def _echo(self, req: UpstreamRequest) -> bytes:
                return json.dumps(
                    {
                        "upstream": upstream.name,
                        "method": req.method,
                        "path": req.path,
                        "accountId": req.headers.get("x-account-id"),
                        "keyId": req.headers.get("x-key-id"),
                        "environment": req.headers.get("x-environment"),
                        "travellerId": req.headers.get("x-traveller-id"),
                        "traceparent": req.headers.get("traceparent"),
                        "n": len(upstream.requests),
                    }
                ).encode()

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def paths(self) -> list[str]:
        with self.lock:
            return [r.path for r in self.requests]


def write_route_table(path: pathlib.Path, live: Upstream, sandbox: Upstream) -> pathlib.Path:
    up = {"live": live.url, "sandbox": sandbox.url}
    hs = "/v1/hotels/search"
    routes = [
        {"method": "GET", "path": hs, "scope": "hotels:read", "search": True, "upstream": up},
        {"method": "GET", "path": "/v1/hotels/bookings/{booking_id}", "scope": "hotels:read", "upstream": up},
        {
            "method": "POST",
            "path": "/v1/hotels/bookings",
            "scope": "hotels:write",
            "traveller": "required",
            "upstream": up,
        },
        {"method": "GET", "path": "/v1/esim/plans", "scope": "esim:read", "upstream": up},
        # Nothing listens on these ports: the upstream is down.
        {
            "method": "GET",
            "path": "/v1/flights/search",
            "scope": "flights:read",
            "upstream": {"live": "http://127.0.0.1:1", "sandbox": "http://127.0.0.1:2"},
        },
    ]
    path.write_text(json.dumps({"routes": routes}, indent=2))
    return path


def edge_args(
    authsvc: str, webhookd: str, database: str, routes: pathlib.Path | None = None, *extra: str
) -> list[str]:
    """Flags for ``python -m edge serve`` on free ports whose Host values are the defaults
    (tests send ``Host: 127.0.0.1:8080`` / ``127.0.0.1:8081``)."""
    args = [
        "--live-listen", "127.0.0.1:0",
        "--sandbox-listen", "127.0.0.1:0",
        "--live-hosts", LIVE_HOSTS,
        "--sandbox-hosts", SANDBOX_HOSTS,
        "--authsvc", authsvc,
        "--webhookd", webhookd,
        "--database", database,
        "--metrics-listen", "",
    ]  # fmt: skip
    if routes is not None:
        args += ["--routes", str(routes)]
    return [*args, *extra]


LIVE_HOST = "127.0.0.1:8080"
SANDBOX_HOST = "127.0.0.1:8081"
# Processes on free ports still accept the default listeners' Host values (default: the bound ports').
LIVE_HOSTS = f"localhost:8080,{LIVE_HOST}"
SANDBOX_HOSTS = f"localhost:8081,{SANDBOX_HOST}"
