"""``bench_edge.py --whole-stack``: the edge's cached ``GET /v1/account`` while authsvc, webhookd and the
portal run beside it, every service started as ``scripts/run`` starts it (scripts/run_stack.py's own
``services()`` and ``start()``, with the flags it ships, on free ports and a scratch ``var/``), against stock
Sanic ``app.run`` (the baseline, untouched), best of alternating rounds. The one setting changed from what
``scripts/run`` ships: the sandbox per-key limit is off (``EDGE_RATE_LIMIT_SANDBOX=0``), else the load would
measure 429s. Also printed: each service's idle CPU (ms per second, the stack running with no request) and
its threads' wake-ups a second, and each neighbour's CPU while the edge is loaded."""

from __future__ import annotations

import argparse
import asyncio
import os
import pathlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from typing import Any

from loadgen import cpu_seconds, measured, wakeups

LISTENS = (
    "AUTHSVC_LISTEN",
    "WEBHOOKD_LISTEN",
    "PORTAL_LISTEN",
    "EDGE_LIVE_LISTEN",
    "EDGE_SANDBOX_LISTEN",
    "AUTHSVC_METRICS_LISTEN",
    "WEBHOOKD_METRICS_LISTEN",
    "EDGE_METRICS_LISTEN",
    "PORTAL_METRICS_LISTEN",
)


def idle_cpu(pids: dict[str, int], seconds: float) -> dict[str, tuple[float, float]]:
    """Each process's CPU over ``seconds`` of wall time, in ms per second, and its threads' wake-ups a
    second (``loadgen.wakeups``)."""
    before = {name: (cpu_seconds(pid), wakeups(pid)) for name, pid in pids.items()}
    time.sleep(seconds)
    return {
        name: (
            (cpu_seconds(pid) - before[name][0]) / seconds * 1000,
            (wakeups(pid) - before[name][1]) / seconds,
        )
        for name, pid in pids.items()
    }


def whole_stack(
    load: Callable[[str, dict[str, str], float, int], tuple[float, float]],
    args: argparse.Namespace,
    start_stock: Callable[[int, pathlib.Path], subprocess.Popen[str]],
    free_port: Callable[[], int],
) -> None:
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="bench_stack_"))
    saved = {name: os.environ.get(name) for name in (*LISTENS, "EDGE_RATE_LIMIT_SANDBOX")}
    ports = {name: free_port() for name in LISTENS}
    os.environ.update({name: f"127.0.0.1:{port}" for name, port in ports.items()})
    os.environ["EDGE_RATE_LIMIT_SANDBOX"] = "0"
    import run_stack  # after the listen variables: it reads them at import

    run_stack.VAR, run_stack.TLS = tmp, tmp / "tls"
    procs: list[subprocess.Popen[str]] = []
    try:
        from svckit.devca import IDENTITIES, init_dir

        init_dir(run_stack.TLS, IDENTITIES)
        running: list[Any] = []
        for svc in run_stack.services():
            run_stack.start(svc)
            assert svc.proc is not None
            procs.append(svc.proc)
            running.append(svc)
        secret = str(asyncio.run(run_stack.demo_key(running))["secret"])
        stock_port = free_port()
        stock = start_stock(stock_port, tmp)
        procs.append(stock)
        pids = {svc.module: svc.proc.pid for svc in running}
        time.sleep(3)  # start-up work done (first flushes, the first watch round)
        idle = idle_cpu(pids, args.idle_seconds)
        print(
            f"idle CPU over {args.idle_seconds:.0f} s, the stack running and no request (ms per second;"
            " the threads' wake-ups a second):"
        )
        print("  " + "   ".join(f"{name} {ms:.1f} ({woken:.0f})" for name, (ms, woken) in idle.items()))
        sandbox = os.environ["EDGE_SANDBOX_LISTEN"]
        edge_url = f"http://{sandbox}/v1/account"
        stock_url = f"http://127.0.0.1:{stock_port}/v1/account"
        headers = {"Host": sandbox, "Authorization": f"Svc {secret}"}
        for url in (stock_url, edge_url):
            load(url, headers, 1, args.connections)  # warm-up
        rounds = max(3, args.rounds)
        runs: dict[str, list[tuple[float, float, float]]] = {"stock": [], "edge": []}
        neighbours: dict[str, float] = {name: 0.0 for name in pids if name != "edge"}
        for _ in range(rounds):
            runs["stock"].append(
                measured(load, stock.pid, stock_url, headers, args.seconds, args.connections)
            )
            before = {name: cpu_seconds(pids[name]) for name in neighbours}
            runs["edge"].append(
                measured(load, pids["edge"], edge_url, headers, args.seconds, args.connections)
            )
            for name in neighbours:
                neighbours[name] += cpu_seconds(pids[name]) - before[name]
        print(
            f"whole stack (authsvc, webhookd, edge, portal as scripts/run starts them), {rounds} alternating "
            f"rounds of {args.seconds:.0f} s, {args.connections} connections:"
        )
        for name in ("stock", "edge"):
            for rps, p99, us in runs[name]:
                print(f"  {name:<5} run: {rps:10.0f} req/s   p99 {p99:7.2f} ms   CPU {us:5.0f} us/req")
        s_rps, s_p99, _ = max(runs["stock"])
        e_rps, e_p99, _ = max(runs["edge"])
        loaded = rounds * args.seconds
        print(
            "  neighbours' CPU while the edge is loaded (ms per second): "
            + "   ".join(f"{n} {s / loaded * 1000:.1f}" for n, s in neighbours.items())
        )
        print(f"stock Sanic app.run   : {s_rps:10.0f} req/s   p99 {s_p99:7.2f} ms")
        print(f"edge, whole stack     : {e_rps:10.0f} req/s   p99 {e_p99:7.2f} ms")
        print(
            f"ratio edge/stock      : {e_rps / s_rps:10.2f}   (whole stack, best of {rounds}; goal >= 0.90);"
            f" p99 {e_p99 / s_p99:.2f} x stock"
        )
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(tmp, ignore_errors=True)
