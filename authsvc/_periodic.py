"""A chore authsvc runs every so often in the background (the request log's purge, the usage rollups'
prune): once at start, then every ``interval`` seconds until stopped; a failure is logged and the chore
tried again at its next turn, so one bad run never stops the ones after it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import ClassVar


class Periodic:
    """Runs ``once`` now and every ``interval`` seconds after, between ``start`` and ``stop``. A subclass
    names its task, its logger (its own module's, so its lines read as before) and the failure line."""

    task_name: ClassVar[str]
    failure: ClassVar[str]
    log: ClassVar[logging.Logger]

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._task: asyncio.Task[None] | None = None

    async def once(self) -> int:
        """One run of the chore; how many rows it removed."""
        raise NotImplementedError

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=self.task_name)

    async def _run(self) -> None:
        while True:
            try:
                await self.once()
            except Exception:
                self.log.exception(self.failure)
            await asyncio.sleep(self.interval)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
