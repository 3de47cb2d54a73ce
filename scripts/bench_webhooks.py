#!/usr/bin/env python3
"""Benchmark (not a test): durable signed webhook deliveries per second from webhookd's delivery worker
(SQLite, group commits, keep-alive HTTPS) to a local HTTPS receiver, and the lag between an attempt's
due time and its send. Loopback only, bounded, stops by itself.

    .venv/bin/python scripts/bench_webhooks.py [--deliveries 40000] [--lag-deliveries 3000] [--lag-rate 300]

Calibration, in the same run (the machine is shared and noisy: compare ratios): plain signed POSTs with
nothing stored, over the same keep-alive transport to the same receiver; one-row SQLite commits.
Phase 0 (storage ceiling): the worker with a sender that signs but does not send.
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
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import logging
import multiprocessing as mp
import os
import pathlib
import sqlite3
import ssl
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import trustme

from svckit.clock import SystemClock
from svckit.db import create_engine
from svckit.ids import new_id, sortable_id
from svckit.signing import new_secret, sign
from svckit.webhook_status import EndpointStatus
from webhookd._admission import NO_SKIPS
from webhookd._delivery import DeliveryWorker, WorkerConfig
from webhookd._events import Environment, build_envelope
from webhookd._repository import EndpointRecord, SigningSecret
from webhookd._retry import Outcome
from webhookd._sender import Sender, SendResult
from webhookd._server import Config, make_client, make_transport
from webhookd._sql import SqlRepository, deliveries, events
from webhookd._ssrf import Policy
from webhookd._times import us
from webhookd.testing import Hostile, Receiver

ACCT, ENV = "acct_bench", "live"
HOSTILE_ACCT = "acct_hostile"


def _server_ctx(cert_pem: bytes, key_pem: bytes) -> ssl.SSLContext:
    with tempfile.TemporaryDirectory() as d:
        cert, key = pathlib.Path(d, "c.pem"), pathlib.Path(d, "k.pem")
        cert.write_bytes(cert_pem)
        key.write_bytes(key_pem)
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(cert, key)
    return ctx


def _hostile_process(cert_pem: bytes, key_pem: bytes, port_q: Any, stop: Any) -> None:
    """The isolation phase's hostile receivers: one that drips (a byte a second), one that never answers."""
    ctx = _server_ctx(cert_pem, key_pem)
    drip, hang = Hostile("drip", ctx).start(), Hostile("hang", ctx).start()
    port_q.put((drip.port, hang.port))
    stop.wait(600)
    port_q.put((drip.requests, hang.requests))
    drip.stop()
    hang.stop()


def _receiver_process(cert_pem: bytes, key_pem: bytes, port_q: mp.Queue, stop: mp.Event) -> None:  # type: ignore[type-arg]
    ctx = _server_ctx(cert_pem, key_pem)
    factory = asyncio.new_event_loop
    try:
        import uvloop

        factory = uvloop.new_event_loop
    except ImportError:
        pass
    r = Receiver(ctx, record=False, loop_factory=factory).start()
    port_q.put(r.port)
    stop.wait(600)
    port_q.put((r.count, time.process_time()))
    r.stop()


def _envelope(event_id: str, now: dt.datetime) -> bytes:
    """A typical booking.confirmed event body (about 300 bytes)."""
    return build_envelope(
        event_id=event_id, kind="booking.confirmed", created=now, environment=Environment.LIVE,
        account_id=ACCT, state="confirmed", data={"booking_id": new_id("bk"), "amount": 12345},
    )  # fmt: skip


def _config(ca_path: str, worker: WorkerConfig | None = None) -> Config:
    """The worker's config for the bench: loopback targets allowed, the receiver's CA trusted."""
    config = Config(policy=Policy(allow_private=True), worker=worker or WorkerConfig())
    config.ca_bundle = ca_path
    return config


async def _preload(
    repo: SqlRepository, endpoint_id: str, due: list[dt.datetime], account: str = ACCT
) -> None:
    now = dt.datetime.now(dt.UTC)
    ev_rows, del_rows = [], []
    for when in due:
        eid = sortable_id("evt", now)
        body = _envelope(eid, now)
        ev_rows.append(
            {
                "id": eid,
                "account_id": account,
                "environment": ENV,
                "type": "booking.confirmed",
                "state": "confirmed",
                "created_at": us(now),
                "envelope": body,
                "idempotency_key": None,
            }
        )
        del_rows.append({"id": sortable_id("msg", now), "event_id": eid, "endpoint_id": endpoint_id,
                         "account_id": account, "environment": ENV, "event_type": "booking.confirmed",
                         "status": "pending", "attempt_count": 0, "schedule_count": 0, "due_at": us(when),
                         "next_attempt_at": us(when), "lease_owner": None, "created_at": us(now),
                         "updated_at": us(now)})  # fmt: skip
    async with repo.engine.begin() as conn:
        for i in range(0, len(ev_rows), 5000):
            await conn.execute(events.insert(), ev_rows[i : i + 5000])
            await conn.execute(deliveries.insert(), del_rows[i : i + 5000])


def _endpoint(port: int, url: str = "", account: str = ACCT) -> EndpointRecord:
    """The one endpoint every delivery goes to: the receiver on ``port`` (or ``url``)."""
    now = dt.datetime.now(dt.UTC)
    return EndpointRecord(
        id=new_id("we"), account_id=account, environment=ENV, url=url or f"https://127.0.0.1:{port}/hook",
        events=["booking.confirmed"], description="bench", status=EndpointStatus.ENABLED, disabled_reason="",
        created_at=now, updated_at=now, secrets=[SigningSecret(new_secret())],
    )  # fmt: skip


class CountingRepo(SqlRepository):
    """Counts deliveries whose result is committed (only the attempts to endpoint ``only`` when it is set)."""

    committed = 0
    done: asyncio.Event
    only: str | None = None

    async def record_and_claim(self, outcomes, owner, now, limit, lease_until, skips=NO_SKIPS):  # type: ignore[no-untyped-def,override]
        out = await super().record_and_claim(outcomes, owner, now, limit, lease_until, skips)
        only = self.only
        CountingRepo.committed += (
            len(outcomes)
            if only is None
            else sum(1 for o in outcomes if o.endpoint_id == only and o.attempt is not None)
        )
        if CountingRepo.committed >= self.target:
            self.done.set()
        return out


class NullSender:
    """Signs and answers 200 without any network: isolates claim + sign + group commit."""

    async def send(
        self, url: str, body: bytes, secrets: list[str], event_id: str, now: dt.datetime, *_scheme: object
    ) -> SendResult:
        header = sign(secrets, body, now)
        await asyncio.sleep(0)
        return SendResult(Outcome.SUCCEEDED, 200, "ok", {"X-Service-Signature": header}, 0.0, "")


async def _phase(
    db: str,
    port: int,
    ca_path: str,
    due: list[dt.datetime],
    cfg: WorkerConfig,
    limit_s: float,
    network: bool = True,
    hostile: Sequence[str] = (),
    per_hostile: int = 0,
) -> tuple[float, list[float], int, float, float, dict[str, float]]:
    """``hostile``: URLs of another account's endpoints, each with ``per_hostile`` deliveries due over the
    span of ``due``; then only the healthy endpoint's deliveries are counted and its lags kept."""
    steady = due[0] > dt.datetime.now(dt.UTC)  # the lag phase: deliveries come due from a start ahead
    repo = await CountingRepo.open(db)
    assert isinstance(repo, CountingRepo)
    ep = _endpoint(port)
    await repo.create_endpoint(ep)
    heps = [_endpoint(port, url, HOSTILE_ACCT) for url in hostile]
    for hep in heps:
        await repo.create_endpoint(hep)
    late = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1) - due[0]
    if steady and late > dt.timedelta(0):  # creating the endpoints ate the head start: keep one second
        due = [d + late for d in due]
    await _preload(repo, ep.id, due)
    span = due[-1] - due[0]
    for hep in heps:
        spread = [due[0] + span * k / per_hostile for k in range(per_hostile)]
        await _preload(repo, hep.id, spread, HOSTILE_ACCT)
    repo.only = ep.id if hostile else None
    CountingRepo.committed = 0
    repo.target = len(due)  # type: ignore[attr-defined]
    repo.done = asyncio.Event()
    config = _config(ca_path, cfg)
    transport = make_transport(config)
    client = make_client(config, transport)
    lags: list[float] = []
    sender: Any = Sender(client, direct=transport) if network else NullSender()

    def on_sent(claim: Any, lag: float) -> None:
        if claim.delivery.endpoint_id == ep.id:
            lags.append(lag)

    worker = DeliveryWorker(repo, sender, SystemClock(), cfg, on_sent=on_sent)
    start = time.perf_counter()
    cpu_start, loop_start = time.process_time(), time.thread_time()
    threads_start = _thread_cpu()
    task = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(repo.done.wait(), limit_s)
    except TimeoutError:
        print(f"  (stopped after {limit_s:.0f} s with {CountingRepo.committed}/{len(due)} committed)")
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    loop_busy = (time.thread_time() - loop_start) / elapsed
    committed = CountingRepo.committed
    by_thread = {k: v - threads_start.get(k, 0.0) for k, v in _thread_cpu().items()}
    await worker.stop(1.0)
    await task
    await client.aclose()
    await repo.close()
    return elapsed, lags, committed, cpu, loop_busy, by_thread


async def _plain_posts(port: int, ca_path: str, n: int, concurrency: int) -> float:
    """Calibration: signed POSTs over the same keep-alive transport, nothing stored. Requests/s."""
    transport = make_transport(_config(ca_path))
    url = f"https://127.0.0.1:{port}/hook"
    secrets = [new_secret()]
    now = dt.datetime.now(dt.UTC)
    body = _envelope(new_id("evt"), now)
    left = n

    async def one_connection() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            headers = {"Content-Type": "application/json", "X-Service-Signature": sign(secrets, body, now)}
            status, _headers, _body = await transport.post(url, headers, body)
            assert status == 200, status

    start = time.perf_counter()
    await asyncio.gather(*(one_connection() for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    await transport.aclose()
    return n / elapsed


def _sqlite_commits(path: str, seconds: float = 2.0) -> float:
    """Calibration: one-row transactions per second on a SQLite WAL file (synchronous=NORMAL)."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE t (id TEXT PRIMARY KEY, v BLOB)")
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO t VALUES (?, ?)", (new_id("x"), b"x" * 200))
        db.execute("COMMIT")
        n += 1
    elapsed = time.perf_counter() - start
    db.close()
    return n / elapsed


def _thread_cpu() -> dict[str, float]:
    """CPU seconds so far of each thread of this process, by thread name (Linux /proc)."""
    out: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    names = {str(t.native_id): t.name for t in threading.enumerate()}
    for task in pathlib.Path("/proc/self/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        name = "event loop" if task.name == str(os.getpid()) else names.get(task.name, "other")
        name = name.rstrip("_0123456789").removesuffix(" (_connection_worker_thread)")
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def _pg_worker_process(
    url: str, ca_path: str, cfg: WorkerConfig, lag_endpoint: str, ready: Any, go: Any, burst_done: Any,
    stop: Any, out_q: Any,
) -> None:  # fmt: skip
    """One webhookd delivery worker in a process of its own, on the shared PostgreSQL schema."""
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(_pg_worker(url, ca_path, cfg, lag_endpoint, ready, go, burst_done, stop, out_q))


async def _pg_worker(
    url: str, ca_path: str, cfg: WorkerConfig, lag_endpoint: str, ready: Any, go: Any, burst_done: Any,
    stop: Any, out_q: Any,
) -> None:  # fmt: skip
    repo = SqlRepository(create_engine(url))  # the parent migrated the schema
    config = _config(ca_path, cfg)
    transport = make_transport(config)
    client = make_client(config, transport)
    lags: list[float] = []

    def on_sent(claim: Any, lag: float) -> None:
        if claim.delivery.endpoint_id == lag_endpoint:
            lags.append(lag)

    worker = DeliveryWorker(repo, Sender(client, direct=transport), SystemClock(), cfg, on_sent=on_sent)
    ready.release()
    await asyncio.to_thread(go.wait)
    cpu0 = time.process_time()
    task = asyncio.create_task(worker.run())
    await asyncio.to_thread(burst_done.wait)
    cpu_burst = time.process_time() - cpu0
    await asyncio.to_thread(stop.wait)
    await worker.stop(1.0)
    await task
    await client.aclose()
    await repo.close()
    out_q.put((cpu_burst, lags))


def _postgres_server_cpu() -> float:
    """CPU seconds so far of the local PostgreSQL server's processes (Linux /proc; 0 if not visible)."""
    total, tick = 0.0, os.sysconf("SC_CLK_TCK")
    for proc in pathlib.Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        if stat[stat.index("(") + 1 : stat.rindex(")")] != "postgres":
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


async def _postgres_phase(
    base_url: str,
    port: int,
    ca_path: str,
    n: int,
    cfg: WorkerConfig,
    processes: int,
    lag_due: list[dt.datetime],
) -> dict[str, Any]:
    """The burst, then the lag phase, on PostgreSQL with ``processes`` worker processes sharing one scratch
    schema (created and dropped here); deliveries/s from the start signal to the last commit, counted by
    polling the table."""
    schema = f"bench_webhooks_{new_id('s').lower()[2:14]}"
    admin = create_engine(base_url)
    async with admin.begin() as conn:
        await conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in base_url else "?"
    url = f"{base_url}{sep}search_path={schema}"
    ctx = mp.get_context("spawn")
    ready, go, burst_done, stop = ctx.Semaphore(0), ctx.Event(), ctx.Event(), ctx.Event()
    out_q: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
    procs: list[Any] = []
    repo = await SqlRepository.open(url)
    try:
        ep, lag_ep = _endpoint(port), _endpoint(port)
        await repo.create_endpoint(ep)
        await repo.create_endpoint(lag_ep)
        await _preload(repo, ep.id, [dt.datetime.now(dt.UTC)] * n)
        for _ in range(processes):
            proc = ctx.Process(
                target=_pg_worker_process,
                args=(url, ca_path, cfg, lag_ep.id, ready, go, burst_done, stop, out_q),
                daemon=True,
            )
            proc.start()
            procs.append(proc)
        for _ in range(processes):
            await asyncio.to_thread(ready.acquire, True, 60)

        async def succeeded() -> int:
            async with repo.engine.connect() as conn:
                return int(
                    (
                        await conn.exec_driver_sql(
                            "SELECT count(*) FROM wh_deliveries WHERE status = 'succeeded'"
                        )
                    ).scalar_one()
                )

        db_cpu0 = _postgres_server_cpu()
        start = time.perf_counter()
        go.set()
        done = 0
        while done < n and time.perf_counter() - start < 180:
            await asyncio.sleep(0.02)
            done = await succeeded()
        elapsed = time.perf_counter() - start
        db_cpu = _postgres_server_cpu() - db_cpu0
        burst_done.set()
        if done < n:
            print(f"  (PostgreSQL burst stopped after 180 s with {done}/{n})")
        base = lag_due[0] if lag_due else dt.datetime.now(dt.UTC)
        shift = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1.5) - base
        await _preload(repo, lag_ep.id, [d + shift for d in lag_due])
        deadline = time.perf_counter() + 120
        while time.perf_counter() < deadline:
            if await succeeded() >= done + len(lag_due):
                break
            await asyncio.sleep(0.05)
        stop.set()
        outs = [await asyncio.to_thread(out_q.get, True, 60) for _ in procs]
    finally:
        stop.set()
        burst_done.set()
        go.set()
        for proc in procs:
            proc.join(30)
        await repo.close()
        async with admin.begin() as conn:
            await conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
        await admin.dispose()
    return {
        "rate": done / elapsed,
        "worker_cpu": sum(o[0] for o in outs) / max(done, 1),
        "db_cpu": db_cpu / max(done, 1),
        "lags": [lag for o in outs for lag in o[1]],
        "shares": [len(o[1]) for o in outs],
    }


async def _service_phase(d: str, port: int, ca_path: str, n: int, cfg: WorkerConfig) -> float:
    """The burst through the real service process (``python -m webhookd serve``) on a preloaded SQLite
    file; deliveries/s from their due time to the last commit, counted by polling the table."""
    path = f"{d}/service.db"
    repo = await SqlRepository.open(f"sqlite+aiosqlite:///{path}")
    ep = _endpoint(port)
    await repo.create_endpoint(ep)
    due = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=6)
    await _preload(repo, ep.id, [due] * n)
    await repo.close()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "webhookd", "serve", "--listen", "127.0.0.1:0", "--metrics-listen", "",
        "--database", f"sqlite+aiosqlite:///{path}", "--allow-private-targets", "--ca-bundle", ca_path,
        "--concurrency", str(cfg.concurrency), "--batch-size", str(cfg.batch_size), "--log-level", "WARNING",
        "--insecure-dev", stdout=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    db = sqlite3.connect(path, timeout=30)
    try:
        while True:
            await asyncio.sleep(0.02)
            done = db.execute("SELECT count(*) FROM wh_deliveries WHERE status = 'succeeded'").fetchone()[0]
            if done >= n:
                break
            if dt.datetime.now(dt.UTC) > due + dt.timedelta(seconds=120):
                print(f"  (service phase stopped after 120 s with {done}/{n})")
                break
        elapsed = (dt.datetime.now(dt.UTC) - due).total_seconds()
    finally:
        db.close()
        proc.terminate()
        await proc.wait()
    return done / elapsed


def _spread(values: list[float]) -> str:
    """Median (min - max) of the trials."""
    v = sorted(values)
    if len(v) == 1:
        return f"{v[0]:,.0f}"
    return f"{v[len(v) // 2]:,.0f} ({v[0]:,.0f} - {v[-1]:,.0f})"


def _pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


async def main_async(args: argparse.Namespace) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    ctx = mp.get_context("spawn")
    port_q: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
    stop = ctx.Event()
    proc = ctx.Process(
        target=_receiver_process,
        args=(cert.cert_chain_pems[0].bytes(), cert.private_key_pem.bytes(), port_q, stop),
        daemon=True,
    )
    proc.start()
    port = port_q.get(timeout=30)
    hostile_q: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
    hostile_proc = ctx.Process(
        target=_hostile_process,
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
    rows = []
    with tempfile.TemporaryDirectory() as d:
        ca_path = f"{d}/ca.pem"
        ca.cert_pem.write_to_path(ca_path)
        try:
            commits = _sqlite_commits(f"{d}/commits.db")
            now = dt.datetime.now(dt.UTC)
            db0 = f"sqlite+aiosqlite:///{d}/storage.db"
            el0, _l, n0, cpu0, _b, _t = await _phase(
                db0, port, ca_path, [now] * args.deliveries, cfg, 120, False
            )
            # Plain POSTs and the durable burst alternate, so each pair sees the machine in the same state.
            plains: list[float] = []
            bursts: list[tuple[float, int, float, float, dict[str, float]]] = []
            hostile_rates: list[float] = []
            for trial in range(args.trials):
                plain = await _plain_posts(port, ca_path, args.deliveries, args.concurrency)
                plains.append(plain)
                now = dt.datetime.now(dt.UTC)
                db1 = f"sqlite+aiosqlite:///{d}/throughput{trial}.db"
                el, _lags, done, cpu, busy, threads = await _phase(
                    db1, port, ca_path, [now] * args.deliveries, cfg, 120
                )
                bursts.append((el, done, cpu, busy, threads))
                if hostile:  # the same burst right after, with the hostile endpoints' deliveries due too
                    now = dt.datetime.now(dt.UTC)
                    db_h = f"sqlite+aiosqlite:///{d}/hostile{trial}.db"
                    el, _lags, done, *_rest = await _phase(
                        db_h, port, ca_path, [now] * args.deliveries, cfg, 120, True, hostile,
                        args.hostile_deliveries,
                    )  # fmt: skip
                    hostile_rates.append(done / el)
            rates = [done / el for el, done, *_ in bursts]
            ratios = sorted(r / p * 100 for r, p in zip(rates, plains, strict=True))
            rows.append(("calibration: plain signed POSTs/s, nothing stored", _spread(plains)))
            rows.append(("calibration: SQLite one-row commits/s (WAL, sync=NORMAL)", f"{commits:,.0f}"))
            rows.append(("storage only: claim+sign+commit/s, no network (ceiling)", f"{n0 / el0:,.0f}"))
            rows.append(
                ("  worker CPU per delivery, storage only (all threads)", f"{cpu0 / n0 * 1e6:,.0f} µs")
            )
            rows.append(
                (f"durable signed deliveries/s (burst of {args.deliveries} due at once)", _spread(rates))
            )
            rows.append(
                (
                    "  durable / plain signed POSTs (goal 5,000 / 19,000 = 26 %)",
                    f"{ratios[len(ratios) // 2]:.0f} % ({ratios[0]:.0f} - {ratios[-1]:.0f})",
                )
            )
            elapsed, n, cpu1, busy1, threads1 = sorted(bursts, key=lambda b: b[1] / b[0])[len(bursts) // 2]
            rows.append(("  wall time for the burst (median trial)", f"{elapsed:.2f} s"))
            rows.append(("  worker CPU per delivery, with HTTPS (all threads)", f"{cpu1 / n * 1e6:,.0f} µs"))
            for name, seconds in sorted(threads1.items(), key=lambda kv: -kv[1]):
                if seconds * 1e6 / n >= 1:
                    rows.append((f"    of which thread {name!r}", f"{seconds / n * 1e6:,.0f} µs"))
            rows.append(("  event-loop thread busy (CPU time / wall time)", f"{busy1 * 100:.0f} %"))
            start = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1.5)
            step = dt.timedelta(seconds=1 / args.lag_rate)
            due = [start + i * step for i in range(args.lag_deliveries)]
            db2 = f"sqlite+aiosqlite:///{d}/lag.db"
            _e, lags, n2, _c, _b, _t = await _phase(db2, port, ca_path, due, cfg, 120)
            rows.append(
                (
                    f"due->send lag p50 ({args.lag_deliveries} due at {args.lag_rate}/s)",
                    f"{_pct(lags, 50) * 1000:.1f} ms",
                )
            )
            rows.append(("due->send lag p99", f"{_pct(lags, 99) * 1000:.1f} ms"))
            rows.append(("due->send lag max", f"{max(lags) * 1000:.1f} ms" if lags else "n/a"))
            rows.append(("deliveries committed in lag phase", f"{n2}"))
            if hostile:
                # Lag without and with them in pairs, back to back (the machine is noisy): medians of p99.
                p99s: tuple[list[float], list[float]] = ([], [])
                lags_h: list[float] = []
                for trial in range(args.trials):
                    for with_them, out in ((False, p99s[0]), (True, p99s[1])):
                        ahead = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1.5) - due[0]
                        db3 = f"sqlite+aiosqlite:///{d}/lag-{trial}-{with_them}.db"
                        _e, lags3, n3, _c, _b, _t = await _phase(
                            db3, port, ca_path, [t + ahead for t in due], cfg, 120, True,
                            hostile if with_them else (), args.hostile_deliveries,
                        )  # fmt: skip
                        out.append(_pct(lags3, 99))
                        lags_h = lags3 if with_them else lags_h
                what = f"{args.hostile} dripping + {args.hostile} silent endpoints of another account"
                rows.append((f"isolation: with {what}", f"{args.hostile_deliveries} deliveries due each"))
                without, with_ = (statistics.median(p) * 1000 for p in p99s)
                pairs = " ".join(f"{a * 1000:.0f}/{b * 1000:.0f}" for a, b in zip(*p99s, strict=True))
                rows.append(
                    (
                        f"  healthy lag p99 without / with them, {args.trials} pairs (goal < 100 ms)",
                        f"{without:.1f} ms / {with_:.1f} ms (pairs: {pairs})",
                    )
                )
                rows.append(
                    (
                        "  healthy lag max with them (last pair)",
                        f"{max(lags_h) * 1000:.1f} ms" if lags_h else "n/a",
                    )
                )
                rows.append(("  healthy deliveries committed in the lag phase with them", f"{n3}"))
                ratios_h = sorted(h / r * 100 for h, r in zip(hostile_rates, rates, strict=True))
                rows.append(("  burst deliveries/s with them", _spread(hostile_rates)))
                rows.append(
                    (
                        "  throughput with / without them (goal >= 90 %)",
                        f"{ratios_h[len(ratios_h) // 2]:.0f} % ({ratios_h[0]:.0f} - {ratios_h[-1]:.0f})",
                    )
                )
            rate = await _service_phase(d, port, ca_path, args.deliveries, cfg)
            rows.append(("the same burst through `python -m webhookd serve` (a process)", f"{rate:,.0f}"))
            stores = [("SQLite, 1 process", statistics.median(rates), _pct(lags, 99), cpu1 / n, None)]
            if args.postgres:
                pg = await _postgres_phase(
                    args.postgres, port, ca_path, args.deliveries, cfg, args.pg_processes, due
                )
                rows.append(
                    (
                        f"durable signed deliveries/s on PostgreSQL ({args.pg_processes} processes)",
                        f"{pg['rate']:,.0f}",
                    )
                )
                rows.append(("  lag-phase sends per process", " / ".join(str(x) for x in pg["shares"])))
                stores.append(
                    (
                        f"PostgreSQL, {args.pg_processes} processes",
                        pg["rate"],
                        _pct(pg["lags"], 99),
                        pg["worker_cpu"],
                        pg["db_cpu"],
                    )
                )
        finally:
            stop.set()
            received, receiver_cpu = port_q.get(timeout=30)
            proc.join(10)
            if hostile:
                drips, hangs = hostile_q.get(timeout=30)
                rows.append(("  requests the dripping / silent receivers took", f"{drips} / {hangs}"))
                hostile_proc.join(10)
    rows.append(("requests the receiver answered (all phases)", f"{received}"))
    if received:
        rows.append(
            ("  receiver CPU per request (its own process)", f"{receiver_cpu / received * 1e6:,.0f} µs")
        )
    width = max(len(r[0]) for r in rows)
    print(
        f"\nwebhookd delivery benchmark (SQLite, HTTPS over loopback, {os.cpu_count()} CPUs, "
        f"concurrency {args.concurrency}, batch {args.batch_size})"
    )
    print(f"{'metric'.ljust(width)} | value")
    print(f"{'-' * width}-+-{'-' * 12}")
    for name, value in rows:
        print(f"{name.ljust(width)} | {value}")
    print(
        f"{'goal'.ljust(width)} | >= 5,000/s, p99 lag < 1 s (mean lag {statistics.fmean(lags) * 1000:.1f} ms)"
    )
    print(
        f"\n{'store'.ljust(22)} | {'deliveries/s':>12} | {'lag p99':>9} | {'worker CPU/delivery':>19}"
        f" | {'database server CPU/delivery':>28}"
    )
    for name, rate, p99, cpu, db_cpu in stores:
        db = f"{db_cpu * 1e6:,.0f} µs" if db_cpu is not None else "(in the worker)"
        print(
            f"{name.ljust(22)} | {rate:>12,.0f} | {p99 * 1000:>6.1f} ms | {cpu * 1e6:>16,.0f} µs | {db:>28}"
        )


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
        "--hostile",
        type=int,
        default=10,
        help="dripping and silent endpoints, each, in the isolation phase (0: skip)",
    )
    parser.add_argument(
        "--hostile-deliveries", type=int, default=20, help="deliveries due per hostile endpoint"
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
