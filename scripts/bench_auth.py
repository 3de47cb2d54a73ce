#!/usr/bin/env python3
"""Benchmark authsvc's Authorize (a benchmark, not a test).

Starts ``python -m authsvc serve`` on a temporary SQLite file on loopback, creates an account and a
key, then runs N concurrent callers of Authorize over gRPC for a fixed time and prints throughput and
p50/p99 latency, followed by the cost of the pure decision function. Stops by itself.

    .venv/bin/python scripts/bench_auth.py [--concurrency 16] [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
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

import grpc  # noqa: E402

from authsvc import AccessRequest, KeyGrant, authorize  # noqa: E402
from authsvc._model import Account, ApiKey  # noqa: E402
from travel.auth.v1 import auth_pb2 as pb  # noqa: E402
from travel.auth.v1 import auth_pb2_grpc  # noqa: E402


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
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("READY "):
            return proc, int(json.loads(line[6:])["grpc_port"])
    raise SystemExit("authsvc did not start")


async def bench_grpc(port: int, concurrency: int, seconds: float) -> tuple[int, list[float], float]:
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
        request = pb.AuthorizeRequest(
            api_key=key.secret,
            environment=pb.ENVIRONMENT_LIVE,
            required_scope="hotels:read",
            source_address="127.0.0.1",
        )
        for _ in range(50):  # warm up: connection, cache
            assert (await stub.Authorize(request)).decision == pb.DECISION_ALLOW
        latencies: list[float] = []
        deadline = time.perf_counter() + seconds

        async def caller() -> None:
            while time.perf_counter() < deadline:
                t0 = time.perf_counter()
                resp = await stub.Authorize(request)
                latencies.append(time.perf_counter() - t0)
                assert resp.decision == pb.DECISION_ALLOW

        start = time.perf_counter()
        await asyncio.gather(*[caller() for _ in range(concurrency)])
        elapsed = time.perf_counter() - start
    return len(latencies), latencies, elapsed


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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    if not 1 <= args.concurrency <= 256 or not 0 < args.seconds <= 60:
        raise SystemExit("--concurrency 1..256, --seconds up to 60")
    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start_authsvc(pathlib.Path(tmp) / "bench.db")
        try:
            calls, latencies, elapsed = asyncio.run(bench_grpc(port, args.concurrency, args.seconds))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(15)
    ns = bench_decision()
    q = statistics.quantiles(latencies, n=100)
    rows = [
        ("Authorize over gRPC (loopback)", f"{args.concurrency} callers, {elapsed:.1f} s, {calls} calls"),
        ("  throughput", f"{calls / elapsed:,.0f} calls/s"),
        ("  latency p50", f"{q[49] * 1000:.2f} ms"),
        ("  latency p99", f"{q[98] * 1000:.2f} ms"),
        ("authorize() pure decision", f"{ns:,.0f} ns/call"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  value")
    print(f"{'-' * width}  {'-' * 40}")
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
