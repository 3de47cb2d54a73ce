"""Relay of the transactional outbox to webhookd's PublishEvent, retried with backoff until accepted.

Rows are written in the same transaction as the change they describe (revocation, search threshold).
The relay claims due rows for a lease (so several processes on one database do not send the same row
at once), publishes each with ``idempotency_key`` = the row id (a resend after a crash is deduplicated
by webhookd), then marks it sent. A failure schedules the next attempt with capped exponential backoff.
The calls go through ``svckit.clients.HooksClient`` (round robin over several webhookd addresses, the
event checked against the catalog before it is sent, one error mapping: ``ClientError``).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import Iterable

from google.protobuf import struct_pb2

from authsvc._metrics import OUTBOX_BACKLOG, OUTBOX_FAILURES, OUTBOX_PUBLISHED
from authsvc._model import OutboxEvent
from authsvc._repository import Repository
from svckit.clients import ClientError, HooksClient
from svckit.clock import Clock, SystemClock
from svckit.idlewait import idle_wait
from svckit.outage import OutageLog
from svckit.prototables import HOOKS_ENVIRONMENT
from svckit.tls import Tls
from travel.webhooks.v1 import webhooks_pb2

log = logging.getLogger(__name__)

PUBLISH_TIMEOUT = 10.0
# Defaults of the relay (and of authsvc's flags): seconds between polls when idle, and the retry backoff.
POLL_INTERVAL = 1.0
BACKOFF_BASE = 0.5
BACKOFF_CAP = 30.0
# Sent rows are kept a week for inspection, then deleted (hourly).
SENT_RETENTION = dt.timedelta(days=7)
PURGE_EVERY = 3600.0
# Seconds between looks at the backlog (authsvc_outbox_pending and the oldest's age).
BACKLOG_EVERY = 10.0
# The longest wait between passes while the outbox has nothing due (each empty pass doubles the wait from
# the poll interval, ``svckit.idlewait``): every write of a row in this process wakes the relay, and a
# retry it scheduled ends the wait, so a look only finds rows another process left (its lease ran out).
IDLE_MAX = BACKLOG_EVERY


def backoff(attempts: int, base: float, cap: float) -> float:
    """Seconds before the next try after ``attempts`` failures: base * 2^(attempts-1), at most cap."""
    return float(min(cap, base * 2 ** max(0, attempts - 1)))


def publish_request(event: OutboxEvent) -> webhooks_pb2.PublishEventRequest:
    data = struct_pb2.Struct()
    data.update(event.data)
    return webhooks_pb2.PublishEventRequest(
        account_id=event.account_id,
        environment=HOOKS_ENVIRONMENT.pb(event.environment),
        type=event.type,
        state=event.state,
        data=data,
        idempotency_key=event.id,
    )


class OutboxRelay:
    def __init__(
        self,
        repo: Repository,
        addresses: str | Iterable[str],
        *,
        tls: Tls | None = None,
        clock: Clock | None = None,
        poll_interval: float = POLL_INTERVAL,
        backoff_base: float = BACKOFF_BASE,
        backoff_cap: float = BACKOFF_CAP,
        lease: float = PUBLISH_TIMEOUT + 5,
    ) -> None:
        self.repo = repo
        self.addresses = addresses
        self.tls = tls
        self.clock: Clock = clock or SystemClock()
        self.poll_interval = poll_interval
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.lease = lease
        self.wakeup = asyncio.Event()
        self._retry_at: float | None = None  # loop time of the soonest retry a pass scheduled
        self._task: asyncio.Task[None] | None = None
        self._hooks: HooksClient | None = None
        # A database outage fails every pass: one line per outage with a count, not a traceback each.
        self.outages = OutageLog(log)

    def start(self) -> None:
        self._hooks = HooksClient(
            self.addresses,
            self.tls,
            timeout=PUBLISH_TIMEOUT,
            options=[
                ("grpc.initial_reconnect_backoff_ms", 200),
                ("grpc.max_reconnect_backoff_ms", 2000),
                ("grpc.min_reconnect_backoff_ms", 200),
            ],
        )
        self._task = asyncio.create_task(self._run(), name="outbox-relay")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._hooks is not None:
            await self._hooks.close()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        last_purge = last_backlog = -PURGE_EVERY
        empty = 0  # passes in a row that found nothing due
        while True:
            woken = self.wakeup.is_set()
            self.wakeup.clear()  # before the pass: a row written during it wakes the next one at once
            if self._retry_at is not None and self._retry_at <= loop.time():
                self._retry_at = None  # due: this pass claims it
            try:
                if loop.time() - last_backlog >= BACKLOG_EVERY:
                    last_backlog = loop.time()
                    OUTBOX_BACKLOG.set(*await self.repo.outbox_backlog())
                if loop.time() - last_purge >= PURGE_EVERY:
                    last_purge = loop.time()
                    purged = await self.repo.purge_outbox(self.clock.now() - SENT_RETENTION)
                    if purged:
                        log.info("purged sent outbox rows", extra={"count": purged})
                sent = await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if self.outages.count(exc) is None:
                    log.exception("outbox relay pass failed")
                sent, woken = 0, True  # look again after the plain poll
            if sent == 0:
                empty = 0 if woken else empty + 1
                wait = idle_wait(empty, self.poll_interval, IDLE_MAX)
                if self._retry_at is not None:
                    wait = max(0.0, min(wait, self._retry_at - loop.time()))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wakeup.wait(), wait)
            else:
                empty = 0

    async def run_once(self) -> int:
        """One pass: publish every due row. Returns how many were accepted."""
        assert self._hooks is not None
        events = await self.repo.claim_outbox(self.clock.now(), self.lease)
        accepted = 0
        for event in events:
            try:
                # One attempt a pass: the relay's backoff retries, and counts each try on the row.
                await self._hooks.publish_event(publish_request(event), retry=False)
            except ClientError as exc:
                delay = backoff(event.attempts + 1, self.backoff_base, self.backoff_cap)
                retry_at = self.clock.now() + dt.timedelta(seconds=delay)
                log.warning(
                    "outbox publish failed; will retry",
                    extra={
                        "event_id": event.id,
                        "event_type": event.type,
                        "attempts": event.attempts + 1,
                        "code": exc.code.name,
                        "retry_in": delay,
                    },
                )
                OUTBOX_FAILURES.labels(event.type).inc()
                await self.repo.mark_failed(event.id, exc.code.name, retry_at)
                at = asyncio.get_running_loop().time() + delay
                self._retry_at = at if self._retry_at is None else min(self._retry_at, at)
                continue
            await self.repo.mark_sent(event.id, self.clock.now())
            accepted += 1
            OUTBOX_PUBLISHED.labels(event.type).inc()
            log.info("outbox event published", extra={"event_id": event.id, "event_type": event.type})
        return accepted
