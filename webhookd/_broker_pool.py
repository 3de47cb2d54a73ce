"""Connections to partners' brokers (``webhookd._amqp``, ``webhookd._nats``), pooled per destination.

One connection per broker login (``Settings.pool_key``: same host, port, vhost and credentials), opened on
the first send and kept for the next ones; at most ``limit`` open (the least recently used one is closed
when a new one would pass it), so a partner with many endpoints, or many partners, cannot make webhookd
hold unbounded sockets. A connection that failed is dropped and the next send opens a new one; two sends
waiting for the same key's connection open one (a per-key lock), and a key's slow connect holds only the
sends of that key (each within its attempt's timeout: the worker's per-endpoint caps and breakers do the
rest, as for a slow HTTP receiver).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

C = TypeVar("C")
log = logging.getLogger("webhookd.brokers")
DEFAULT_LIMIT = 256


class BrokerPool(Generic[C]):
    def __init__(self, close: Callable[[C], Awaitable[None]], limit: int = DEFAULT_LIMIT) -> None:
        self._close = close
        self.limit = max(1, limit)
        self._open: collections.OrderedDict[Hashable, C] = collections.OrderedDict()
        self._locks: dict[Hashable, asyncio.Lock] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._open)

    async def get(self, key: Hashable, connect: Callable[[], Awaitable[C]]) -> C:
        """The key's open connection, opened by ``connect`` if there is none (its exceptions propagate)."""
        found = self._open.get(key)
        if found is not None:
            self._open.move_to_end(key)
            return found
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            found = self._open.get(key)
            if found is not None:
                return found
            conn = await connect()
            self._open[key] = conn
            while len(self._open) > self.limit:
                _old_key, old = self._open.popitem(last=False)
                self._close_later(old)
            return conn

    def drop(self, key: Hashable, conn: C) -> None:
        """Forget ``conn`` (it failed) and close it; the next ``get`` opens a new one."""
        if self._open.get(key) is conn:
            del self._open[key]
        self._close_later(conn)

    def _close_later(self, conn: C) -> None:
        task = asyncio.get_running_loop().create_task(self._quiet_close(conn))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _quiet_close(self, conn: C) -> None:
        try:
            async with asyncio.timeout(5):
                await self._close(conn)
        except Exception as exc:  # a broken connection may fail to close: it is gone either way
            log.debug("closing a broker connection failed: %s", type(exc).__name__)

    async def close(self) -> None:
        opened, self._open = list(self._open.values()), collections.OrderedDict()
        for conn in opened:
            self._close_later(conn)
        with contextlib.suppress(Exception):
            await asyncio.gather(*self._closing, return_exceptions=True)
