#!/usr/bin/env python3
"""Benchmark of the edge (not a test), loopback only, bounded (about a minute).

In one run:
1. authenticated ``GET /v1/account`` requests/s and p99 on the edge as ``scripts/run`` starts it (mutual
   TLS to authsvc, metrics listener on, logs at INFO, an idempotency key file) versus **stock Sanic**: the
   same JSON route in an app started the way Sanic's docs start it, ``app.run(single_process=True,
   access_log=False)`` (the edge's worker model: one process). Their ratio (goal >= 0.90, p99 <= 1.2x) and
   each server's CPU per request (from /proc, steadier than req/s on a busy machine). A second baseline,
   the same route on the edge's own HTTP protocol (``svckit.webserver.start`` with ``EdgeProtocol``),
   shows what the protocol costs apart from the edge's work;
   then the same on an edge whose per-key limits are shared in Redis (``--redis``; a limit high enough
   never to refuse, so every request pays the script's round trip);
   then the same edge with ``--workers 2`` (1 vs 2 workers);
   then a proxied product GET on the live host (``GET /v1/hotels/offers/{id}``, stock Sanic as the hotels
   upstream) against the same GET sent to stock Sanic directly (goal >= 0.45), with the edge's CPU per
   proxied request;
   then the same cached GET on an edge that counts no usage (``--no-usage-counts``) against the edge as
   started (exact usage counts on, flushed to authsvc every 10 s): their ratio (goal >= 0.97, within 3 %);
2. revocation-to-refusal latency p50/p99 across two edge processes (RevokeKey at t0; each edge is polled
   until it answers 401).

Load comes from ``wrk``, which the bench installs with apt-get when it is missing and it runs as root
(else it falls back to an httpx client in a separate process, which cannot load either server: it warns).
Usage: ``.venv/bin/python scripts/bench_edge.py [--seconds 5] [--connections 50]``;
``--only cached`` runs the first comparison alone (stock Sanic against the edge's cached GET, each run
printed; about 40 s), ``--only counting`` the usage counts' (the edge counting against one that does not,
each run printed), ``--whole-stack`` measures the edge's cached GET while authsvc, webhookd and the
portal run beside it as ``scripts/run`` starts them, against stock Sanic (best of 3 alternating rounds; with
each service's idle CPU; scripts/wholestack.py), ``--threads`` adds where each server's CPU went, thread by
thread (from /proc: user and system time per request of the loop's thread, the gRPC threads, the metrics
listener's).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from loadgen import (
    cpu_seconds,
    httpx_load,
    install_wrk,
    measured,
    print_thread_split,
    wrk,
)

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HOST = "127.0.0.1:8081"  # a sandbox Host value the edge knows
LIVE_HOST = "127.0.0.1:8080"  # a live one


# -- the baselines: the same JSON routes, in stock Sanic and on the edge's protocol ---------------------
def baseline_app(name: str, **kw: Any) -> Any:
    from sanic import Sanic
    from sanic.response import json as json_response

    app = Sanic(name, **kw)

    @app.get("/v1/account")
    async def account(request: object) -> object:
        return json_response({"object": "account", "id": "acct_bare"})

    @app.get("/v1/hotels/offers/<offer_id:str>")  # also the hotels upstream of the proxied GET
    async def offer(request: object, offer_id: str) -> object:
        return json_response(
            {"object": "hotel_offer", "id": offer_id, "price": {"amount": 120, "currency": "EUR"}}
        )

    return app


def serve_stock(port: int, tls_dir: str = "") -> None:
    """Stock Sanic, started as its docs start it: ``app.run`` (one process, no access log); with
    ``tls_dir``, HTTPS with the product:hotels certificate of that development CA, asking for the
    client's (the edge's) certificate, as a product upstream of the edge serves."""
    ssl = None
    if tls_dir:
        import ssl as ssl_module

        from svckit.devca import files

        ca, cert, key = files(pathlib.Path(tls_dir), "product:hotels")
        ssl = ssl_module.create_default_context(ssl_module.Purpose.CLIENT_AUTH, cafile=ca)
        ssl.load_cert_chain(cert, key)
        ssl.verify_mode = ssl_module.CERT_REQUIRED
    baseline_app("stock").run(host="127.0.0.1", port=port, single_process=True, access_log=False, ssl=ssl)


def serve_bare() -> None:
    """The same routes on the edge's own protocol and server start-up (the protocol-level baseline)."""
    import uvloop

    from edge.server import EdgeProtocol
    from svckit.runner import print_ready, run_until_signal
    from svckit.webserver import start

    app = baseline_app("bare", configure_logging=False)
    app.config.ACCESS_LOG = False

    async def main() -> None:
        running = await start(app, ["127.0.0.1:0"], protocol=EdgeProtocol)
        print_ready("bare", port=running.ports[0])
        await run_until_signal(running.stop)

    uvloop.run(main())


# -- load ----------------------------------------------------------------------------------------------
def start(
    module: str, args: list[str], log: pathlib.Path, extra: list[str] | None = None
) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    cmd = (
        [sys.executable, "-m", module, "serve", *args]
        if module not in ("bare", "stock")
        else [sys.executable, __file__, f"--{module}", *args]
    )
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=open(log, "w"), text=True, cwd=ROOT)
    if module.startswith("stock"):  # Sanic's own start-up prints no READY line: wait for the port
        port = int(args[0])  # the port stock Sanic was told
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return proc, {"port": port}
            except OSError:
                time.sleep(0.05)
        raise SystemExit(f"stock Sanic did not start; see {log}")
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("READY "):
            return proc, json.loads(line[6:])
    raise SystemExit(f"{module} did not start:\n{log.read_text()[-3000:]}")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_authsvc(tmp: pathlib.Path, procs: list[subprocess.Popen[str]]) -> str:
    """authsvc as scripts/run starts it (mutual TLS, metrics, INFO logs) on SQLite in ``tmp``, appended to
    ``procs``: its gRPC target."""
    from svckit.devca import flags, init_dir

    init_dir(tmp / "tls", ("authsvc", "edge", "svcctl", "product:hotels"))
    auth_args = ["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
                 "--database", f"sqlite+aiosqlite:///{tmp / 'a.db'}",
                 *flags(tmp / "tls", "authsvc")]  # fmt: skip
    auth, ap = start("authsvc", auth_args, tmp / "authsvc.log")
    procs.append(auth)
    return f"127.0.0.1:{ap['grpc_port']}"


def edge_flags(target: str, tmp: pathlib.Path) -> list[str]:
    """``edge serve`` flags as scripts/run gives them (mutual TLS to authsvc, the metrics listener, INFO
    logs, an idempotency key file), on free ports: sandbox Host ``HOST``, no webhookd, SQLite in ``tmp``."""
    from svckit.devca import flags
    from svckit.secretbox import new_key

    key_file = tmp / "edge-idempotency.key"
    if not key_file.exists():
        key_file.write_text(new_key() + "\n")
    return ["--live-listen", "127.0.0.1:0", "--sandbox-listen", "127.0.0.1:0", "--authsvc", target,
            "--sandbox-hosts", HOST, "--webhookd", "127.0.0.1:1", "--metrics-listen", "127.0.0.1:0",
            "--database", f"sqlite+aiosqlite:///{tmp / 'e.db'}", *flags(tmp / "tls", "edge"),
            "--idempotency-key-file", str(key_file)]  # fmt: skip


def stop_all(procs: list[subprocess.Popen[str]], tmp: pathlib.Path) -> None:
    """SIGTERM every process (the last started first), SIGKILL any still up after 10 s; remove ``tmp``."""
    for p in reversed(procs):
        p.terminate()
    for p in procs:
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
    shutil.rmtree(tmp, ignore_errors=True)


TLS_DIR = pathlib.Path()  # the run's development CA (set by main)


def operator_channel(target: str) -> Any:
    """A gRPC channel to authsvc as the operator (svcctl's certificate), as scripts/run makes its demo key."""
    import grpc

    from svckit.devca import files
    from svckit.tls import Tls

    creds = Tls.from_files(*files(TLS_DIR, "svcctl")).channel_credentials()
    return grpc.aio.secure_channel(target, creds, options=[("grpc.ssl_target_name_override", "authsvc")])


async def make_key(target: str, scopes: list[str], live: bool = False) -> tuple[str, str]:
    from travel.auth.v1 import auth_pb2 as pb
    from travel.auth.v1 import auth_pb2_grpc

    async with operator_channel(target) as ch:
        stub = auth_pb2_grpc.AuthServiceStub(ch)
        acct = await stub.CreateAccount(pb.CreateAccountRequest(name="bench", actor=pb.Actor(user="bench")))
        key = await stub.CreateKey(
            pb.CreateKeyRequest(
                account_id=acct.account.id,
                environment=pb.ENVIRONMENT_LIVE if live else pb.ENVIRONMENT_SANDBOX,
                scopes=scopes,
                actor=pb.Actor(user="bench"),
            )
        )
        return key.key.id, key.secret


async def revocation_latency(target: str, urls: list[str], rounds: int) -> tuple[list[float], list[float]]:
    """Seconds from calling RevokeKey to each edge's first 401, and RevokeKey's own duration."""
    import httpx

    from travel.auth.v1 import auth_pb2 as pb
    from travel.auth.v1 import auth_pb2_grpc

    samples: list[float] = []
    rpc: list[float] = []
    async with operator_channel(target) as ch, httpx.AsyncClient(timeout=5) as http:
        stub = auth_pb2_grpc.AuthServiceStub(ch)
        for _ in range(rounds):
            key_id, secret = await make_key(target, ["account:read"])
            headers = {"Host": HOST, "Authorization": f"Svc {secret}"}
            for url in urls:  # both edges hold a cached ALLOW
                for _ in range(2):
                    assert (await http.get(url, headers=headers)).status_code == 200

            async def until_refused(url: str, t0: float, headers: dict[str, str] = headers) -> float:
                while True:
                    r = await http.get(url, headers=headers)
                    if r.status_code == 401:
                        return time.perf_counter() - t0
                    if time.perf_counter() - t0 > 5:
                        raise SystemExit(f"{url} still accepts a revoked key after 5 s")

            t0 = time.perf_counter()

            async def revoke(t0: float = t0, key_id: str = key_id) -> float:
                await stub.RevokeKey(pb.RevokeKeyRequest(key_id=key_id, actor=pb.Actor(user="bench")))
                return time.perf_counter() - t0

            revoked_in, *results = await asyncio.gather(revoke(), *(until_refused(u, t0) for u in urls))
            samples.extend(results)
            rpc.append(revoked_in)
    return samples, rpc


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


def alternate(
    load: Callable[[str, dict[str, str], float, int], tuple[float, float]],
    args: argparse.Namespace,
    servers: Sequence[tuple[str, int | list[int], str]],
    headers: dict[str, str],
    splits: dict[str, dict[str, list[float]]],
) -> dict[str, list[tuple[float, float, float]]]:
    """Each server warmed up, then ``args.rounds`` rounds of one run each, alternating: per server, its
    runs' (req/s, p99 ms, CPU µs per request)."""
    for _, _, url in servers:
        load(url, headers, 1, args.connections)  # warm-up
    runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name, _, _ in servers}
    for _ in range(args.rounds):
        for name, pid, url in servers:
            split = splits.get(name)
            runs[name].append(measured(load, pid, url, headers, args.seconds, args.connections, split))
    return runs


def best(runs: dict[str, list[tuple[float, float, float]]], name: str) -> tuple[float, float, float]:
    """A server's best run's req/s and p99, and its lowest CPU per request."""
    rps, p99, _ = max(runs[name])
    return rps, p99, min(r[2] for r in runs[name])


def numbers(run: tuple[float, float, float]) -> str:
    """A measured run's columns: requests per second, p99 latency and CPU per request."""
    rps, p99, us = run
    return f"{rps:10.0f} req/s   p99 {p99:7.2f} ms   CPU {us:5.0f} us/req"


def print_runs(runs: dict[str, list[tuple[float, float, float]]], names: Sequence[str], width: int) -> None:
    """Every round of each named server, one line a round."""
    for name in names:
        for run in runs[name]:
            print(f"  {name:<{width}} run: {numbers(run)}")


def print_stock_and_edge(
    stock: tuple[float, float, float],
    edge: tuple[float, float, float],
    bare: tuple[float, float, float] | None,
) -> None:
    """The lines of stock Sanic, the edge's protocol alone (when measured) and the edge, with the ratio."""
    (s_rps, s_p99, s_us), (e_rps, e_p99, e_us) = stock, edge
    print(f"stock Sanic app.run   : {numbers(stock)}")
    if bare is not None:
        print(f"same route, edge proto: {numbers(bare)}")
    print(f"edge GET /v1/account  : {numbers(edge)}   (authenticated, cached)")
    print(
        f"ratio edge/stock      : {e_rps / s_rps:10.2f}   (goal >= 0.90); "
        f"p99 {e_p99 / s_p99:.2f} x stock (goal <= 1.2); CPU per request stock/edge {s_us / e_us:.2f}"
    )


def cached_only(
    load: Callable[[str, dict[str, str], float, int], tuple[float, float]],
    args: argparse.Namespace,
    servers: list[tuple[str, int, str]],
    headers: dict[str, str],
    splits: dict[str, dict[str, list[float]]],
) -> None:
    """``--only cached``: stock Sanic against the edge's cached GET, alternating, best of the rounds."""
    runs = alternate(load, args, servers, headers, splits)
    print_runs(runs, [name for name, _, _ in servers], 5)
    print_stock_and_edge(best(runs, "stock"), best(runs, "edge"), None)
    for name, split in splits.items():
        print_thread_split(name, split, sum(r[0] for r in runs[name]) * args.seconds)


def print_counting(off: tuple[float, float, float], on: tuple[float, float, float]) -> None:
    """The cached GET with exact usage counting off and on, and their ratio."""
    (f_rps, _, f_us), (n_rps, _, n_us) = off, on
    print(f"edge, counting off    : {numbers(off)}   (--no-usage-counts)")
    print(f"edge, counting on     : {numbers(on)}   (as started)")
    print(
        f"ratio counting on/off : {n_rps / f_rps:10.2f}   (goal >= 0.97); "
        f"CPU per request on/off {n_us / f_us:.3f}"
    )


def counting_only(
    load: Callable[[str, dict[str, str], float, int], tuple[float, float]],
    args: argparse.Namespace,
    servers: list[tuple[str, int, str]],
    headers: dict[str, str],
) -> None:
    """``--only counting``: the edge's cached GET with usage counting off and on, alternating."""
    runs = alternate(load, args, servers, headers, {})
    print_runs(runs, [name for name, _, _ in servers], 7)
    print_counting(best(runs, "nocount"), best(runs, "edge"))


def main() -> int:
    global TLS_DIR
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--stock", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--stock-tls", default="", help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds per throughput run")
    parser.add_argument("--rounds", type=int, default=2, help="alternating baseline/edge runs (best of)")
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--revocations", type=int, default=25, help="keys revoked for the latency figure")
    parser.add_argument(
        "--redis", default="redis://127.0.0.1:6379/0", help="Redis for the shared-limits run; empty: skip it"
    )
    parser.add_argument(
        "--only",
        choices=["cached", "counting"],
        help="cached: only stock Sanic and the edge's cached GET (no other edge, worker, Redis, proxied or "
        "revocation run, and none of their processes started); counting: only the edge's cached GET with "
        "usage counting on and off",
    )
    parser.add_argument(
        "--whole-stack",
        action="store_true",
        help="the edge's cached GET with authsvc, webhookd and the portal running beside it as scripts/run "
        "starts them, against stock Sanic app.run (best of at least 3 alternating rounds), and each "
        "service's idle CPU",
    )
    parser.add_argument("--idle-seconds", type=float, default=10.0, help="--whole-stack: idle CPU window")
    parser.add_argument(
        "--threads",
        action="store_true",
        help="print the CPU of stock Sanic's and the edge's threads during their runs (from /proc, per "
        "request), busiest first",
    )
    args = parser.parse_args()
    if args.bare:
        serve_bare()
        return 0
    if args.stock:
        serve_stock(args.stock, args.stock_tls)
        return 0
    load = wrk if shutil.which("wrk") or install_wrk() else httpx_load
    if load is httpx_load:
        print(
            "warning: wrk is not installed (apt-get install -y wrk): the httpx load generator cannot load "
            "either server, so the figures below are its own limits, not theirs",
            file=sys.stderr,
        )
    if args.whole_stack:
        from wholestack import whole_stack

        def start_stock(port: int, tmp: pathlib.Path) -> subprocess.Popen[str]:
            return start("stock", [str(port)], tmp / "stock.log")[0]

        whole_stack(load, args, start_stock, free_port)
        return 0
    full = args.only is None
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="bench_edge_"))
    TLS_DIR = tmp / "tls"
    procs: list[subprocess.Popen[str]] = []
    try:
        target = start_authsvc(tmp, procs)
        stock_port, upstream_port = free_port(), free_port()
        stock, _ = start("stock", [str(stock_port)], tmp / "stock.log")
        procs.append(stock)
        if full:
            # The hotels upstream: the same stock app over HTTPS, the edge's client certificate required.
            tls_stock, _ = start("stock", [str(upstream_port), "--stock-tls", str(TLS_DIR)], tmp / "up.log")
            procs.append(tls_stock)
            bare, pb_ = start("bare", [], tmp / "bare.log")
            procs.append(bare)
        routes = tmp / "routes.json"
        upstream = {"live": f"https://127.0.0.1:{upstream_port}", "sandbox": "builtin"}
        offer_route = {"method": "GET", "path": "/v1/hotels/offers/{offer_id}", "scope": "hotels:read",
                       "upstream": upstream}  # fmt: skip
        routes.write_text(json.dumps({"routes": [offer_route]}))
        # One key at full speed: no per-key limit.
        edge_cmd = [*edge_flags(target, tmp), "--rate-limit-sandbox", "0", "--rate-limit-live", "0",
                    "--live-hosts", LIVE_HOST, "--routes", str(routes)]  # fmt: skip
        e1, p1 = start("edge", edge_cmd, tmp / "edge1.log")
        procs.append(e1)
        _, secret = asyncio.run(make_key(target, ["account:read"]))
        edge_url = f"http://127.0.0.1:{p1['sandbox_port']}/v1/account"
        stock_url = f"http://127.0.0.1:{stock_port}/v1/account"
        headers = {"Host": HOST, "Authorization": f"Svc {secret}"}
        generator = "wrk -t1" if load is wrk else "httpx (separate process)"
        print(
            f"load generator: {generator}, {args.connections} connections, "
            f"{args.seconds:.0f} s per run, best of {args.rounds}, runs alternating"
        )
        print("edge: as scripts/run starts it (mutual TLS to authsvc, metrics on, INFO logs)")
        splits: dict[str, dict[str, list[float]]] = {"stock": {}, "edge": {}} if args.threads else {}
        # The same edge counting no usage (--no-usage-counts): what exact counting costs the cached GET.
        e5, p5 = start("edge", [*edge_cmd, "--no-usage-counts"], tmp / "edge-nocount.log")
        procs.append(e5)
        nocount_url = f"http://127.0.0.1:{p5['sandbox_port']}/v1/account"
        if args.only == "counting":
            counting_only(load, args, [("nocount", e5.pid, nocount_url), ("edge", e1.pid, edge_url)], headers)
            return 0
        if not full:
            cached_only(
                load, args, [("stock", stock.pid, stock_url), ("edge", e1.pid, edge_url)], headers, splits
            )
            return 0
        e2, p2 = start("edge", edge_cmd, tmp / "edge2.log")
        procs.append(e2)
        # The same edge as two workers sharing its ports (--workers 2, SO_REUSEPORT).
        e4, p4 = start("edge", [*edge_cmd, "--workers", "2"], tmp / "edge-workers.log")
        procs.append(e4)
        workers_url = f"http://127.0.0.1:{p4['sandbox_port']}/v1/account"
        worker_pids = [w["pid"] for w in p4["workers"]]
        redis_url = ""
        if args.redis:
            # The last --rate-limit-sandbox wins: so high it never refuses, yet checked in Redis each time.
            limited = [*edge_cmd, "--rate-limit-sandbox", "1000000", "--redis", args.redis,
                       "--redis-prefix", f"bench:{tmp.name}:"]  # fmt: skip
            e3, p3 = start("edge", limited, tmp / "edge-redis.log")
            procs.append(e3)
            redis_url = f"http://127.0.0.1:{p3['sandbox_port']}/v1/account"
        bare_url = f"http://127.0.0.1:{pb_['port']}/v1/account"
        servers: list[tuple[str, int | list[int], str]] = [
            ("stock", stock.pid, stock_url),
            ("bare", bare.pid, bare_url),
            ("edge", e1.pid, edge_url),
            ("workers", worker_pids, workers_url),
        ]
        if redis_url:
            servers.append(("redis", e3.pid, redis_url))
        servers.append(("nocount", e5.pid, nocount_url))
        runs = alternate(load, args, servers, headers, splits)

        s_rps, s_p99, s_us = best(runs, "stock")
        b_rps, b_p99, b_us = best(runs, "bare")
        e_rps, e_p99, e_us = best(runs, "edge")
        print_stock_and_edge((s_rps, s_p99, s_us), (e_rps, e_p99, e_us), (b_rps, b_p99, b_us))
        print(f"ratio edge/edge-proto : {e_rps / b_rps:10.2f}   (the edge's own work, protocol aside)")
        for name, split in splits.items():
            print_thread_split(name, split, sum(r[0] for r in runs[name]) * args.seconds)
        w_rps, w_p99, w_us = best(runs, "workers")
        print(
            f"edge --workers 2      : {w_rps:10.0f} req/s   p99 {w_p99:7.2f} ms   CPU {w_us:5.0f} us/req"
            f"   (1 worker: {e_rps:.0f} req/s; 2/1 = {w_rps / e_rps:.2f}, {os.cpu_count()} cores shared with "
            "the load generator)"
        )
        if redis_url:
            r_rps, r_p99, r_us = best(runs, "redis")
            print(
                f"edge, limits in Redis : {r_rps:10.0f} req/s   p99 {r_p99:7.2f} ms   CPU {r_us:5.0f} us/req"
                "   (--redis)"
            )
            print(f"ratio Redis edge/stock: {r_rps / s_rps:10.2f}")
        print_counting(best(runs, "nocount"), best(runs, "edge"))
        _, live_secret = asyncio.run(make_key(target, ["hotels:read"], live=True))
        live_headers = {"Host": LIVE_HOST, "Authorization": f"Svc {live_secret}"}
        proxied_url = f"http://127.0.0.1:{p1['live_port']}/v1/hotels/offers/off_bench"
        direct_url = f"http://127.0.0.1:{stock_port}/v1/hotels/offers/off_bench"
        load(proxied_url, live_headers, 1, args.connections)
        direct_runs, proxied_runs, upstream_us = [], [], []
        for _ in range(args.rounds):
            direct_runs.append(
                measured(load, stock.pid, direct_url, live_headers, args.seconds, args.connections)
            )
            cpu0 = cpu_seconds(tls_stock.pid)
            run = measured(load, e1.pid, proxied_url, live_headers, args.seconds, args.connections)
            proxied_runs.append(run)
            # The upstream's CPU per proxied request in this same run.
            upstream_us.append((cpu_seconds(tls_stock.pid) - cpu0) / max(1.0, run[0] * args.seconds) * 1e6)
        d_rps, d_p99, _ = max(direct_runs)
        x_rps, x_p99, _ = max(proxied_runs)
        x_us = min(r[2] for r in proxied_runs)
        print(f"stock GET offer direct: {d_rps:10.0f} req/s   p99 {d_p99:7.2f} ms")
        up_us = min(upstream_us)
        print(
            f"edge proxied GET offer: {x_rps:10.0f} req/s   p99 {x_p99:7.2f} ms   CPU {x_us:5.0f} us/req"
            f"   (live host; upstream: stock Sanic over mutual TLS, {up_us:.0f} us/req there)"
        )
        print(
            f"ratio proxied/direct  : {x_rps / d_rps:10.2f}   (goal >= 0.45: the edge adds authentication "
            "and one mutual-TLS hop; direct is plain HTTP, as wrk cannot present a certificate)"
        )
        urls = [edge_url, f"http://127.0.0.1:{p2['sandbox_port']}/v1/account"]
        samples, rpc = asyncio.run(revocation_latency(target, urls, args.revocations))
        ms = [s * 1000 for s in samples]
        rpc_ms = [s * 1000 for s in rpc]
        print(
            f"revocation -> refusal : p50 {pct(ms, 50):6.1f} ms   p99 {pct(ms, 99):6.1f} ms   "
            f"max {max(ms):6.1f} ms "
            f"({len(ms)} samples over 2 edge processes; goal p99 < 100 ms)"
        )
        print(f"                        mean {statistics.mean(ms):.1f} ms")
        print(
            f"  of which RevokeKey   : p50 {pct(rpc_ms, 50):6.1f} ms   p99 {pct(rpc_ms, 99):6.1f} ms "
            "(authsvc committing the revocation, before any watcher can hear of it)"
        )
    finally:
        stop_all(procs, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
