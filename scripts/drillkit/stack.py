"""The drill's processes: 2 authsvc, 2 webhookd (either release), 2 edges (the second with ``--workers``), a
portal, and the hotels product upstream the edges proxy bookings to."""

from __future__ import annotations

import argparse
import collections
import json
import pathlib
import ssl
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from drillkit.resources import Ports
from svckit.devca import IDENTITIES, files, flags, init_dir
from svckit.secretbox import write_new_key
from tests.support import ServiceProcess

BOOKINGS = "/v1/hotels/bookings"
KILL_ORDER = ("authsvc#1", "webhookd#1", "edge#1", "authsvc#2", "webhookd#2", "edge#2", "portal")


@dataclass
class Node:
    """One process of the stack, restarted on the same ports after a kill; ``release`` is another
    release's checkout to run it from (None: this one)."""

    name: str
    module: str
    args: list[str]
    tls: list[str]
    logs: pathlib.Path
    release: pathlib.Path | None = None
    proc: ServiceProcess | None = None

    def start(self) -> None:
        log = self.logs / f"{self.name.replace('#', '')}.log"
        env = {"PYTHONPATH": str(self.release)} if self.release else None
        self.proc = ServiceProcess(self.module, self.args, env=env, tls=self.tls, cwd=self.release)
        self.proc.start(log, timeout=90)

    @property
    def pid(self) -> str:
        return str(self.proc.proc.pid) if self.proc and self.proc.proc else "?"

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()

    def stop(self) -> None:
        if self.proc is not None and self.proc.proc is not None and self.proc.proc.poll() is None:
            self.proc.terminate(timeout=10)


@dataclass
class Stack:
    nodes: dict[str, Node]
    authsvc: list[str]
    webhookd: list[str]
    edges: list[tuple[str, str]]  # (live base URL, sandbox base URL)
    portal: str
    metrics: dict[str, list[str]]  # job -> every /metrics address of its processes


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # an edge killed while its booking was answered: expected here


class Hotels:
    """The hotels product upstream over HTTPS (a certificate of the drill's CA, as the edge requires):
    each booking answered 201 after ``delay`` seconds; counts the Idempotency-Keys it got, so a booking
    run again (after an edge died holding its claim) shows."""

    def __init__(self, cert: str, key: str, delay: float) -> None:
        self.keys: collections.Counter[str] = collections.Counter()
        lock = threading.Lock()
        hotels = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                time.sleep(delay)
                with lock:
                    hotels.keys[self.headers.get("idempotency-key", "")] += 1
                body = json.dumps({"id": f"bk_{uuid.uuid4().hex[:12]}", "status": "confirmed"}).encode()
                self.send_response(201)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()


def write_routes(path: pathlib.Path, hotels: Hotels) -> pathlib.Path:
    # One server for both (the edge wants them to differ: two names of it).
    up = {"live": hotels.url.replace("127.0.0.1", "localhost"), "sandbox": hotels.url}
    route = {
        "method": "POST",
        "path": BOOKINGS,
        "scope": "hotels:write",
        "traveller": "required",
        "upstream": up,
    }
    path.write_text(json.dumps({"routes": [route]}))
    return path


def build_stack(
    work: pathlib.Path,
    database: str,
    redis_url: str,
    prefix: str,
    ca_bundle: str,
    args: argparse.Namespace,
    ports: Ports,
    previous: pathlib.Path | None,
) -> tuple[Stack, Hotels]:
    tls_dir = work / "tls"
    init_dir(tls_dir, (*IDENTITIES, "hotels"))
    _, cert, key = files(tls_dir, "hotels")
    hotels = Hotels(cert, key, delay=args.slow_post)
    routes = write_routes(work / "routes.json", hotels)
    keys = {n: work / f"{n}.key" for n in ("authsvc-secrets", "webhookd-secrets", "edge-idem", "portal-csrf")}
    for path in keys.values():
        write_new_key(path)
    auth = [f"127.0.0.1:{ports.take()}" for _ in range(2)]
    hooks = [f"127.0.0.1:{ports.take()}" for _ in range(2)]
    http = [(ports.take(), ports.take()) for _ in range(2)]
    portal_port = ports.take()
    lease = args.lease_seconds
    # Every process's /metrics (edge#2's workers on consecutive ports: edge.workers), scraped by the
    # drill's Prometheus (drillkit.prom).
    metrics: dict[str, list[str]] = {"authsvc": [], "webhookd": [], "edge": [], "portal": []}

    def scraped(job: str, ports_needed: int = 1) -> list[str]:
        first = ports.take_run(ports_needed)
        metrics[job] += [f"127.0.0.1:{first + i}" for i in range(ports_needed)]
        return ["--metrics-listen", f"127.0.0.1:{first}"]

    common = ["--database", database]
    nodes: list[Node] = []
    for i in range(2):
        a = [*("--listen", auth[i], *scraped("authsvc"), *common, "--webhookd", ",".join(hooks))]
        a += ["--secrets-key-file", str(keys["authsvc-secrets"])]
        nodes.append(Node(f"authsvc#{i + 1}", "authsvc", a, flags(tls_dir, "authsvc"), work))
    for i in range(2):
        w = [*("--listen", hooks[i], *scraped("webhookd"), *common, "--authsvc", ",".join(auth))]
        w += ["--secrets-key-file", str(keys["webhookd-secrets"]), "--lease-seconds", str(lease)]
        w += ["--allow-private-targets", "--ca-bundle", ca_bundle]
        # A short lease (a quicker drill) must stay longer than the delivery timeout (10 s).
        w += ["--delivery-timeout", str(lease / 2)] if lease <= 10 else []
        nodes.append(Node(f"webhookd#{i + 1}", "webhookd", w, flags(tls_dir, "webhookd"), work, previous))
    for i, (live, sandbox) in enumerate(http):
        workers = args.workers if i == 1 else 1
        e = ["--live-listen", f"127.0.0.1:{live}", "--sandbox-listen", f"127.0.0.1:{sandbox}", *common]
        e += scraped("edge", workers)
        e += ["--authsvc", ",".join(auth), "--webhookd", ",".join(hooks)]
        e += ["--redis", redis_url, "--redis-prefix", prefix]
        e += ["--idempotency-key-file", str(keys["edge-idem"]), "--routes", str(routes)]
        e += ["--workers", str(args.workers)] if i == 1 and args.workers > 1 else []
        nodes.append(Node(f"edge#{i + 1}", "edge", e, flags(tls_dir, "edge"), work))
    p = ["--listen", f"127.0.0.1:{portal_port}", *scraped("portal")]
    p += [
        "--authsvc",
        ",".join(auth),
        "--webhookd",
        ",".join(hooks),
        "--csrf-key-file",
        str(keys["portal-csrf"]),
    ]
    nodes.append(Node("portal", "portal", p, flags(tls_dir, "portal"), work))
    edges = [(f"http://127.0.0.1:{live}", f"http://127.0.0.1:{sandbox}") for live, sandbox in http]
    stack = Stack({n.name: n for n in nodes}, auth, hooks, edges, f"http://127.0.0.1:{portal_port}", metrics)
    return stack, hotels
