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
- ``connections``: issue 34's many-address connection flood (scripts/bench_connflood.py): 100 addresses
  x 45 keep-alive connections (4,500), then x 50 (5,000), sending made-up keys back to back, against the
  edge and then the portal, from flood processes pinned to one core while the probe (a partner's cached
  key on the edge, a signed-in owner's page on the portal) runs in one process pinned to the other;
  prints both probes' p50/p99 quiet and flooded, every answer's status, and the services' RSS;
- ``many-keys``: the same from many addresses (127.3.0.1 onwards, one request from each, so each
  stays within its own and its /24's budget; the edge's global unknown-key budget answers the rest
  429, while the partner, whose keys were allowed before, is not held to it).

Past an address's allowance the services hold their refusals before answering them (svckit.pacing,
docs/edge.md "Refusal pacing"), so a flood's printed rate is what they let it have; ``--flood-connections``
(16) sets how many connections it floods over (128 and 512 show the held refusals' bound per address).

Each phase takes turns: ``--rounds`` (5) quiet blocks and as many flooded blocks, one after the other, the
flood process paused (its connections open and silent) for a quiet block and resumed for a flooded one,
so the quiet figures a flood is compared with were measured beside it, on the same shared machine at the
same time, not minutes earlier. A quiet block starts ``--settle`` seconds after the pause (what the flood
had in flight is answered), a flooded one ``--warmup`` seconds after the flood resumed.

The flood process runs under SCHED_IDLE (``--no-flood-idle``: only at ``--flood-nice``, default 19): in a
real attack the flood's own CPU is the attacker's, on another machine, while here it shares our two cores.
Under SCHED_IDLE it takes only CPU nothing else wants; at nice 19 the kernel's EEVDF scheduler (Linux 6.6
and later) still lets it finish its time slice before a woken service runs, which put up to a few ms into
the partner's p99 that no service could remove. Its rate (printed, counted only while it floods) shows
how hard it still floods. Percentiles are of ``--cached`` (2,000) and ``--first`` (400) requests per
condition, so a p99 is not one or two unlucky requests.

The goal is p50 and p99 under each flood at most twice the quiet ones. Prints one line per phase with the
quiet and flooded figures, the ratios (and "ok" or "OVER 2x"), the flood's rate, the machine's load
average over the blocks (``uptime``'s 1-minute figure) and any answer to the partner other than 200
(counted, not fatal); ``--blocks`` adds each block's cached p50/p99.
Usage: ``.venv/bin/python scripts/bench_neighbours.py [--cached 2000] [--first 400] [--rounds 5]
[--flood-connections 16] [--no-flood-idle] [--floods sign-in,streams,pings,keys,many-keys] [--blocks]``.
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
FLOODS = ("sign-in", "streams", "pings", "keys", "many-keys", "connections")


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


def unknown_asked(metrics_port: int) -> float:
    """Authorize calls authsvc answered about keys it does not know, so far (its metric)."""
    import urllib.request

    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
    name = 'authsvc_authorize_decisions_total{decision="deny",error_type="invalid_api_key"}'
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


def _flood(
    kind: str, urls: dict[str, Any], conns: int, stop: Event, go: Event, sent: Any, nice: int, idle: bool
) -> None:
    """One flood until ``stop``, from FLOOD_FROM, sending only while ``go`` is set (paused, its connections
    stay open and quiet); counts in ``sent`` the operations it completed while it was set."""
    import re

    os.nice(nice)
    if idle:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))

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

            going = asyncio.Event()  # ``go`` as this loop sees it: one poller, not one per connection

            async def follow() -> None:
                while not stop.is_set():
                    if go.is_set():
                        going.set()
                    else:
                        going.clear()
                    await asyncio.sleep(0.01)
                going.set()

            watcher = asyncio.ensure_future(follow())

            async def turn() -> bool:
                """Waits while the flood is paused; False once it is to stop."""
                if not going.is_set():
                    await going.wait()
                return not stop.is_set()

            def done(i: int) -> None:
                if going.is_set():
                    counts[i] += 1

            async def signin(i: int) -> None:
                # A cookie jar per connection: one shared jar would keep only the last CSRF cookie, and the
                # others' posts would be refused as forged instead of throttled.
                own = httpx.AsyncHTTPTransport(local_address=FLOOD_FROM)
                async with httpx.AsyncClient(transport=own, timeout=30) as jar:
                    page = await jar.get(f"{urls['portal']}/signin")
                    found = re.search(r'name="csrf" value="([^"]*)"', page.text)
                    token = found.group(1) if found else ""
                    while await turn():
                        form = {
                            "csrf": token,
                            "email": f"x{random_base62(8)}@flood.example",
                            "password": "a" * 16,
                        }
                        await jar.post(f"{urls['portal']}/signin", data=form)
                        done(i)

            def made_up() -> dict[str, str]:
                body = "svc_test_" + random_base62(32)
                return {"Host": SANDBOX_HOST, "Authorization": f"Svc {body + checksum(body)}"}

            async def keys(i: int) -> None:
                while await turn():
                    await c.get(f"{urls['edge']}/v1/account", headers=made_up())
                    done(i)

            edge_port = int(urls["edge_port"])

            async def many_keys(i: int) -> None:
                # Raw HTTP/1.1, one request per connection from its own address: an httpx client per
                # address would cost the flood more than the edge.
                n = 0
                while await turn():
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
                    done(i)

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
                while await turn():
                    try:
                        async with ws(key):
                            pass
                    except Exception:
                        await asyncio.sleep(0.01)  # refused past the caps: try again
                    done(i)

            async def pings(i: int) -> None:
                key = urls["flood_keys"][i % len(urls["flood_keys"])]
                while await turn():
                    try:
                        async with ws(key) as stream:
                            while await turn():
                                await stream.ping()
                                done(i)
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
            await watcher
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


def connection_floods(args: argparse.Namespace, authsvc: str, edge: Any, portal: Any, cached: str) -> None:
    """The ``connections`` phase (scripts/bench_connflood.py): a signed-in owner made through an
    invitation, then each flood of the edge and of the portal."""
    import re

    import bench_connflood
    import grpc
    import httpx

    from edge.testing import SANDBOX_HOST
    from travel.auth.v1 import auth_pb2 as apb
    from travel.auth.v1 import auth_pb2_grpc, identity_pb2_grpc
    from travel.auth.v1 import identity_pb2 as ipb

    actor = apb.Actor(user="bench")
    with grpc.insecure_channel(authsvc) as channel:
        account = auth_pb2_grpc.AuthServiceStub(channel).CreateAccount(
            apb.CreateAccountRequest(name="owner's account", actor=actor)
        )
        invite = identity_pb2_grpc.IdentityServiceStub(channel).CreateInvite(
            ipb.CreateInviteRequest(
                account_id=account.account.id,
                email="owner@bench.example",
                role=ipb.USER_ROLE_OWNER,
                actor=actor,
            )
        )
    portal_url = portal.ports["url"]
    with httpx.Client(base_url=portal_url, timeout=30) as browser:
        form = browser.get(f"/invite/{invite.token}").text
        csrf = re.search(r'name="csrf" value="([^"]*)"', form)
        done = browser.post(
            f"/invite/{invite.token}",
            data={"csrf": csrf.group(1) if csrf else "", "password": "a long enough passphrase"},
        )
        assert done.status_code == 303, done.text
        cookie = f"portal_session={browser.cookies['portal_session']}"
    edge_url = f"http://127.0.0.1:{edge.ports['sandbox_port']}"
    probe = (edge_url, SANDBOX_HOST, cached, portal_url, cookie)
    pids = {"edge": edge.proc.pid, "portal": portal.proc.pid}
    cores = sorted(os.sched_getaffinity(0))
    print(
        f"connection floods: flood processes pinned to core {cores[1 % len(cores)]}, the probe to core "
        f"{cores[0]} (services unpinned); {args.rounds} quiet and {args.rounds} flooded blocks in turn, "
        f"{args.conn_samples} partner requests and {args.conn_samples // 2} owner pages each",
        flush=True,
    )
    portal_port = int(portal_url.rsplit(":", 1)[1])
    for target, port, host in (
        ("edge", edge.ports["sandbox_port"], SANDBOX_HOST),
        ("portal", portal_port, "127.0.0.1"),
    ):
        for per_address in (45, 50):
            bench_connflood.run(
                target, port, host, per_address, probe, pids, args.conn_samples, args.rounds, 3.0
            )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cached", type=int, default=2000, help="requests with the cached key per phase")
    parser.add_argument("--first", type=int, default=400, help="first-use keys per phase")
    parser.add_argument("--flood-connections", type=int, default=16)
    parser.add_argument("--flood-nice", type=int, default=19, help="the flood process's niceness")
    parser.add_argument(
        "--flood-idle",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run the flood process under SCHED_IDLE (default; --no-flood-idle: only its niceness)",
    )
    parser.add_argument("--blocks", action="store_true", help="also print each block's cached p50/p99")
    parser.add_argument("--rounds", type=int, default=5, help="quiet and flooded blocks per phase, in turn")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds a flood runs before a block")
    parser.add_argument(
        "--settle", type=float, default=1.5, help="seconds after pausing, before a quiet block"
    )
    parser.add_argument("--floods", default=",".join(FLOODS), help=f"which of {', '.join(FLOODS)}")
    parser.add_argument(
        "--conn-samples", type=int, default=400, help="partner requests per block of the connections phase"
    )
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

            floods = [f for f in args.floods.split(",") if f in FLOODS]
            cached = keys("partner", 1)[0]
            # Each flood's phase uses fresh keys in its quiet blocks and in its flood blocks.
            fresh = {
                (f, q): keys(f"partner {f} {q}", args.first)
                for f in floods
                if f != "connections"
                for q in ("quiet", "flood")
            }
            flood_keys = keys("noisy neighbour", 10)
        edge_port = edge.ports["sandbox_port"]
        edge_url = f"http://127.0.0.1:{edge_port}"
        urls = {
            "portal": portal.ports["url"],
            "edge": edge_url,
            "edge_port": edge_port,
            "flood_keys": flood_keys,
        }
        if "connections" in floods:
            floods.remove("connections")
            connection_floods(args, authsvc.grpc_target, edge, portal, cached)
            if not floods:
                return 0
        policy = "SCHED_IDLE" if args.flood_idle else f"nice {args.flood_nice}"
        print(
            f"partner from 127.0.0.1: {args.cached} requests with a cached key, {args.first} first-use keys, "
            f"sequential, each phase in {args.rounds} quiet and {args.rounds} flooded blocks taken in turn; "
            f"floods from {FLOOD_FROM}, {args.flood_connections} connections, separate process ({policy})"
        )
        asyncio.run(partner(f"{edge_url}/v1/account", cached, [], 50))  # the cached key cached, warm
        url = f"{edge_url}/v1/account"
        for phase in floods:
            stop, go, sent = multiprocessing.Event(), multiprocessing.Event(), multiprocessing.Value("l", 0)
            asked_before = unknown_asked(authsvc.ports["metrics_port"])
            worker = multiprocessing.Process(
                target=_flood,
                args=(phase, urls, args.flood_connections, stop, go, sent, args.flood_nice, args.flood_idle),
            )
            worker.start()
            samples: dict[str, tuple[list[float], list[float]]] = {"quiet": ([], []), "flood": ([], [])}
            refused: list[str] = []
            flooded, loads = 0.0, []
            try:
                for r in range(args.rounds):
                    for block in ("quiet", "flood"):
                        if block == "quiet":
                            go.clear()
                            time.sleep(args.settle)  # what the flood had in flight is answered
                        else:
                            go.set()
                            time.sleep(args.warmup)
                            t0 = time.perf_counter()
                        loads.append(os.getloadavg()[0])
                        keys_now = fresh[phase, block][r :: args.rounds]
                        hot, first = asyncio.run(
                            partner(url, cached, keys_now, args.cached // args.rounds, refused)
                        )
                        samples[block][0].extend(hot)
                        samples[block][1].extend(first)
                        if args.blocks:
                            print(
                                f"  {phase} round {r + 1} {block:5s}: cached p50 {pct(hot, 50):5.2f} p99"
                                f" {pct(hot, 99):5.2f} ms (load {loads[-1]:3.1f})",
                                flush=True,
                            )
                        if block == "flood":
                            flooded += time.perf_counter() - t0 + args.warmup
            finally:
                stop.set()
                go.set()
                worker.join(60)
            (qh, qf), (fh, ff) = samples["quiet"], samples["flood"]
            ratios = [pct(fh, 50) / pct(qh, 50), pct(fh, 99) / pct(qh, 99)]
            ratios += [pct(ff, 50) / pct(qf, 50), pct(ff, 99) / pct(qf, 99)]
            verdict = "ok" if max(ratios) <= 2 else "OVER 2x"
            line = f"{phase:9s} load {min(loads):3.1f}-{max(loads):3.1f}"
            for block, (h, f) in samples.items():
                line += f" | {block}: cached {pct(h, 50):5.2f} {pct(h, 99):5.2f}"
                line += f" first {pct(f, 50):5.2f} {pct(f, 99):6.2f}"
            line += " | x quiet " + " ".join(f"{r:4.2f}" for r in ratios) + f" {verdict}"
            asked = unknown_asked(authsvc.ports["metrics_port"]) - asked_before
            line += f" | flood {sent.value / flooded:6.0f}/s, authsvc asked {asked / flooded:3.0f}/s unknown"
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
