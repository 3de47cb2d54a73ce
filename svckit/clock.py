"""One injectable clock. Code reads ``clock.now()`` once at the edge of a loop and passes ``now`` in."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Protocol


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Clock(Protocol):
    def now(self) -> dt.datetime: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> dt.datetime:
        return utcnow()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class FakeClock:
    """A clock tests move by hand; ``sleep`` yields to the loop without waiting."""

    def __init__(self, start: dt.datetime | None = None) -> None:
        self._now = start or dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

    def now(self) -> dt.datetime:
        return self._now

    def advance(self, seconds: float) -> dt.datetime:
        self._now += dt.timedelta(seconds=seconds)
        return self._now

    def set(self, when: dt.datetime) -> None:
        self._now = when

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(0)
