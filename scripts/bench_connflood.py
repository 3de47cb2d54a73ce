"""The many-address connection flood of scripts/bench_neighbours.py (``--floods connections``): issue 34's
attack, 100 loopback addresses (127.0.1.1 to 127.0.1.100) each holding ``per_address`` keep-alive
connections (45: 4,500; 50: 5,000) and sending ``GET /v1/account`` with a made-up key whose checksum is
wrong, back to back, reconnecting at once whenever a connection is refused or closed; against the edge,
then against the portal.

The flood runs in its own processes, pinned to one core (``os.sched_setaffinity``); the probe runs in one
process pinned to the other core: a partner's cached-key ``GET /v1/account`` on the edge and a signed-in
owner's page (``GET /live/keys``) on the portal, each on its own keep-alive connection from 127.0.0.1,
in turn. Quiet and flooded blocks alternate (``rounds``); the services themselves are not pinned. Prints,
per flood: both probes' p50/p99 quiet and flooded and their ratio (goal: p99 within 2x quiet), every
answer the probes got by status, what the flood's attempts got (by status, or "reset"/"refused" when the
connection ended without an answer), and the edge's and portal's RSS quiet and flooded.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import time
from collections import Counter
from multiprocessing.synchronize import Event
from typing import Any

ADDRESSES = [f"127.0.1.{i}" for i in range(1, 101)]
BAD_KEY = "svc_test_" + "a" * 32 + "xxxxxx"  # its checksum fails: refused by the edge alone


def _pin(core: int) -> int:
    """Pins this process to ``core`` (of those it may use); the core, or -1 with a single core."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        return -1
    chosen = cores[core % len(cores)]
    os.sched_setaffinity(0, {chosen})
    return chosen


def _flood(
    port: int, host: str, addresses: list[str], per_address: int, stop: Event, ready: Any, got: Any
) -> None:
    """``per_address`` connections from each address, sending the made-up key back to back until
    ``stop``; what each attempt got is added to ``got`` (a shared dict) at the end."""
    _pin(1)
    import uvloop

    request = (f"GET /v1/account HTTP/1.1\r\nHost: {host}\r\nAuthorization: Svc {BAD_KEY}\r\n\r\n").encode()
    seen: Counter[str] = Counter()

    async def one(address: str) -> None:
        while not stop.is_set():
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(address, 0))
            except OSError:
                seen["refused"] += 1
                await asyncio.sleep(0.01)
                continue
            try:
                while not stop.is_set():
                    writer.write(request)
                    head = await reader.readuntil(b"\r\n\r\n")
                    seen[head[9:12].decode()] += 1
                    lower = head.lower()
                    at = lower.find(b"content-length:")
                    if at >= 0:
                        await reader.readexactly(int(lower[at + 15 : lower.find(b"\r\n", at)]))
                    if b"connection: close" in lower:
                        break
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                seen["reset"] += 1
            finally:
                writer.close()

    async def main() -> None:
        tasks = [asyncio.ensure_future(one(a)) for a in addresses for _ in range(per_address)]
        ready.set()
        await asyncio.to_thread(stop.wait)
        await asyncio.wait(tasks, timeout=5)
        for t in tasks:
            t.cancel()

    uvloop.run(main())
    for k, v in seen.items():
        got[k] = got.get(k, 0) + v


def _probe(
    edge_url: str, edge_host: str, key: str, portal_url: str, cookie: str, samples: int, out: Any
) -> None:
    """In its own process on core 0: ``samples`` partner requests and ``samples // 2`` owner pages, in
    turn; milliseconds and statuses into ``out``."""
    _pin(0)
    import httpx

    async def main() -> None:
        partner_ms, page_ms, statuses = [], [], Counter[str]()
        async with (
            httpx.AsyncClient(timeout=60) as partner,
            httpx.AsyncClient(timeout=60, headers={"Cookie": cookie}) as owner,
        ):
            for i in range(samples):
                t = time.perf_counter()
                r = await partner.get(
                    f"{edge_url}/v1/account", headers={"Host": edge_host, "Authorization": f"Svc {key}"}
                )
                partner_ms.append((time.perf_counter() - t) * 1000)
                statuses[f"edge {r.status_code}"] += 1
                if i % 2:
                    t = time.perf_counter()
                    r = await owner.get(f"{portal_url}/live/keys")
                    page_ms.append((time.perf_counter() - t) * 1000)
                    statuses[f"portal {r.status_code}"] += 1
        out["partner"], out["page"], out["statuses"] = partner_ms, page_ms, dict(statuses)

    asyncio.run(main())


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))] if ordered else 0.0


def run(
    target: str,
    port: int,
    host: str,
    per_address: int,
    probe: tuple[str, str, str, str, str],
    pids: dict[str, int],
    samples: int,
    rounds: int,
    warmup: float,
    processes: int = 2,
) -> None:
    """One flood of ``target`` (``port``, ``host``), ``per_address`` connections per address, measured
    in ``rounds`` quiet and flooded blocks in turn; prints its line."""
    manager = multiprocessing.Manager()
    blocks: dict[str, dict[str, list[float]]] = {b: {"partner": [], "page": []} for b in ("quiet", "flood")}
    statuses: dict[str, Counter[str]] = {"quiet": Counter(), "flood": Counter()}
    rss: dict[tuple[str, str], list[float]] = {(b, s): [] for b in ("quiet", "flood") for s in pids}
    got = manager.dict()
    for _ in range(rounds):
        for block in ("quiet", "flood"):
            stop = multiprocessing.Event()
            floods = []
            if block == "flood":
                share = len(ADDRESSES) // processes
                for i in range(processes):
                    ready = multiprocessing.Event()
                    p = multiprocessing.Process(
                        target=_flood,
                        args=(
                            port,
                            host,
                            ADDRESSES[i * share : (i + 1) * share],
                            per_address,
                            stop,
                            ready,
                            got,
                        ),
                    )
                    p.start()
                    ready.wait(60)
                    floods.append(p)
                time.sleep(warmup)
            out = manager.dict()
            prober = multiprocessing.Process(target=_probe, args=(*probe, samples, out))
            prober.start()
            prober.join()
            for service, pid in pids.items():
                rss[block, service].append(rss_mb(pid))
            stop.set()
            for p in floods:
                p.join(60)
            blocks[block]["partner"] += out["partner"]
            blocks[block]["page"] += out["page"]
            statuses[block].update(out["statuses"])
            time.sleep(1.0)  # what the flood left open is closed before a quiet block
    line = f"{target} {len(ADDRESSES)}x{per_address} ({len(ADDRESSES) * per_address} conns)"
    for what, label in (("partner", "partner cached"), ("page", "owner page")):
        q, f = blocks["quiet"][what], blocks["flood"][what]
        ratio = pct(f, 99) / pct(q, 99) if q else 0.0
        line += (
            f" | {label} p50/p99 quiet {pct(q, 50):6.2f}/{pct(q, 99):6.2f} flooded {pct(f, 50):6.2f}/"
            f"{pct(f, 99):7.2f} ms, p99 x{ratio:4.2f} {'ok' if ratio <= 2 else 'OVER 2x'}"
        )
    for block in ("quiet", "flood"):
        line += f" | {block} answers " + ", ".join(f"{k}: {n}" for k, n in sorted(statuses[block].items()))
    line += " | flood got " + ", ".join(f"{k}: {n}" for k, n in sorted(got.items()))
    for service in pids:
        line += f" | {service} RSS first quiet {rss['quiet', service][0]:.0f} MB"
        line += f", flooded {max(rss['flood', service]):.0f} MB"
    print(line, flush=True)
    manager.shutdown()
