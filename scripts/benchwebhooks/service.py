"""The burst through the real service process (``python -m webhookd serve``)."""

from __future__ import annotations

import asyncio
import datetime as dt
import sqlite3
import sys

from benchwebhooks.worker import endpoint, preload
from webhookd._delivery import WorkerConfig
from webhookd._sql import SqlRepository


async def service_phase(d: str, port: int, ca_path: str, n: int, cfg: WorkerConfig) -> float:
    """The burst through the real service process (``python -m webhookd serve``) on a preloaded SQLite
    file; deliveries/s from their due time to the last commit, counted by polling the table."""
    path = f"{d}/service.db"
    repo = await SqlRepository.open(f"sqlite+aiosqlite:///{path}")
    ep = endpoint(port)
    await repo.create_endpoint(ep)
    due = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=6)
    await preload(repo, ep.id, [due] * n)
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
    return float(done) / elapsed
