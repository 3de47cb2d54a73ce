"""The burst and the lag phase on PostgreSQL, with worker processes sharing one scratch schema."""

from __future__ import annotations

import asyncio
import contextlib
import cProfile
import datetime as dt
import multiprocessing as mp
import os
import pathlib
import time
from collections.abc import AsyncIterator
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from benchwebhooks.worker import config_for, endpoint, preload
from svckit.clock import SystemClock
from svckit.db import create_engine, pg_schema
from svckit.ids import new_id
from svckit.runner import freeze_startup
from webhookd._admission import NO_SKIPS
from webhookd._delivery import DeliveryWorker, WorkerConfig
from webhookd._sender import Sender
from webhookd._server import make_client, make_transport
from webhookd._sql import SqlRepository


class _Counted(SqlRepository):
    """Adds the results each cycle committed to a counter shared with the parent, which reads it instead
    of counting the table's succeeded rows 50 times a second (a scan of the whole table each time: about
    20 µs of the server's CPU per delivery was the bench's own)."""

    committed: Any = None  # multiprocessing Value("q")

    async def record_and_claim(self, outcomes, owner, now, limit, lease_until, skips=NO_SKIPS):  # type: ignore[no-untyped-def]
        out = await super().record_and_claim(outcomes, owner, now, limit, lease_until, skips)
        if outcomes:
            with self.committed.get_lock():
                self.committed.value += len(outcomes)
        return out


# Set to a path prefix, each worker process profiles its burst (cProfile) into ``<prefix>.<pid>``.
PROFILE_ENV = "BENCH_WEBHOOKS_PROFILE"


def _profiler() -> cProfile.Profile | None:
    if not os.environ.get(PROFILE_ENV):
        return None
    profile = cProfile.Profile()
    profile.enable()
    return profile


def pg_worker_process(
    url: str, ca_path: str, cfg: WorkerConfig, lag_endpoint: str, ready: Any, go: Any, burst_done: Any,
    stop: Any, out_q: Any, committed: Any,
) -> None:  # fmt: skip
    """One webhookd delivery worker in a process of its own, on the shared PostgreSQL schema."""
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(pg_worker(url, ca_path, cfg, lag_endpoint, ready, go, burst_done, stop, out_q, committed))


async def pg_worker(
    url: str, ca_path: str, cfg: WorkerConfig, lag_endpoint: str, ready: Any, go: Any, burst_done: Any,
    stop: Any, out_q: Any, committed: Any,
) -> None:  # fmt: skip
    repo = _Counted(create_engine(url))  # the parent migrated the schema
    repo.committed = committed
    config = config_for(ca_path, cfg)
    transport = make_transport(config)
    client = make_client(config, transport)
    lags: list[float] = []

    def on_sent(claim: Any, lag: float) -> None:
        if claim.delivery.endpoint_id == lag_endpoint:
            lags.append(lag)

    worker = DeliveryWorker(repo, Sender(client, direct=transport), SystemClock(), cfg, on_sent=on_sent)
    freeze_startup()  # started: as webhookd's own start-up does before READY
    ready.release()
    await asyncio.to_thread(go.wait)
    profile = _profiler()
    cpu0 = time.process_time()
    task = asyncio.create_task(worker.run())
    await asyncio.to_thread(burst_done.wait)
    cpu_burst = time.process_time() - cpu0
    if profile is not None:
        profile.disable()
        profile.dump_stats(f"{os.environ[PROFILE_ENV]}.{os.getpid()}")
    await asyncio.to_thread(stop.wait)
    await worker.stop(1.0)
    await task
    await client.aclose()
    await repo.close()
    out_q.put((cpu_burst, lags))


@contextlib.asynccontextmanager
async def scratch_schema(base_url: str, prefix: str) -> AsyncIterator[tuple[str, AsyncEngine]]:
    """A fresh schema ``<prefix>_<random>`` of ``base_url``'s database for one phase: its URL and the admin
    engine that made it; the schema is dropped (with all in it) on the way out."""
    schema = f"{prefix}_{new_id('s').lower()[2:14]}"
    admin = create_engine(base_url)
    async with admin.begin() as conn:
        await conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in base_url else "?"
    try:
        yield f"{base_url}{sep}search_path={schema}", admin
    finally:
        async with admin.begin() as conn:
            await conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
        await admin.dispose()


def postgres_server_cpu() -> float:
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


async def postgres_phase(
    base_url: str,
    port: int,
    ca_path: str,
    n: int,
    cfg: WorkerConfig,
    processes: int,
    lag_due: list[dt.datetime],
    endpoints: int = 1,
) -> dict[str, Any]:
    """The burst (to ``endpoints`` endpoints in turn), then the lag phase, on PostgreSQL with ``processes``
    worker processes sharing one scratch schema (created and dropped here); deliveries/s from the start
    signal to the last commit, counted by the workers as their cycles commit."""
    async with scratch_schema(base_url, "bench_webhooks") as (url, admin):
        ctx = mp.get_context("spawn")
        ready, go, burst_done, stop = ctx.Semaphore(0), ctx.Event(), ctx.Event(), ctx.Event()
        out_q: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
        committed = ctx.Value("q", 0)
        procs: list[Any] = []
        updates: Any = None
        repo = await SqlRepository.open(url)
        try:
            eps, lag_ep = [endpoint(port) for _ in range(endpoints)], endpoint(port)
            for ep in [*eps, lag_ep]:
                await repo.create_endpoint(ep)
            await preload(repo, [ep.id for ep in eps], [dt.datetime.now(dt.UTC)] * n)
            for _ in range(processes):
                proc = ctx.Process(
                    target=pg_worker_process,
                    args=(url, ca_path, cfg, lag_ep.id, ready, go, burst_done, stop, out_q, committed),
                    daemon=True,
                )
                proc.start()
                procs.append(proc)
            for _ in range(processes):
                await asyncio.to_thread(ready.acquire, True, 60)

            async def succeeded() -> int:
                return int(committed.value)

            db_cpu0 = postgres_server_cpu()
            start = time.perf_counter()
            go.set()
            done = 0
            while done < n and time.perf_counter() - start < 180:
                await asyncio.sleep(0.02)
                done = await succeeded()
            elapsed = time.perf_counter() - start
            db_cpu = postgres_server_cpu() - db_cpu0
            burst_done.set()
            if done < n:
                print(f"  (PostgreSQL burst stopped after 180 s with {done}/{n})")
            base = lag_due[0] if lag_due else dt.datetime.now(dt.UTC)
            shift = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1.5) - base
            await preload(repo, lag_ep.id, [d + shift for d in lag_due])
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
                # The workers' backends reported their counts as they exited (the whole run, both phases).
                updates = (
                    await conn.exec_driver_sql(
                        "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables"
                        " WHERE schemaname = $1 AND relname = 'wh_deliveries'",
                        (pg_schema(url),),
                    )
                ).first()
    return {
        "rate": done / elapsed,
        "worker_cpu": sum(o[0] for o in outs) / max(done, 1),
        "db_cpu": db_cpu / max(done, 1),
        "lags": [lag for o in outs for lag in o[1]],
        "shares": [len(o[1]) for o in outs],
        "updates": tuple(updates) if updates is not None else (0, 0),  # (rows updated, of which HOT)
    }
