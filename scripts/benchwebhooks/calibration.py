"""Calibration, in the same run as the phases (the machine is shared and noisy: compare ratios): plain
signed POSTs with nothing stored, over the worker's keep-alive transport; one-row SQLite commits."""

from __future__ import annotations

import asyncio
import datetime as dt
import sqlite3
import time

from benchwebhooks.worker import config_for, envelope
from svckit.ids import new_id
from svckit.signing import new_secret, sign
from webhookd._server import make_transport

# The sending process's CPU seconds per plain POST of each calibration run (this process does nothing else
# meanwhile): steadier than requests/s on a machine whose speed moves between runs.
CPU_PER_POST: list[float] = []


async def plain_posts(port: int, ca_path: str, n: int, concurrency: int) -> float:
    """Calibration: signed POSTs over the same keep-alive transport, nothing stored. Requests/s (and the
    CPU per POST appended to ``CPU_PER_POST``)."""
    transport = make_transport(config_for(ca_path))
    url = f"https://127.0.0.1:{port}/hook"
    secrets = [new_secret()]
    now = dt.datetime.now(dt.UTC)
    body = envelope(new_id("evt"), now)
    left = n

    async def one_connection() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            headers = {"Content-Type": "application/json", "X-Service-Signature": sign(secrets, body, now)}
            status, _headers, _body = await transport.post(url, headers, body)
            assert status == 200, status

    start, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one_connection() for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    CPU_PER_POST.append((time.process_time() - cpu) / n)
    await transport.aclose()
    return n / elapsed


def sqlite_commits(path: str, seconds: float = 2.0) -> float:
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
