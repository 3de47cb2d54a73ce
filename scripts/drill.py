#!/usr/bin/env python3
"""The kill -9 drill (docs/operations.md "The kill -9 drill"). A drill, not a test: not in the suite.

Starts 2 authsvc, 2 webhookd and 2 edges as real processes on one fresh PostgreSQL schema of database
`test` (127.0.0.1:5432) and Redis (127.0.0.1:6379, a key prefix of its own), with mutual TLS from a
development CA made in a temporary directory, every peer flag given both processes (`--authsvc A,B`,
`--webhookd A,B`), and an HTTPS webhook receiver. One partner account (a live and a sandbox key, one
sandbox endpoint registered through the edge) then drives steady traffic through both edges: GET
/v1/account with the live key, POST /v1/sandbox/events with an Idempotency-Key, and POST
/v1/hotels/bookings (a product route, its HTTPS upstream answering after --slow-post seconds, so that
some are in flight when an edge is killed), each retried once, at once, on a 5xx or a connection error on
the other edge, as a partner SDK behind a balancer would; an operator (the
svcctl certificate) creates and revokes a sandbox key every second, each revocation a webhook
(apikey.revoked). Meanwhile each process in turn is killed with SIGKILL and restarted on its port after
a few seconds: authsvc #1, webhookd #1, edge #1, authsvc #2, webhookd #2, edge #2.

Printed: per killed process, first tries that failed, partner errors (after the one retry) and the
seconds in which they were seen; overall, sample events accepted (202) against those the receiver got
(lost: accepted and never received once the drain ends; duplicated: received more than once, by event
id), revocations against their webhooks, and bad signatures. The schema and the Redis keys are removed
at the end. Exit status 1 when anything was lost, badly signed, or a partner saw an error.

    .venv/bin/python scripts/drill.py [--rate 6] [--down 3] [--settle 6] [--lease-seconds 60]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import itertools
import json
import os
import pathlib
import shutil
import ssl
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import asyncpg
import httpx
import redis.asyncio as aioredis

from svckit.clients.auth import AuthClient
from svckit.clients.errors import ClientError, PeerUnavailable
from svckit.devca import IDENTITIES, files, flags, init_dir
from svckit.secretbox import write_new_key
from svckit.signing import WebhookVerificationError, verify
from svckit.tls import Tls
from tests.support import ServiceProcess, free_port
from travel.auth.v1 import auth_pb2 as pb
from webhookd.testing import Received, Receiver, trusted_receiver

PG_HOST, PG_PORT, PG_DB = "127.0.0.1", 5432, "test"
REDIS_URL = "redis://127.0.0.1:6379/0"
ORDER = ("authsvc#1", "webhookd#1", "edge#1", "authsvc#2", "webhookd#2", "edge#2")
BOOKINGS = "/v1/hotels/bookings"
ACTOR = pb.Actor(user="ops:drill")


@dataclass
class Node:
    """One process of the stack, restarted on the same ports after a kill."""

    name: str
    module: str
    args: list[str]
    tls: list[str]
    logs: pathlib.Path
    proc: ServiceProcess | None = None

    def start(self) -> None:
        log = self.logs / f"{self.name.replace('#', '')}.log"
        self.proc = ServiceProcess(self.module, self.args, tls=self.tls).start(log, timeout=90)

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate(timeout=10)


@dataclass
class Stack:
    nodes: dict[str, Node]
    authsvc: list[str]
    edges: list[tuple[str, str]]  # (live base URL, sandbox base URL)


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
    work: pathlib.Path, database: str, prefix: str, ca_bundle: str, lease: float, slow_post: float
) -> tuple[Stack, Hotels]:
    tls_dir = work / "tls"
    init_dir(tls_dir, (*IDENTITIES, "hotels"))
    hotels = Hotels(*files(tls_dir, "hotels")[1:], delay=slow_post)
    routes = write_routes(work / "routes.json", hotels)
    keys = {name: work / f"{name}.key" for name in ("authsvc-secrets", "webhookd-secrets", "edge-idem")}
    for path in keys.values():
        write_new_key(path)
    auth = [f"127.0.0.1:{free_port()}" for _ in range(2)]
    hooks = [f"127.0.0.1:{free_port()}" for _ in range(2)]
    http = [(free_port(), free_port()) for _ in range(2)]
    common = ["--metrics-listen", "", "--database", database]
    nodes: list[Node] = []
    for i in range(2):
        nodes.append(
            Node(
                f"authsvc#{i + 1}",
                "authsvc",
                [
                    *("--listen", auth[i], *common, "--webhookd", ",".join(hooks)),
                    *("--secrets-key-file", str(keys["authsvc-secrets"])),
                ],
                flags(tls_dir, "authsvc"),
                work,
            )
        )
    for i in range(2):
        nodes.append(
            Node(
                f"webhookd#{i + 1}",
                "webhookd",
                [
                    *("--listen", hooks[i], *common, "--authsvc", ",".join(auth)),
                    *("--secrets-key-file", str(keys["webhookd-secrets"]), "--lease-seconds", str(lease)),
                    *("--allow-private-targets", "--ca-bundle", ca_bundle),
                    # A short lease (a quicker drill) must stay longer than the delivery timeout (10 s).
                    *(("--delivery-timeout", str(lease / 2)) if lease <= 10 else ()),
                ],
                flags(tls_dir, "webhookd"),
                work,
            )
        )
    for i, (live, sandbox) in enumerate(http):
        nodes.append(
            Node(
                f"edge#{i + 1}",
                "edge",
                [
                    *("--live-listen", f"127.0.0.1:{live}", "--sandbox-listen", f"127.0.0.1:{sandbox}"),
                    *common,
                    *("--authsvc", ",".join(auth), "--webhookd", ",".join(hooks)),
                    *("--redis", REDIS_URL, "--redis-prefix", prefix),
                    *("--idempotency-key-file", str(keys["edge-idem"]), "--routes", str(routes)),
                ],
                flags(tls_dir, "edge"),
                work,
            )
        )
    edges = [(f"http://127.0.0.1:{live}", f"http://127.0.0.1:{sandbox}") for live, sandbox in http]
    return Stack({n.name: n for n in nodes}, auth, edges), hotels


# -- the partner ------------------------------------------------------------------------------------------
@dataclass
class Call:
    at: float  # monotonic, when the first try ended (a kill counts for the window it fell in)
    kind: str  # "GET", "POST" (a sample event) or "BOOK" (a booking through the slow upstream)
    first_error: str  # why the first try failed ("" when it did not)
    error: str  # "" when the partner got its answer (after at most one retry)

    @property
    def first_failed(self) -> bool:
        return bool(self.first_error)


@dataclass
class Partner:
    http: httpx.AsyncClient
    edges: list[tuple[str, str]]
    live_key: str
    sandbox_key: str
    calls: list[Call] = field(default_factory=list)
    accepted: dict[str, float] = field(default_factory=dict)  # event id -> wall time of the 202
    booking_keys: set[str] = field(default_factory=set)
    booked: set[str] = field(default_factory=set)  # Idempotency-Keys of bookings answered 2xx

    async def _once(self, kind: str, edge: int, idem: str) -> httpx.Response:
        live, sandbox = self.edges[edge]
        if kind == "GET":
            auth = {"Authorization": f"Bearer {self.live_key}"}
            return await self.http.get(f"{live}/v1/account", headers=auth)
        headers = {"Authorization": f"Bearer {self.sandbox_key}", "Idempotency-Key": idem}
        if kind == "BOOK":
            self.booking_keys.add(idem)
            headers["X-Partner-Customer-Ref"] = "drill-traveller"
            return await self.http.post(f"{sandbox}{BOOKINGS}", headers=headers, json={"offer": "drill"})
        body = {"type": "booking.confirmed"}
        return await self.http.post(f"{sandbox}/v1/sandbox/events", headers=headers, json=body)

    async def call(self, kind: str, edge: int) -> None:
        idem, ended = str(uuid.uuid4()), 0.0
        first_error, error = "", ""
        for attempt, target in enumerate((edge, 1 - edge)):  # the one retry goes to the other edge
            try:
                resp = await self._once(kind, target, idem)
            except httpx.TransportError as exc:
                error = f"{type(exc).__name__} (edge#{target + 1})"
            else:
                if resp.status_code < 500:
                    error = "" if resp.status_code < 300 else _refusal(resp, target)
                    if resp.status_code == 202:
                        self.accepted[resp.json()["event"]["id"]] = time.time()
                    if kind == "BOOK" and resp.status_code < 300:
                        self.booked.add(idem)
                    break
                error = _refusal(resp, target)
            if attempt == 0:
                first_error, ended = error, time.monotonic()
        self.calls.append(Call(ended or time.monotonic(), kind, first_error, error))


def _refusal(resp: httpx.Response, edge: int) -> str:
    try:
        kind = resp.json()["error"]["type"]
    except (ValueError, KeyError, TypeError):
        kind = "?"
    return f"{resp.status_code} {kind} (edge#{edge + 1})"


async def drive(partner: Partner, rate: float, stop: asyncio.Event, book: bool) -> None:
    """Calls at a steady rate, GET, POST (and BOOK) in turn, alternating edges; never waits for an
    answer."""
    tasks: set[asyncio.Task[None]] = set()
    kinds = ["GET", "POST", "BOOK"] if book else ["GET", "POST"]
    turns = itertools.cycle([(kind, edge) for edge in (0, 1) for kind in kinds])
    tick = time.monotonic()
    while not stop.is_set():
        kind, edge = next(turns)
        task = asyncio.create_task(partner.call(kind, edge))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        tick += 1 / rate
        await asyncio.sleep(max(0.0, tick - time.monotonic()))
    await asyncio.gather(*tasks)


# -- the operator -----------------------------------------------------------------------------------------
@dataclass
class Operator:
    clients: list[AuthClient]
    account_id: str
    revoked: dict[str, float] = field(default_factory=dict)  # key id -> wall time of the revocation
    errors: list[tuple[float, str]] = field(default_factory=list)

    async def _either(self, n: int, request: pb.CreateKeyRequest | pb.RevokeKeyRequest) -> str:
        """The call on authsvc n, retried once on the other when n is unreachable; the key id."""
        for i in (n, 1 - n):
            client = self.clients[i]
            try:
                if isinstance(request, pb.CreateKeyRequest):
                    return str((await client.create_key(request, timeout=5)).key.id)
                return str((await client.revoke_key(request, timeout=5)).key.id)
            except PeerUnavailable:
                if i != n:
                    raise
        raise AssertionError("unreachable")

    async def run(self, every: float, stop: asyncio.Event) -> None:
        for n in itertools.cycle((0, 1)):
            if stop.is_set():
                return
            started = time.monotonic()
            try:
                key_id = await self._either(
                    n,
                    pb.CreateKeyRequest(
                        account_id=self.account_id,
                        environment=pb.ENVIRONMENT_SANDBOX,
                        name="drill",
                        scopes=["account:read"],
                        actor=ACTOR,
                    ),
                )
                await self._either(n, pb.RevokeKeyRequest(key_id=key_id, reason="drill", actor=ACTOR))
                self.revoked[key_id] = time.time()
            except ClientError as exc:
                self.errors.append((started, f"{exc.type} ({exc.code.name})"))
            await asyncio.sleep(max(0.0, every - (time.monotonic() - started)))


# -- the drill --------------------------------------------------------------------------------------------
@dataclass
class Phase:
    name: str
    start: float
    end: float = 0.0
    restart_seconds: float = 0.0


async def setup_partner(
    stack: Stack, tls: Tls, receiver: Receiver, http_timeout: float
) -> tuple[Partner, Operator, str]:
    clients = [AuthClient(target, tls, timeout=10) for target in stack.authsvc]
    made = await clients[0].create_account(
        pb.CreateAccountRequest(name="Drill Partner", mode=pb.ACCOUNT_MODE_A, actor=ACTOR),
        wait_for_ready=True,
    )
    account_id = made.account.id
    secrets = []
    for env, scopes in (
        (pb.ENVIRONMENT_LIVE, ["account:read"]),
        (pb.ENVIRONMENT_SANDBOX, ["account:read", "webhooks:read", "webhooks:write", "hotels:write"]),
    ):
        key = await clients[0].create_key(
            pb.CreateKeyRequest(
                account_id=account_id, environment=env, name="drill", scopes=scopes, actor=ACTOR
            )
        )
        secrets.append(key.secret)
    http = httpx.AsyncClient(timeout=http_timeout, limits=httpx.Limits(max_connections=200))
    partner = Partner(http, stack.edges, secrets[0], secrets[1])
    made_endpoint = await http.post(
        f"{stack.edges[0][1]}/v1/webhooks/endpoints",
        headers={"Authorization": f"Bearer {secrets[1]}", "Idempotency-Key": str(uuid.uuid4())},
        json={"url": receiver.url(), "events": ["booking.confirmed", "apikey.revoked"]},
    )
    made_endpoint.raise_for_status()
    return partner, Operator(clients, account_id), str(made_endpoint.json()["secret"])


async def restart(node: Node, down: float) -> float:
    await asyncio.sleep(down)
    began = time.monotonic()
    await asyncio.to_thread(node.start)
    return time.monotonic() - began


async def drill(stack: Stack, receiver: Receiver, args: argparse.Namespace, tls: Tls, hotels: Hotels) -> int:
    partner, operator, secret = await setup_partner(stack, tls, receiver, args.timeout)
    stop = asyncio.Event()
    traffic = asyncio.create_task(drive(partner, args.rate, stop, args.slow_post > 0))
    revocations = asyncio.create_task(operator.run(1.0, stop))
    phases = [Phase("before the kills", time.monotonic())]
    await asyncio.sleep(args.warmup)
    last_webhookd_kill = 0.0
    for name in ORDER:
        node = stack.nodes[name]
        phases[-1].end = time.monotonic()
        phase = Phase(name, time.monotonic())
        phases.append(phase)
        print(f"  kill -9 {name} (pid {node.proc.proc.pid if node.proc and node.proc.proc else '?'})")
        node.kill()
        if node.module == "webhookd":
            last_webhookd_kill = time.monotonic()
        phase.restart_seconds = await restart(node, args.down)
        await asyncio.sleep(args.settle)
    phases[-1].end = time.monotonic()
    phases.append(Phase("drain", time.monotonic()))
    stop.set()
    await asyncio.gather(traffic, revocations)
    # Deliveries a killed webhookd held are sent again once their lease has run out: wait for that too.
    deadline = max(time.monotonic() + 15, last_webhookd_kill + args.lease_seconds + 20)
    hard_stop = time.monotonic() + args.lease_seconds + 120
    while True:  # the receiver runs in a thread of its own: poll it
        now = time.monotonic()
        if now >= hard_stop or (now >= deadline and not _waiting(receiver, partner, operator)):
            break
        await asyncio.sleep(0.5)
    phases[-1].end = time.monotonic()
    await partner.http.aclose()
    for client in operator.clients:
        await client.close()
    return report(phases, partner, operator, receiver.received(), secret, hotels)


def _waiting(receiver: Receiver, partner: Partner, operator: Operator) -> bool:
    """Whether an accepted event or a revocation has no webhook yet."""
    got = receiver.received()
    events, revoked = {r.headers.get("x-service-event-id", "") for r in got}, {key_of(r) for r in got}
    return bool(set(partner.accepted) - events or set(operator.revoked) - revoked)


def key_of(r: Received) -> str:
    """The revoked key's id of an apikey.revoked delivery, else ""."""
    body = json.loads(r.body)
    return str(body["data"].get("keyId", "")) if body.get("type") == "apikey.revoked" else ""


def report(
    phases: list[Phase],
    partner: Partner,
    operator: Operator,
    got: list[Received],
    secret: str,
    hotels: Hotels,
) -> int:
    print()
    print(f"{'window':<18} {'restart s':>9} {'calls':>6} {'1st tries failed':>16} {'partner errors':>14}"
          f" {'error seconds':>13} {'dup. events':>11}  errors (after the retry)")  # fmt: skip
    total_errors = 0
    counts = collections.Counter(r.headers.get("x-service-event-id", "") for r in got)
    # A duplicated event counts in the window of its first delivery (the one a killed webhookd had sent).
    to_monotonic = time.monotonic() - time.time()
    first_seen: dict[str, float] = {}
    for r in got:
        first_seen.setdefault(r.headers.get("x-service-event-id", ""), r.at + to_monotonic)
    for phase in phases:
        dups = sum(1 for e, n in counts.items() if n > 1 and phase.start <= first_seen[e] < phase.end)
        calls = [c for c in partner.calls if phase.start <= c.at < phase.end]
        errors = [c for c in calls if c.error]
        ops = [e for at, e in operator.errors if phase.start <= at < phase.end]
        total_errors += len(errors)
        seconds = {int(c.at - phase.start) for c in errors}
        kinds = collections.Counter([c.error for c in errors] + [f"operator: {e}" for e in ops])
        restarted = f"{phase.restart_seconds:.1f}" if phase.restart_seconds else ""
        print(
            f"{phase.name:<18} {restarted:>9} {len(calls):>6} "
            f"{sum(c.first_failed for c in calls):>16} {len(errors):>14} {len(seconds):>13} {dups:>11}  "
            + ", ".join(f"{n} x {k}" for k, n in kinds.most_common())
        )
    print("\nfirst tries that failed (then retried on the other edge), by cause:")
    for phase in phases:
        causes = collections.Counter(
            c.first_error for c in partner.calls if c.first_error and phase.start <= c.at < phase.end
        )
        if causes:
            print(f"  {phase.name}: " + ", ".join(f"{n} x {k}" for k, n in causes.most_common()))
    samples = [r for r in got if not key_of(r)]
    sample_ids = {r.headers.get("x-service-event-id", "") for r in samples}
    accepted = set(partner.accepted)
    lost = accepted - sample_ids
    duplicated = {e: n for e, n in counts.items() if n > 1}
    bad = 0
    for r in got:
        try:
            verify(r.body, r.headers.get("x-service-signature", ""), secret, now=r.at)
        except WebhookVerificationError:
            bad += 1
    revoked_seen = {key_of(r) for r in got} - {""}
    lost_revocations = set(operator.revoked) - revoked_seen
    print()
    print(f"partner calls: {len(partner.calls)}, partner errors: {total_errors}")
    print(
        f"sample events: {len(accepted)} accepted (202), {len(accepted - lost)} received, lost {len(lost)}; "
        f"{len(sample_ids - accepted)} received that the partner never saw accepted (its call failed)"
    )
    print(
        f"revocations: {len(operator.revoked)} made, {len(operator.revoked) - len(lost_revocations)} "
        f"webhooks received, lost {len(lost_revocations)}; operator errors: {len(operator.errors)}"
    )
    in_flight = [
        c
        for c in partner.calls
        if c.kind != "GET" and c.first_error and not c.first_error.startswith("Connect")
    ]
    run_twice = sum(1 for k, n in hotels.keys.items() if n > 1 and k in partner.booking_keys)
    print(
        f"bookings: {len(partner.booking_keys)} made, {len(partner.booked)} answered 2xx; the upstream got "
        f"{sum(hotels.keys.values())} for {len(hotels.keys)} Idempotency-Keys ({run_twice} run again after "
        f"a dead edge's claim was taken over, the key passed down)"
    )
    print(
        f"POSTs whose first try broke in flight (not a refused connection): {len(in_flight)}, "
        f"answered on the retry: {sum(1 for c in in_flight if not c.error)}"
    )
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")
    print(
        f"deliveries: {len(got)}, duplicated events: {len(duplicated)} "
        f"({sum(duplicated.values()) - len(duplicated)} extra deliveries), bad signatures: {bad}"
    )
    failed = total_errors or lost or lost_revocations or bad
    return 1 if failed else 0


# -- set-up and clean-up ----------------------------------------------------------------------------------
async def _pg(statement: str) -> None:
    conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user="postgres", database=PG_DB, timeout=5)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


async def _forget_redis(prefix: str) -> int:
    client = aioredis.from_url(REDIS_URL)
    try:
        names = [name async for name in client.scan_iter(match=f"{prefix}*", count=500)]
        if names:
            await client.delete(*names)
        return len(names)
    finally:
        await client.aclose()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scripts/drill.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--rate", type=float, default=6.0, help="partner calls a second, GET and POST in turn"
    )
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds of traffic before the first kill")
    parser.add_argument("--down", type=float, default=3.0, help="seconds a killed process stays dead")
    parser.add_argument(
        "--settle", type=float, default=6.0, help="seconds after a restart before the next kill"
    )
    parser.add_argument(
        "--lease-seconds", type=float, default=60.0, help="webhookd's --lease-seconds (its default: 60)"
    )
    parser.add_argument(
        "--receiver-delay", type=float, default=0.25, help="seconds the webhook receiver takes to answer"
    )
    parser.add_argument(
        "--slow-post",
        type=float,
        default=1.0,
        help="seconds the hotels upstream takes to answer a booking, so bookings are in flight when an "
        "edge is killed (0: no bookings)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        help="the partner's HTTP timeout in seconds (a retry finding its key in use is held up to 9 s)",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the work directory (logs, CA) and say where"
    )
    return parser


def main() -> int:
    args = build_parser().parse_args()
    tag = f"drill_{uuid.uuid4().hex[:10]}"
    work = pathlib.Path(tempfile.mkdtemp(prefix="drill-"))
    asyncio.run(_pg(f'CREATE SCHEMA "{tag}"'))
    database = f"postgresql+asyncpg://postgres@{PG_HOST}:{PG_PORT}/{PG_DB}?search_path={tag}"
    receiver, ca_bundle = trusted_receiver(work)
    receiver.delay = args.receiver_delay  # so that deliveries are in flight when a webhookd dies
    stack, hotels = build_stack(
        work, database, f"{tag}:ratelimit:", str(ca_bundle), args.lease_seconds, args.slow_post
    )
    status = 2
    try:
        print(f"schema {tag}, Redis prefix {tag}:, logs in {work}")
        began = time.monotonic()
        for name in ("authsvc#1", "webhookd#1", "edge#1", "authsvc#2", "webhookd#2", "edge#2"):
            stack.nodes[name].start()
        print(f"six processes READY in {time.monotonic() - began:.1f} s; partner traffic at {args.rate}/s")
        tls = Tls.from_files(*files(work / "tls", "svcctl"))
        status = asyncio.run(drill(stack, receiver, args, tls, hotels))
    finally:
        for node in stack.nodes.values():
            node.stop()
        receiver.stop()
        hotels.stop()
        asyncio.run(_pg(f'DROP SCHEMA IF EXISTS "{tag}" CASCADE'))
        asyncio.run(_forget_redis(f"{tag}:"))
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
