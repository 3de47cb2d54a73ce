#!/usr/bin/env python3
"""Benchmark (not a test): legitimate keys under a flood of made-up keys, loopback only, bounded.

One authsvc and one edge process. Each measured request uses a key the edge has never seen (so it costs
one Authorize call: the uncached path), one at a time. Phases, in one run:

1. baseline: no flood;
2. flood of well-formed random keys (right prefix, length and alphabet; the checksum then fails, as it
   does for all but one in 62**6 made-up keys): the edge refuses them without calling authsvc;
3. flood of made-up keys whose checksum holds (an attacker who computes the CRC32): each costs one
   Authorize call and one entry in the bounded denial cache.

The flood comes from a separate process (httpx, ``--flood-connections`` concurrent). Prints p50/p99 of
the legitimate requests per phase, the flood's rate and the edge's resident memory before and after.
Usage: ``.venv/bin/python scripts/bench_keyflood.py [--keys 60] [--flood-connections 32]``.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import pathlib
import subprocess
import sys
import tempfile
import time
from multiprocessing.synchronize import Event

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_edge import HOST, edge_flags, make_key, pct, start, start_authsvc, stop_all  # noqa: E402


def made_up_key(valid_checksum: bool) -> str:
    from svckit.apikeys import checksum
    from svckit.ids import random_base62

    body = "svc_test_" + random_base62(32)
    check = checksum(body) if valid_checksum else random_base62(6)
    return body + check


def _flood(url: str, valid_checksum: bool, conns: int, stop: Event, sent: multiprocessing.Value) -> None:  # type: ignore[type-arg]
    import httpx
    import uvloop

    async def main() -> None:
        limits = httpx.Limits(max_connections=conns, max_keepalive_connections=conns)
        async with httpx.AsyncClient(limits=limits, timeout=10) as c:

            async def one() -> None:
                n = 0
                while not stop.is_set():
                    key = made_up_key(valid_checksum)
                    r = await c.get(url, headers={"Host": HOST, "Authorization": f"Svc {key}"})
                    if r.status_code != 401:
                        raise SystemExit(f"flood got {r.status_code} {r.text}")
                    n += 1
                with sent.get_lock():
                    sent.value += n

            await asyncio.gather(*(one() for _ in range(conns)))

    uvloop.run(main())


async def legitimate_latencies(url: str, secrets: list[str]) -> list[float]:
    import httpx

    out: list[float] = []
    async with httpx.AsyncClient(timeout=10) as c:
        for secret in secrets:
            t = time.perf_counter()
            r = await c.get(url, headers={"Host": HOST, "Authorization": f"Svc {secret}"})
            out.append((time.perf_counter() - t) * 1000)
            if r.status_code != 200:
                raise SystemExit(f"legitimate key got {r.status_code} {r.text}")
    return out


def rss_mib(pid: int) -> float:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def phase(name: str, url: str, secrets: list[str], flood: bool | None, conns: int, pid: int) -> None:
    stop = multiprocessing.Event()
    sent = multiprocessing.Value("l", 0)
    worker = None
    if flood is not None:
        worker = multiprocessing.Process(target=_flood, args=(url, flood, conns, stop, sent))
        worker.start()
        time.sleep(1.0)  # let the flood reach its pace
    t0 = time.perf_counter()
    lat = asyncio.run(legitimate_latencies(url, secrets))
    elapsed = time.perf_counter() - t0
    if worker is not None:
        stop.set()
        worker.join(30)
        elapsed += 1.0
    rate = f"{sent.value / elapsed:7.0f} flood req/s" if worker is not None else " " * 19
    print(
        f"{name:36s}: p50 {pct(lat, 50):7.2f} ms   p99 {pct(lat, 99):7.2f} ms   max {max(lat):7.2f} ms"
        f"   {rate}   edge RSS {rss_mib(pid):6.1f} MiB"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--keys", type=int, default=60, help="legitimate (uncached) keys per phase")
    parser.add_argument("--flood-connections", type=int, default=32)
    args = parser.parse_args()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="bench_keyflood_"))
    procs: list[subprocess.Popen[str]] = []
    try:
        target = start_authsvc(tmp, procs)
        edge, ep = start("edge", edge_flags(target, tmp), tmp / "edge.log")
        procs.append(edge)
        url = f"http://127.0.0.1:{ep['sandbox_port']}/v1/account"
        phases: list[tuple[str, bool | None]] = [
            ("baseline (no flood)", None),
            ("flood, random keys (bad checksum)", False),
            ("flood, random keys (valid checksum)", True),
        ]
        keys = {
            name: [asyncio.run(make_key(target, ["account:read"]))[1] for _ in range(args.keys)]
            for name, _ in phases
        }
        print(
            f"{args.keys} legitimate uncached keys per phase, one request each, sequential; "
            f"flood: {args.flood_connections} connections from a separate process"
        )
        print(f"{'edge at rest':36s}:   edge RSS {rss_mib(edge.pid):6.1f} MiB")
        for name, flood in phases:
            phase(name, url, keys[name], flood, args.flood_connections, edge.pid)
    finally:
        stop_all(procs, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
