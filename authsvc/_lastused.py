"""last_used_at without a database write per request: remembered in memory, flushed in batches.

A use is remembered to the whole second (docs/authentication.md: accurate to about a minute), so the
last use an answer shows changes at most once a second and Authorize can give the same answer between.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging

from authsvc._repository import Repository
from svckit.outage import OutageLog

log = logging.getLogger(__name__)

# Uses are remembered to this resolution (the whole second).
RESOLUTION = dt.timedelta(seconds=1)
# Seconds between flushes to the database (authsvc's --last-used-flush default).
FLUSH_INTERVAL = 30.0


class LastUsed:
    def __init__(self, repo: Repository, interval: float = FLUSH_INTERVAL) -> None:
        self.repo = repo
        self.interval = interval
        self.pending: dict[str, dt.datetime] = {}
        self._task: asyncio.Task[None] | None = None
        # A database outage fails every flush: one line per outage with a count, not a traceback each.
        self.outages = OutageLog(log)

    def touch(self, key_id: str, now: dt.datetime) -> None:
        prev = self.pending.get(key_id)
        if prev is None or now - prev >= RESOLUTION:
            self.pending[key_id] = now.replace(microsecond=0)

    def seen(self, key_id: str) -> dt.datetime | None:
        return self.pending.get(key_id)

    async def flush(self) -> None:
        batch, self.pending = self.pending, {}
        if not batch:
            return
        try:
            await self.repo.flush_last_used(batch)
        except Exception as exc:
            if self.outages.count(exc) is None:
                log.exception("could not record last_used_at; will retry")
            for key_id, when in batch.items():
                self.touch(key_id, when)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="last-used-flush")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            await self.flush()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.flush()
