#!/usr/bin/env python3
"""Benchmark (not a test): durable signed webhook deliveries per second from webhookd's delivery worker
(SQLite, group commits, keep-alive HTTPS) to a local HTTPS receiver, and the lag between an attempt's
due time and its send. Loopback only, bounded, stops by itself.

    .venv/bin/python scripts/bench_webhooks.py [--deliveries 40000] [--lag-deliveries 3000] [--lag-rate 300]

Calibration, in the same run (the machine is shared and noisy: compare ratios): plain signed POSTs with
nothing stored, over the same keep-alive transport to the same receiver; one-row SQLite commits.
Phase 0 (storage ceiling): the worker with a sender that signs but does not send.
Floor (``--only floor``): the least a durable delivery costs here, a bare loop with webhookd's statements and
the same POST and nothing else (``benchwebhooks.floor``), against plain POSTs of the same run.
Phase 1 (throughput): N deliveries are due at once; the worker claims them in cycles, signs and POSTs
each over a pooled TLS connection, and commits the attempt rows and delivery updates in group commits.
A delivery counts when its result is committed (durable). Phase 2 (lag): deliveries come due at a steady
rate (below capacity); for each send we record send time minus due time. Then the same burst through the
real service (``python -m webhookd serve`` as a process on a preloaded file, counted by polling the table).
Isolation (``--hostile N``, 0 skips it): the burst and the lag phase again, with another account's N endpoints
that drip their answer a byte a second and N that take the request and never answer (``webhookd.testing.
Hostile``, in a process of their own) holding deliveries due over the same span: the healthy endpoint's lag
p99 and throughput with and without them (goal: p99 under 100 ms, throughput within 10 %).
The receiver runs in its own process (trustme certificate, HTTP/1.1 keep-alive, answers 200).
Brokers (``--broker-deliveries N``, 0 skips them): durable deliveries/s to RabbitMQ and to NATS JetStream
(amqp and nats destinations) against a plain publish loop to the same broker (aio-pika with publisher
confirms; nats-py JetStream publish) in the same run, the ratio printed.

This file starts the receivers and runs the phases of ``benchwebhooks.phases.PHASES`` in order (a new phase
goes there); the pieces are in scripts/benchwebhooks/.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import multiprocessing as mp
import pathlib
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import trustme  # noqa: E402
from benchwebhooks.phases import PHASES, Bench  # noqa: E402
from benchwebhooks.receivers import hostile_process, receiver_process  # noqa: E402
from benchwebhooks.report import print_tables  # noqa: E402

from svckit.runner import freeze_startup  # noqa: E402
from webhookd._delivery import WorkerConfig  # noqa: E402


async def main_async(args: argparse.Namespace) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    ctx = mp.get_context("spawn")
    port_q: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
    stop = ctx.Event()
    proc = ctx.Process(
        target=receiver_process,
        args=(cert.cert_chain_pems[0].bytes(), cert.private_key_pem.bytes(), port_q, stop),
        daemon=True,
    )
    proc.start()
    port = port_q.get(timeout=30)
    hostile_q: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
    hostile_proc = ctx.Process(
        target=hostile_process,
        args=(cert.cert_chain_pems[0].bytes(), cert.private_key_pem.bytes(), hostile_q, stop),
        daemon=True,
    )
    hostile: list[str] = []
    if args.hostile:
        hostile_proc.start()
        drip_port, hang_port = hostile_q.get(timeout=30)
        hostile = [f"https://127.0.0.1:{drip_port}/drip/{i}" for i in range(args.hostile)]
        hostile += [f"https://127.0.0.1:{hang_port}/hang/{i}" for i in range(args.hostile)]
    cfg = WorkerConfig(
        batch_size=args.batch_size, concurrency=args.concurrency, lease_seconds=60, poll_seconds=0.25
    )
    freeze_startup()  # this process runs the worker: started, as webhookd's own start-up does before READY
    with tempfile.TemporaryDirectory() as d:
        ca_path = f"{d}/ca.pem"
        ca.cert_pem.write_to_path(ca_path)
        bench = Bench(args, port, ca_path, d, cfg, hostile)
        try:
            for phase in PHASES:
                if phase.enabled(args) and (not args.only or phase.name in args.only):
                    await phase.run(bench)
        finally:
            stop.set()
            received, receiver_cpu = port_q.get(timeout=30)
            proc.join(10)
            if hostile:
                drips, hangs = hostile_q.get(timeout=30)
                bench.rows.append(("  requests the dripping / silent receivers took", f"{drips} / {hangs}"))
                hostile_proc.join(10)
    bench.rows.append(("requests the receiver answered (all phases)", f"{received}"))
    if received:
        bench.rows.append(
            ("  receiver CPU per request (its own process)", f"{receiver_cpu / received * 1e6:,.0f} µs")
        )
    print_tables(bench)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deliveries", type=int, default=40000)
    parser.add_argument("--trials", type=int, default=3, help="alternating plain/durable bursts; medians")
    parser.add_argument("--lag-deliveries", type=int, default=3000)
    parser.add_argument("--lag-rate", type=float, default=300.0, help="deliveries coming due per second")
    parser.add_argument(
        "--postgres",
        metavar="URL",
        help="also run the burst on PostgreSQL (a scratch schema in this database), e.g. "
        "postgresql+asyncpg://postgres@127.0.0.1:5432/test",
    )
    parser.add_argument(
        "--pg-processes", type=int, default=2, help="worker processes sharing the PostgreSQL burst"
    )
    parser.add_argument(
        "--pg-endpoints",
        type=int,
        default=8,
        help="endpoints the PostgreSQL burst goes to in turn (one takes at most per_endpoint sends in flight"
        " per process; a burst to one endpoint is measured beside it)",
    )
    parser.add_argument(
        "--hostile",
        type=int,
        default=10,
        help="dripping and silent endpoints, each, in the isolation phase (0: skip)",
    )
    parser.add_argument(
        "--hostile-deliveries", type=int, default=20, help="deliveries due per hostile endpoint"
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=[phase.name for phase in PHASES],
        help="run only this phase (repeatable), e.g. --only postgres to iterate on PostgreSQL",
    )
    parser.add_argument(
        "--broker-deliveries",
        type=int,
        default=10000,
        help="deliveries per trial of the amqp and nats phases (RabbitMQ 127.0.0.1:5672, NATS 127.0.0.1:4222;"
        " 0 skips them)",
    )
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=200)
    args = parser.parse_args()
    logging.getLogger("webhookd").setLevel(logging.ERROR)  # the hostile phase's breaker warnings are expected
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(main_async(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
