#!/usr/bin/env python3
"""Benchmark authsvc's Authorize (a benchmark, not a test).

Starts ``python -m authsvc serve`` on a temporary SQLite file on loopback, creates an account and a
key, then runs N concurrent callers of Authorize over gRPC for a fixed time and prints throughput,
p50/p99 latency and the server process's CPU per call. In the same run, alternating with it, the same
client calls a bare grpc.aio servicer (another process, no interceptors) that answers the very
AuthorizeResponse authsvc gave: the ratio of the two is the cost of authsvc's own work (goal >= 0.90).
Last, the cost of the pure decision function. Stops by itself.

    .venv/bin/python scripts/bench_auth.py [--concurrency 16] [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import json
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import timeit

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import grpc  # noqa: E402
from loadgen import cpu_seconds  # noqa: E402

from authsvc import AccessRequest, KeyGrant, authorize  # noqa: E402
from authsvc._model import Account, ApiKey  # noqa: E402
from travel.auth.v1 import auth_pb2 as pb  # noqa: E402
from travel.auth.v1 import auth_pb2_grpc  # noqa: E402


def _ready_port(proc: subprocess.Popen[str], what: str) -> int:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("READY "):
            return int(json.loads(line[6:])["grpc_port"])
    raise SystemExit(f"{what} did not start")


def start_authsvc(db: pathlib.Path) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "authsvc",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "",
            "--log-level",
            "WARNING",
            "--insecure-dev",
            "--database",
            f"sqlite+aiosqlite:///{db}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    return proc, _ready_port(proc, "authsvc")


def start_bare(answer: bytes) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, __file__, "--bare", answer.hex()],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    return proc, _ready_port(proc, "the bare servicer")


def serve_bare(answer_hex: str) -> None:
    """A grpc.aio AuthService whose Authorize answers one fixed message: the floor for Authorize."""
    import uvloop

    answer = pb.AuthorizeResponse.FromString(bytes.fromhex(answer_hex))

    class Bare(auth_pb2_grpc.AuthServiceServicer):
        async def Authorize(self, request: pb.AuthorizeRequest, context: object) -> pb.AuthorizeResponse:
            return answer

    async def serve() -> None:
        server = grpc.aio.server()
        auth_pb2_grpc.add_AuthServiceServicer_to_server(Bare(), server)  # type: ignore[abstract]
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        print("READY " + json.dumps({"grpc_port": port}), flush=True)
        await server.wait_for_termination()

    uvloop.run(serve())


async def make_request(port: int) -> pb.AuthorizeRequest:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = auth_pb2_grpc.AuthServiceStub(channel)
        actor = pb.Actor(user="bench")
        account = (await stub.CreateAccount(pb.CreateAccountRequest(name="Bench", actor=actor))).account
        key = await stub.CreateKey(
            pb.CreateKeyRequest(
                account_id=account.id,
                environment=pb.ENVIRONMENT_LIVE,
                scopes=["hotels:read"],
                allowed_sources=["127.0.0.0/8", "::1"],
                actor=actor,
            )
        )
        return pb.AuthorizeRequest(
            api_key=key.secret,
            environment=pb.ENVIRONMENT_LIVE,
            required_scope="hotels:read",
            source_address="127.0.0.1",
        )


@dataclasses.dataclass
class Run:
    calls: int
    latencies: list[float]
    elapsed: float
    cpu: float  # server process CPU seconds during the run

    @property
    def rate(self) -> float:
        return self.calls / self.elapsed

    def quantile(self, q: int) -> float:
        return statistics.quantiles(self.latencies, n=100)[q - 1]


async def bench_grpc(
    port: int, pid: int, request: pb.AuthorizeRequest, concurrency: int, seconds: float
) -> tuple[Run, bytes]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = auth_pb2_grpc.AuthServiceStub(channel)
        for _ in range(50):  # warm up: connection, cache
            answer = await stub.Authorize(request)
            assert answer.decision == pb.DECISION_ALLOW
        latencies: list[float] = []
        deadline = time.perf_counter() + seconds

        async def caller() -> None:
            while time.perf_counter() < deadline:
                t0 = time.perf_counter()
                resp = await stub.Authorize(request)
                latencies.append(time.perf_counter() - t0)
                assert resp.decision == pb.DECISION_ALLOW

        cpu0 = cpu_seconds(pid)
        start = time.perf_counter()
        await asyncio.gather(*[caller() for _ in range(concurrency)])
        elapsed = time.perf_counter() - start
        cpu = cpu_seconds(pid) - cpu0
    return Run(len(latencies), latencies, elapsed, cpu), answer.SerializeToString()


def bench_decision() -> float:
    now = dt.datetime.now(dt.UTC)
    account = Account("acct_x", "B", "a", "active", (), 10, now, now)
    key = ApiKey(
        "key_x",
        "acct_x",
        "live",
        "k",
        ("hotels:read", "esim:read"),
        ("10.0.0.0/8", "2001:db8::/32"),
        "h",
        "0" * 64,
        now,
    )
    grant = KeyGrant.of(key, account)
    request = AccessRequest("live", "hotels:read", "10.1.2.3", False)
    assert authorize(grant, request, now).allowed
    n = 100_000
    return min(timeit.repeat(lambda: authorize(grant, request, now), number=n, repeat=3)) / n * 1e9


def main() -> int:
    if sys.argv[1:2] == ["--bare"]:
        serve_bare(sys.argv[2])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=2, help="alternating authsvc/bare runs (best of)")
    args = parser.parse_args()
    if not 1 <= args.concurrency <= 256 or not 0 < args.seconds <= 60 or not 1 <= args.rounds <= 10:
        raise SystemExit("--concurrency 1..256, --seconds up to 60, --rounds 1..10")
    procs: list[subprocess.Popen[str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            proc, port = start_authsvc(pathlib.Path(tmp) / "bench.db")
            procs.append(proc)
            request = asyncio.run(make_request(port))
            _, answer = asyncio.run(bench_grpc(port, proc.pid, request, args.concurrency, 1))
            bare, bare_port = start_bare(answer)
            procs.append(bare)
            asyncio.run(bench_grpc(bare_port, bare.pid, request, args.concurrency, 1))
            auth_runs: list[Run] = []
            bare_runs: list[Run] = []
            for _ in range(args.rounds):
                auth_runs.append(
                    asyncio.run(bench_grpc(port, proc.pid, request, args.concurrency, args.seconds))[0]
                )
                bare_runs.append(
                    asyncio.run(bench_grpc(bare_port, bare.pid, request, args.concurrency, args.seconds))[0]
                )
        finally:
            for p in procs:
                p.send_signal(signal.SIGTERM)
            for p in procs:
                p.wait(15)
    ns = bench_decision()
    a = max(auth_runs, key=lambda r: r.rate)
    b = max(bare_runs, key=lambda r: r.rate)
    a_us = min(r.cpu / r.calls for r in auth_runs) * 1e6
    b_us = min(r.cpu / r.calls for r in bare_runs) * 1e6

    def describe(run: Run) -> str:
        return (
            f"{run.rate:8,.0f} calls/s  p50 {run.quantile(50) * 1000:5.2f} ms  "
            f"p99 {run.quantile(99) * 1000:5.2f} ms"
        )

    rows = [
        (
            "Authorize over gRPC (loopback)",
            f"{args.concurrency} callers, best of {args.rounds} runs of {args.seconds:.0f} s",
        ),
        ("  authsvc Authorize", describe(a)),
        ("  bare grpc.aio servicer", describe(b)),
        ("  ratio authsvc/bare", f"{a.rate / b.rate:8.2f}  (goal >= 0.90)"),
        ("  server CPU per call", f"authsvc {a_us:,.0f} us, bare {b_us:,.0f} us (ratio {b_us / a_us:.2f})"),
        ("authorize() pure decision", f"{ns:,.0f} ns/call"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  value")
    print(f"{'-' * width}  {'-' * 60}")
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
