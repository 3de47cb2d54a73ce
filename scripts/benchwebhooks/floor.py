"""The floor (``--only floor``): the least a durable signed delivery costs on this machine, measured, to set
beside the plain-POST baseline and the worker's burst of the same run; on SQLite, and on PostgreSQL with
``--postgres`` (one process: what the database server spends per delivery is the figure that matters).

A loop that does only what makes a delivery durable, on webhookd's own SQLite schema and rows: claim with a
lease (one UPDATE … RETURNING per batch), read the claimed deliveries with their events' bodies, sign and
POST each over the same keep-alive transport the baseline uses, then per batch of results one transaction
that inserts the attempts (their request and response headers as JSON, as webhookd keeps them), marks the
deliveries succeeded and deletes their queue rows. The statements run a claim ahead of the sends, so
storage and sending overlap: on a writer thread of their own, as webhookd's, or (``process=True``) in a
process of their own fed over a pipe. As in webhookd's queue, commits never checkpoint; a thread
checkpoints the WAL apart. Nothing else: no admission, no retry schedule, no breaker, no metrics, no
per-endpoint caps, no delivery counts, one tuple per delivery. No product runs it; it is the least a
durable delivery in Python costs here (docs/architecture.md, "The floor").
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import multiprocessing as mp
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import asyncpg

from benchwebhooks.postgres import postgres_server_cpu, scratch_schema
from benchwebhooks.worker import config_for, endpoint, preload
from svckit.db import asyncpg_dsn
from svckit.ids import new_id
from svckit.signing import sign
from webhookd._server import make_transport
from webhookd._sql import SqlRepository
from webhookd._sqlite_queue import CHECKPOINT_SECONDS
from webhookd._times import us

BATCH = 200

_CLAIM = """
UPDATE wh_pending SET lease_owner = ?, next_attempt_at = ?
WHERE id IN (SELECT id FROM wh_pending WHERE next_attempt_at <= ? ORDER BY next_attempt_at LIMIT ?)
RETURNING id
"""
_READ = """
SELECT d.id, d.event_id, d.endpoint_id, d.account_id, d.environment, d.attempt_count, e.envelope
FROM wh_deliveries d JOIN wh_events e ON e.id = d.event_id
WHERE d.id IN (SELECT value FROM json_each(?))
"""
_ATTEMPT = """
INSERT INTO wh_attempts (id, delivery_id, endpoint_id, event_id, account_id, environment, attempt_number,
  outcome, response_status, response_body, request_headers, latency_ms, error, attempted_at, manual,
  response_headers)
VALUES (?, ?, ?, ?, ?, ?, ?, 'succeeded', ?, ?, ?, ?, '', ?, 0, ?)
"""
_DELIVERED = """
UPDATE wh_deliveries SET status = 'succeeded', attempt_count = attempt_count + 1, updated_at = ?
WHERE id = ?
"""
_UNQUEUE = "DELETE FROM wh_pending WHERE id = ?"


_CLAIM_PG = """
UPDATE wh_pending SET lease_owner = $1, next_attempt_at = $2
WHERE id IN (SELECT id FROM wh_pending WHERE next_attempt_at <= $3 ORDER BY next_attempt_at LIMIT $4
             FOR UPDATE SKIP LOCKED)
RETURNING id
"""
_READ_PG = """
SELECT d.id, d.event_id, d.endpoint_id, d.account_id, d.environment, d.attempt_count, e.envelope
FROM wh_deliveries d JOIN wh_events e ON e.id = d.event_id
WHERE d.id = ANY($1::text[])
"""
_ATTEMPTS_PG = """
INSERT INTO wh_attempts (id, delivery_id, endpoint_id, event_id, account_id, environment, attempt_number,
  outcome, response_status, response_body, request_headers, latency_ms, error, attempted_at, manual,
  response_headers)
SELECT a, d, ep, ev, acc, env, n, 'succeeded', st, body, rh, lat, '', at, false, sh
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[], $8::int[],
            $9::text[], $10::text[], $11::float8[], $12::bigint[], $13::text[])
  AS t(a, d, ep, ev, acc, env, n, st, body, rh, lat, at, sh)
"""
_DELIVERED_PG = """
UPDATE wh_deliveries SET status = 'succeeded', attempt_count = attempt_count + 1, updated_at = $1
WHERE id = ANY($2::text[])
"""
_UNQUEUE_PG = "DELETE FROM wh_pending WHERE id = ANY($1::text[])"


class SqliteStore:
    """The writer's connection: one transaction per cycle (results written, then the next claim). As in
    webhookd's queue, a commit never checkpoints (copying the WAL back and syncing the file would stall
    it): a thread of its own checkpoints every ``CHECKPOINT_SECONDS``."""

    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("PRAGMA wal_autocheckpoint=0")
        self._stop = threading.Event()
        self._checkpoints = threading.Thread(
            target=self._checkpoint, args=(path,), name="floor-checkpoint", daemon=True
        )
        self._checkpoints.start()

    def _checkpoint(self, path: str) -> None:
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        try:
            db.execute("PRAGMA busy_timeout=30000")
            while not self._stop.wait(CHECKPOINT_SECONDS):
                db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        finally:
            db.close()

    def close(self) -> None:
        self._stop.set()
        self._checkpoints.join(10)
        self.db.close()

    def cycle(self, results: list[tuple[Any, ...]], limit: int) -> list[tuple[Any, ...]]:
        db = self.db
        now = us(dt.datetime.now(dt.UTC))
        db.execute("BEGIN IMMEDIATE")
        if results:
            db.executemany(_ATTEMPT, [r[1:] for r in results])
            db.executemany(_DELIVERED, [(now, r[0]) for r in results])
            db.executemany(_UNQUEUE, [(r[0],) for r in results])
        claimed: list[tuple[Any, ...]] = []
        if limit:
            ids = [r[0] for r in db.execute(_CLAIM, ("floor", now + 60_000_000, now, limit))]
            if ids:
                claimed = db.execute(_READ, (json.dumps(ids),)).fetchall()
        db.execute("COMMIT")
        return claimed


class PostgresStore:
    """The PostgreSQL floor's connection: one transaction per cycle, as ``SqliteStore``."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn

    async def cycle(self, results: list[tuple[Any, ...]], limit: int) -> list[tuple[Any, ...]]:
        now = us(dt.datetime.now(dt.UTC))
        claimed: list[tuple[Any, ...]] = []
        async with self.conn.transaction():
            if results:
                columns = list(zip(*(r[1:] for r in results), strict=True))
                await self.conn.execute(_ATTEMPTS_PG, *[list(c) for c in columns])
                ids = [r[0] for r in results]
                await self.conn.execute(_DELIVERED_PG, now, ids)
                await self.conn.execute(_UNQUEUE_PG, ids)
            if limit:
                ids = [r[0] for r in await self.conn.fetch(_CLAIM_PG, "floor", now + 60_000_000, now, limit)]
                if ids:
                    claimed = [tuple(r) for r in await self.conn.fetch(_READ_PG, ids)]
        return claimed


async def _preloaded(db_url: str, port: int, n: int) -> Any:
    """webhookd's schema at ``db_url`` (migrated), one endpoint and ``n`` deliveries due to it."""
    repo = await SqlRepository.open(db_url)
    ep = endpoint(port)
    await repo.create_endpoint(ep)
    await preload(repo, ep.id, [dt.datetime.now(dt.UTC)] * n)
    await repo.close()
    return ep


def _writer_process(path: str, conn: Any) -> None:
    """The floor's writer in a process of its own: the cycles asked over ``conn`` until None, then its CPU
    seconds."""
    store = SqliteStore(path)
    cpu = time.process_time()
    try:
        while (asked := conn.recv()) is not None:
            conn.send(store.cycle(*asked))
        conn.send(time.process_time() - cpu)
    finally:
        store.close()


async def bare_durable(
    db_url: str, port: int, ca_path: str, n: int, concurrency: int, process: bool = False
) -> tuple[float, float]:
    """Durable deliveries/s of the floor loop on SQLite, and its CPU seconds per delivery (every thread, and
    the writer's process with ``process``)."""
    ep = await _preloaded(db_url, port, n)
    path = db_url.split("///", 1)[1]
    writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="floor-sqlite")
    loop = asyncio.get_running_loop()
    if not process:
        store = SqliteStore(path)

        async def cycle(results: list[tuple[Any, ...]], limit: int) -> list[tuple[Any, ...]]:
            return await loop.run_in_executor(writer, store.cycle, results, limit)

        try:
            return await _deliver(cycle, ep, ca_path, n, concurrency)
        finally:
            await loop.run_in_executor(writer, store.close)
            writer.shutdown()
    spawn = mp.get_context("spawn")
    ours, theirs = spawn.Pipe()
    child = spawn.Process(target=_writer_process, args=(path, theirs), daemon=True)
    child.start()

    def ask(results: list[tuple[Any, ...]], limit: int) -> list[tuple[Any, ...]]:
        ours.send((results, limit))
        return ours.recv()  # type: ignore[no-any-return]

    async def remote(results: list[tuple[Any, ...]], limit: int) -> list[tuple[Any, ...]]:
        return await loop.run_in_executor(writer, ask, results, limit)

    try:
        await remote([], 0)  # the writer has started (imports, its connection): not inside the timed loop
        rate, cpu = await _deliver(remote, ep, ca_path, n, concurrency)
        ours.send(None)
        return rate, cpu + await loop.run_in_executor(writer, ours.recv) / n
    finally:
        child.join(10)
        writer.shutdown()


async def bare_durable_postgres(
    base_url: str, port: int, ca_path: str, n: int, concurrency: int
) -> tuple[float, float, float]:
    """The floor loop on PostgreSQL (a scratch schema, dropped after): deliveries/s, this process's CPU
    seconds per delivery, and the database server's."""
    async with scratch_schema(base_url, "bench_floor") as (url, _admin):
        ep = await _preloaded(url, port, n)
        dsn, settings = asyncpg_dsn(url)
        pg = await asyncpg.connect(dsn, server_settings=settings)
        try:
            server = postgres_server_cpu()
            rate, cpu = await _deliver(PostgresStore(pg).cycle, ep, ca_path, n, concurrency)
            return rate, cpu, (postgres_server_cpu() - server) / n
        finally:
            await pg.close()


async def _deliver(
    cycle: Callable[[list[tuple[Any, ...]], int], Awaitable[list[tuple[Any, ...]]]],
    ep: Any,
    ca_path: str,
    n: int,
    concurrency: int,
) -> tuple[float, float]:
    """The loop: ``concurrency`` senders take claimed rows and POST them; cycles write their results and
    claim ahead. Deliveries/s and CPU seconds per delivery (this process, all threads)."""
    transport = make_transport(config_for(ca_path))
    ready: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()
    results: list[tuple[Any, ...]] = []
    woken = asyncio.Event()
    secrets = [ep.secrets[0].secret]
    done = 0

    async def sender() -> None:
        while True:
            d_id, event_id, endpoint_id, account_id, env, attempts, body = await ready.get()
            now = dt.datetime.now(dt.UTC)
            headers = {"Content-Type": "application/json", "X-Service-Signature": sign(secrets, body, now)}
            start = time.perf_counter()
            status, answer_headers, answer = await transport.post(ep.url, headers, body, 4096)
            assert status == 200, status
            kept = {k.decode().lower(): v.decode() for k, v in answer_headers}
            results.append(
                (d_id, new_id("att"), d_id, endpoint_id, event_id, account_id, env, attempts + 1, status,
                 answer.decode("utf-8", "replace"), json.dumps(headers), (time.perf_counter() - start) * 1000,
                 us(now), json.dumps(kept))
            )  # fmt: skip
            woken.set()

    senders = [asyncio.create_task(sender()) for _ in range(concurrency)]
    start, cpu = time.perf_counter(), time.process_time()
    ahead = 2 * concurrency
    while done < n:
        batch, results[:] = list(results), []
        room = ahead - ready.qsize()
        limit = min(BATCH, room) if room >= concurrency // 2 else 0
        if not batch and not limit:
            woken.clear()
            await woken.wait()
            continue
        claimed = await cycle(batch, limit)
        done += len(batch)
        for row in claimed:
            ready.put_nowait(row)
        if not batch and not claimed and not results:  # results may have come in during the cycle
            woken.clear()
            await woken.wait()
    elapsed, spent = time.perf_counter() - start, time.process_time() - cpu
    for task in senders:
        task.cancel()
    await asyncio.gather(*senders, return_exceptions=True)
    await transport.aclose()
    return n / elapsed, spent / n
