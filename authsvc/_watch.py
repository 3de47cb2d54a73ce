"""Key change fan-out: an in-process hub, and PostgreSQL LISTEN/NOTIFY between processes.

Every committed change is published to the local hub at once (cache invalidation and watchers).
On PostgreSQL the same transaction also NOTIFYs a channel named after the schema; a listener in
every authsvc process republishes it to its own hub. A lost listener connection is answered
with a "sync" change (drop every cache) once it is back.

The listener republishes the process's own changes too (``publish_once``: whichever of the handler and the
listener comes first): a handler whose COMMIT went through may never reach its publish -- cancelled when
its caller's deadline ran out or connection broke during the commit, or the commit's answer lost with the
database connection -- and a caller retrying on another process finds the change already made and
publishes nothing. Without this, that process's key cache and its edges' caches kept allowing a revoked key
until their entries expired (up to 60 s). The NOTIFY is sent if and only if the transaction committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from typing import Any

from authsvc._metrics import KEY_CHANGES
from authsvc._model import KeyChange
from svckit.outage import OutageLog, describe

log = logging.getLogger(__name__)

QUEUE_SIZE = 1000
# The process's own changes remembered (newest), so that the listener's copy of one is not fanned out again.
RECENT_OWN = 4096


def channel_name(schema: str | None) -> str:
    return f"auth_key_changes_{schema or 'public'}"[:63]


class ChangeHub:
    def __init__(self) -> None:
        self._queues: set[asyncio.Queue[KeyChange | None]] = set()
        self._callbacks: list[Callable[[KeyChange], None]] = []
        self.closed = False
        self._recent: OrderedDict[tuple[str, str, str, int], None] = OrderedDict()
        # False while the PostgreSQL listener is not connected: another process's changes go unheard then,
        # so the key cache is neither read nor filled, watch streams send no heartbeat (an edge stops
        # trusting its own cache first WATCH_SILENCE after the last one) and a new stream gets its SYNC only
        # once the listener is back. Going deaf and hearing again each publish a "sync" (drop every cache).
        self.hearing = True
        self._hearing = asyncio.Event()
        self._hearing.set()

    def set_hearing(self, hearing: bool) -> None:
        if hearing == self.hearing:
            return
        self.hearing = hearing
        if hearing:
            self._hearing.set()
        else:
            self._hearing.clear()
        self.publish(KeyChange("sync", "", "", dt.datetime.now(dt.UTC)))

    async def wait_hearing(self) -> None:
        """Returns once every process's changes are heard (at once on SQLite), or the hub closed."""
        await self._hearing.wait()

    def on_change(self, callback: Callable[[KeyChange], None]) -> None:
        self._callbacks.append(callback)

    def publish(self, change: KeyChange) -> None:
        KEY_CHANGES.labels(change.kind).inc()
        for cb in self._callbacks:
            cb(change)
        for q in self._queues:
            try:
                q.put_nowait(change)
            except asyncio.QueueFull:
                # A watcher that cannot keep up is told to drop its whole cache instead.
                while not q.empty():
                    q.get_nowait()
                q.put_nowait(KeyChange("sync", "", "", change.changed_at))

    def publish_once(self, change: KeyChange) -> bool:
        """Publishes one of this process's own changes unless it was already (heard from the handler that
        made it and from the listener, in either order). A change is known by its kind, key, account and
        time to the microsecond; one remembered too briefly is published twice, which only drops a cache
        entry twice. Returns whether it was published."""
        ident = (change.kind, change.key_id, change.account_id, round(change.changed_at.timestamp() * 1e6))
        if ident in self._recent:
            return False
        self._recent[ident] = None
        if len(self._recent) > RECENT_OWN:
            self._recent.popitem(last=False)
        self.publish(change)
        return True

    @contextlib.asynccontextmanager
    async def subscribe(self) -> AsyncIterator[asyncio.Queue[KeyChange | None]]:
        """A queue of changes; ``None`` means the hub closed (the service is stopping)."""
        q: asyncio.Queue[KeyChange | None] = asyncio.Queue(QUEUE_SIZE + 1)
        if self.closed:
            q.put_nowait(None)
        self._queues.add(q)
        try:
            yield q
        finally:
            self._queues.discard(q)

    def close(self) -> None:
        """End every watch stream, so a graceful stop need not wait for them."""
        self.closed = True
        self._hearing.set()
        for q in self._queues:
            if q.full():
                q.get_nowait()
            q.put_nowait(None)


class PgListener:
    """LISTENs on ``channel`` with a raw asyncpg connection; republishes foreign changes to ``hub``."""

    def __init__(self, dsn: str, server_settings: dict[str, str], channel: str, origin: str, hub: ChangeHub):
        self.dsn = dsn
        self.server_settings = server_settings
        self.channel = channel
        self.origin = origin
        self.hub = hub
        self._task: asyncio.Task[None] | None = None
        self.ready = asyncio.Event()
        hub.set_hearing(False)  # until the first connection listens
        # Reconnecting every second through a database outage: one line per outage with a count.
        self.outages = OutageLog(log)

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        try:
            data = json.loads(payload)
            change = KeyChange(
                data["kind"],
                data.get("key_id", ""),
                data.get("account_id", ""),
                dt.datetime.fromtimestamp(float(data["at"]), dt.UTC),
            )
        except (ValueError, KeyError, TypeError):
            log.warning("ignoring malformed key change notification")
            return
        if data.get("origin") == self.origin:  # also published by its handler, unless that never got there
            self.hub.publish_once(change)
        else:
            self.hub.publish(change)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="pg-listener")
        await asyncio.wait_for(self.ready.wait(), 30)

    async def _run(self) -> None:
        import asyncpg

        while True:
            try:
                conn = await asyncpg.connect(self.dsn, server_settings=self.server_settings)
            except Exception as exc:
                # Whatever it is, the listener tries again: without it this process's watchers never hear
                # of another process's revocations. An outage (refused, missing database, role refused,
                # no slot) is counted and summarised; anything else is said each time.
                if self.outages.count(exc) is None:
                    log.warning("key change listener cannot connect", extra={"error": describe(exc)})
                await asyncio.sleep(1)
                continue
            lost = asyncio.Event()
            conn.add_termination_listener(lambda _c, lost=lost: lost.set())
            try:
                await conn.add_listener(self.channel, self._on_notify)
                # Changes may have been missed while disconnected: everyone drops their cache (the sync).
                self.hub.set_hearing(True)
                self.ready.set()
                log.info("listening for key changes", extra={"channel": self.channel})
                while not lost.is_set():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(lost.wait(), 10)
                    if not lost.is_set() and conn.is_closed():
                        break
            except asyncio.CancelledError:
                await conn.close(timeout=2)
                raise
            except Exception as exc:
                if self.outages.count(exc) is None:
                    log.exception("key change listener failed")
            finally:
                if not conn.is_closed():
                    conn.terminate()
                self.hub.set_hearing(False)
            await asyncio.sleep(0.5)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
