#!/usr/bin/env python3
"""Benchmark (not a test): can a noisy tenant slow a partner down? Loopback only, bounded (a few minutes).

webhookd, authsvc, the edge and the portal run as processes on SQLite in a temporary directory. A
partner (127.0.0.1) makes sequential ``GET /v1/account`` requests: with a key the edge has cached, and
with keys it has never seen (first use: one Authorize call each). Its p50/p99 are measured quiet, then
under each flood, sent by a separate process from another address (127.0.0.2, so the per-address limits
see two sources, as they would two tenants):

- ``sign-in``: POST /signin to the portal with made-up e-mails (argon2 work in authsvc; the portal's per-
  address limit answers most of them 429);
- ``streams``: WebSocket /v1/stream connections of another account opened and closed in a loop (up to
  its per-key and per-account caps);
- ``pings``: open streams of another account sending ping frames as fast as they can;
- ``keys``: made-up keys whose checksum holds (each a cache miss; the per-address unknown-key budget
  answers most of them 429);
- ``many-keys``: the same from many addresses (127.3.0.1 onwards, one request from each, so each
  stays within its own and its /24's budget; the edge's global unknown-key budget answers the rest
  429, while the partner, whose keys were allowed before, is not held to it).

The flood process runs at ``--flood-nice`` (default 19): in a real attack the flood's own CPU is the
attacker's, on another machine, while here it shares our two cores; at nice 19 it takes what our processes
leave, and its rate (printed) shows how hard it still floods. ``--flood-nice 0`` measures it competing at
equal priority. Percentiles are of ``--cached`` (1,000) and ``--first`` (300) requests per phase, so a p99 is
not one or two unlucky requests.

The goal is p50 and p99 under each flood at most twice the quiet ones. Prints one line per phase with the
ratios (and "ok" or "OVER 2x"), the flood's rate, the machine's load average while it ran (``uptime``'s
1-minute figure, before and after) and any answer to the partner other than 200 (counted, not fatal).
Usage: ``.venv/bin/python scripts/bench_neighbours.py [--cached 1000] [--first 300] [--flood-connections 16]
[--flood-nice 19] [--floods sign-in,streams,pings,keys,many-keys]``.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import pathlib
import shutil
import sys
import tempfile
import time
from collections import Counter
from multiprocessing.synchronize import Event
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FLOOD_FROM = "127.0.0.2"
FLOODS = ("sign-in", "streams", "pings", "keys", "many-keys")


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


def unknown_asked(metrics_port: int) -> float:
    """Authorize calls authsvc answered about keys it does not know, so far (its metric)."""
    import urllib.request

    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
    name = 'authsvc_authorize_decisions_total{decision="deny",error_type="invalid_api_key"}'
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


def _flood(kind: str, urls: dict[str, Any], conns: int, stop: Event, sent: Any, nice: int) -> None:
    """One flood until ``stop``, from FLOOD_FROM; counts its operations in ``sent``."""
    import re

    os.nice(nice)

    import httpx
    import uvloop
    from websockets.asyncio.client import connect

    from edge.testing import SANDBOX_HOST
    from svckit.apikeys import checksum
    from svckit.ids import random_base62

    async def main() -> None:
        transport = httpx.AsyncHTTPTransport(local_address=FLOOD_FROM)
        limits = httpx.Limits(max_connections=conns, max_keepalive_connections=conns)
        async with httpx.AsyncClient(transport=transport, limits=limits, timeout=30) as c:
            counts = [0] * conns

            async def signin(i: int) -> None:
                # A cookie jar per connection: one shared jar would keep only the last CSRF cookie, and the
                # others' posts would be refused as forged instead of throttled.
                own = httpx.AsyncHTTPTransport(local_address=FLOOD_FROM)
                async with httpx.AsyncClient(transport=own, timeout=30) as jar:
                    page = await jar.get(f"{urls['portal']}/signin")
                    found = re.search(r'name="csrf" value="([^"]*)"', page.text)
                    token = found.group(1) if found else ""
                    while not stop.is_set():
                        form = {
                            "csrf": token,
                            "email": f"x{random_base62(8)}@flood.example",
                            "password": "a" * 16,
                        }
                        await jar.post(f"{urls['portal']}/signin", data=form)
                        counts[i] += 1

            def made_up() -> dict[str, str]:
                body = "svc_test_" + random_base62(32)
                return {"Host": SANDBOX_HOST, "Authorization": f"Svc {body + checksum(body)}"}

            async def keys(i: int) -> None:
                while not stop.is_set():
                    await c.get(f"{urls['edge']}/v1/account", headers=made_up())
                    counts[i] += 1

            edge_port = int(urls["edge_port"])

            async def many_keys(i: int) -> None:
                # Raw HTTP/1.1, one request per connection from its own address: an httpx client per
                # address would cost the flood more than the edge.
                n = 0
                while not stop.is_set():
                    k = n * conns + i  # the k-th address, 127.3.0.1 onwards: 250 to a /24
                    n += 1
                    address = f"127.{3 + k // 64_000 % 100}.{k // 250 % 256}.{k % 250 + 1}"
                    head = "".join(f"{name}: {value}\r\n" for name, value in made_up().items())
                    try:
                        reader, writer = await asyncio.open_connection(
                            "127.0.0.1", edge_port, local_addr=(address, 0)
                        )
                        writer.write(f"GET /v1/account HTTP/1.1\r\n{head}Connection: close\r\n\r\n".encode())
                        await reader.read()  # until the edge closes
                        writer.close()
                    except OSError:
                        await asyncio.sleep(0.01)
                    counts[i] += 1

            def ws(key: str) -> Any:
                return connect(
                    f"ws://{SANDBOX_HOST}/v1/stream",
                    subprotocols=["svc", key],  # type: ignore[list-item]
                    host="127.0.0.1",
                    port=urls["edge_port"],
                    local_addr=(FLOOD_FROM, 0),
                    open_timeout=30,
                )

            async def streams(i: int) -> None:
                key = urls["flood_keys"][i % len(urls["flood_keys"])]
                while not stop.is_set():
                    try:
                        async with ws(key):
                            pass
                    except Exception:
                        await asyncio.sleep(0.01)  # refused past the caps: try again
                    counts[i] += 1

            async def pings(i: int) -> None:
                key = urls["flood_keys"][i % len(urls["flood_keys"])]
                while not stop.is_set():
                    try:
                        async with ws(key) as stream:
                            while not stop.is_set():
                                await stream.ping()
                                counts[i] += 1
                    except Exception:
                        await asyncio.sleep(0.01)  # closed for its message rate: open another

            one = {
                "sign-in": signin,
                "keys": keys,
                "streams": streams,
                "pings": pings,
                "many-keys": many_keys,
            }[kind]
            await asyncio.gather(*(one(i) for i in range(conns)))
            with sent.get_lock():
                sent.value += sum(counts)

    uvloop.run(main())


async def partner(
    url: str, cached: str, fresh: list[str], samples: int, refused: list[str] | None = None
) -> tuple[list[float], list[float]]:
    """Milliseconds per request: ``samples`` with the cached key, then one per fresh key. An answer
    other than 200 is timed all the same and its status (and error type) noted in ``refused``."""
    import httpx

    from edge.testing import SANDBOX_HOST

    async def timed(c: httpx.AsyncClient, key: str) -> float:
        t = time.perf_counter()
        r = await c.get(url, headers={"Host": SANDBOX_HOST, "Authorization": f"Svc {key}"})
        ms = (time.perf_counter() - t) * 1000
        if r.status_code != 200 and refused is not None:
            refused.append(f"{r.status_code} {r.json().get('error', {}).get('type', '')}")
        return ms

    async with httpx.AsyncClient(timeout=30) as c:
        hot = [await timed(c, cached) for _ in range(samples)]
        first = [await timed(c, key) for key in fresh]
    return hot, first


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cached", type=int, default=1000, help="requests with the cached key per phase")
    parser.add_argument("--first", type=int, default=300, help="first-use keys per phase")
    parser.add_argument("--flood-connections", type=int, default=16)
    parser.add_argument("--flood-nice", type=int, default=19, help="the flood process's niceness")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds a flood runs before measuring")
    parser.add_argument("--floods", default=",".join(FLOODS), help=f"which of {', '.join(FLOODS)}")
    args = parser.parse_args()

    import grpc

    from edge.testing import edge_args
    from tests.support import ServiceProcess, sqlite_url, start_service
    from travel.auth.v1 import auth_pb2 as apb
    from travel.auth.v1 import auth_pb2_grpc

    tmp = pathlib.Path(tempfile.mkdtemp(prefix="bench_neighbours_"))
    procs: list[ServiceProcess] = []
    try:
        webhookd = start_service("webhookd", tmp, sqlite_url(tmp, "w.db"), "--log-level", "WARNING")
        procs.append(webhookd)
        authsvc = start_service(
            "authsvc",
            tmp,
            sqlite_url(tmp, "a.db"),
            "--log-level",
            "WARNING",
            "--metrics-listen",
            "127.0.0.1:0",
        )
        procs.append(authsvc)
        edge_flags = edge_args(authsvc.grpc_target, webhookd.grpc_target, sqlite_url(tmp, "e.db"))
        edge = ServiceProcess("edge", [*edge_flags, "--log-level", "WARNING"]).start(tmp / "edge.log")
        procs.append(edge)
        portal = ServiceProcess(
            "portal",
            ["--listen", "127.0.0.1:0", "--metrics-listen", "", "--log-level", "WARNING",
             "--authsvc", authsvc.grpc_target, "--webhookd", webhookd.grpc_target],
        ).start(tmp / "portal.log")  # fmt: skip
        procs.append(portal)

        actor = apb.Actor(user="bench")
        with grpc.insecure_channel(authsvc.grpc_target) as channel:
            stub = auth_pb2_grpc.AuthServiceStub(channel)

            def keys(name: str, n: int) -> list[str]:
                account = stub.CreateAccount(apb.CreateAccountRequest(name=name, actor=actor)).account
                return [
                    stub.CreateKey(
                        apb.CreateKeyRequest(
                            account_id=account.id,
                            environment=apb.ENVIRONMENT_SANDBOX,
                            scopes=["account:read", "webhooks:read"],
                            actor=actor,
                            rate_limit=10_000,  # the measured requests never meet their key's limit
                        )
                    ).secret
                    for _ in range(n)
                ]

            phases = ("quiet", *(f for f in args.floods.split(",") if f in FLOODS))
            cached = keys("partner", 1)[0]
            fresh = {phase: keys(f"partner {phase}", args.first) for phase in phases}
            flood_keys = keys("noisy neighbour", 10)
        edge_port = edge.ports["sandbox_port"]
        edge_url = f"http://127.0.0.1:{edge_port}"
        urls = {
            "portal": portal.ports["url"],
            "edge": edge_url,
            "edge_port": edge_port,
            "flood_keys": flood_keys,
        }
        print(
            f"partner from 127.0.0.1: {args.cached} requests with a cached key, {args.first} first-use keys, "
            f"sequential; floods from {FLOOD_FROM}, {args.flood_connections} connections, separate process "
            f"at nice {args.flood_nice}"
        )
        asyncio.run(partner(f"{edge_url}/v1/account", cached, [], 50))  # the cached key cached, warm
        quiet: tuple[list[float], list[float]] | None = None
        for phase in phases:
            stop, sent, worker = multiprocessing.Event(), multiprocessing.Value("l", 0), None
            asked_before = unknown_asked(authsvc.ports["metrics_port"])
            if phase != "quiet":
                worker = multiprocessing.Process(
                    target=_flood, args=(phase, urls, args.flood_connections, stop, sent, args.flood_nice)
                )
                worker.start()
                time.sleep(args.warmup)
            t0 = time.perf_counter()
            load_before = os.getloadavg()[0]
            refused: list[str] = []
            hot, first = asyncio.run(
                partner(f"{edge_url}/v1/account", cached, fresh[phase], args.cached, refused)
            )
            elapsed = time.perf_counter() - t0
            if worker is not None:
                stop.set()
                worker.join(60)
                elapsed += args.warmup
            quiet = quiet or (hot, first)
            load = f"load {load_before:4.1f}-{os.getloadavg()[0]:4.1f}"
            line = f"{phase:9s} {load} | cached p50 {pct(hot, 50):7.2f} p99 {pct(hot, 99):7.2f} ms"
            line += f" | first use p50 {pct(first, 50):7.2f} p99 {pct(first, 99):7.2f} ms"
            if phase != "quiet":
                ratios = [
                    pct(hot, 50) / pct(quiet[0], 50),
                    pct(hot, 99) / pct(quiet[0], 99),
                    pct(first, 50) / pct(quiet[1], 50),
                    pct(first, 99) / pct(quiet[1], 99),
                ]
                verdict = "ok" if max(ratios) <= 2 else "OVER 2x"
                line += " | x quiet " + " ".join(f"{r:4.2f}" for r in ratios) + f" {verdict}"
                line += f" | flood {sent.value / elapsed:7.0f}/s"
                asked = unknown_asked(authsvc.ports["metrics_port"]) - asked_before
                line += f", authsvc asked {asked / elapsed:4.0f}/s of unknown keys"
            if refused:
                line += " | not 200: " + ", ".join(f"{n}x {k}" for k, n in sorted(Counter(refused).items()))
            print(line, flush=True)
    finally:
        for p in reversed(procs):
            p.terminate()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
