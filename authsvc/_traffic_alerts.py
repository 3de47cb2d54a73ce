"""Traffic alerts, evaluated by authsvc's housekeeping: look-to-book past the account's target
(``svckit.looktobook``) and anomalies of the last hour (``authsvc._anomaly_rules``). Each sends its
operational event through the outbox (``account.look_to_book_exceeded``, ``account.anomaly``); webhookd
delivers it to subscribed endpoints and e-mails the account's owners and admins (webhookd._traffic_mail).

Every ``interval`` (5 minutes) each authsvc process:
  - anomalies: takes the last whole UTC hour and the accounts with live traffic in it (the hour rollup),
    reads each one's hour and the 7 days before it (errors by status, latency from the summed histogram)
    and asks the rule; a kind found is sent unless one was sent for the account less than an hour ago;
  - look-to-book: for each account with a target, sums the last 7 UTC days' searches (the
    allowance's counter) and confirmed bookings (webhookd CountEvents over booking.confirmed) and asks the
    rule, which allows one alert a week while the ratio stays past the target.
Several authsvc processes may evaluate at once: sending is a conditional write of the time last sent, so
one of them sends (``send_traffic_alert``). Without ``--webhookd`` no booking can be counted and
look-to-book is not evaluated (said once in the log).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import Awaitable, Callable

from authsvc import _anomaly_rules as anomaly_rules
from authsvc._model import OutboxEvent
from authsvc._sql import SqlRepository
from authsvc._usage_rules import Grain, UsageQuery
from svckit import accountkinds, looktobook
from svckit.catalog import STATES
from svckit.clients import HooksClient
from svckit.clock import Clock, SystemClock
from svckit.ids import new_id
from svckit.outage import OutageLog
from svckit.protos import timestamp
from svckit.usagecounts import BUCKETS, add_into, percentile
from svckit.vocabulary import Environment
from travel.webhooks.v1 import webhooks_pb2 as wpb

log = logging.getLogger("authsvc.traffic_alerts")
OUTAGES = OutageLog(log)

INTERVAL = 300.0
ENVIRONMENT = Environment.LIVE
LOOK_TO_BOOK_KIND = "look_to_book"
# (account, first day) -> confirmed bookings per day.
BookingCounter = Callable[[str, dt.date], Awaitable[dict[dt.date, int]]]


def booking_counter(hooks: HooksClient) -> BookingCounter:
    """Confirmed live bookings per day from webhookd's booking.confirmed events (CountEvents)."""

    async def count(account_id: str, first: dt.date) -> dict[dt.date, int]:
        got = await hooks.count_events(
            wpb.CountEventsRequest(
                account_id=account_id,
                environment=wpb.ENVIRONMENT_LIVE,
                type="booking.confirmed",
                since=timestamp(dt.datetime.combine(first, dt.time(), dt.UTC)),
            )
        )
        return {dt.date.fromisoformat(d.day): int(d.count) for d in got.days}

    return count


def anomaly_kind(kind: anomaly_rules.AnomalyKind) -> str:
    return f"anomaly:{kind.value}"


class TrafficAlerts:
    def __init__(
        self,
        repo: SqlRepository,
        bookings: BookingCounter | None,
        clock: Clock | None = None,
        interval: float = INTERVAL,
        on_queued: Callable[[], None] = lambda: None,
        hooks: HooksClient | None = None,
    ) -> None:
        self.hooks = hooks  # closed at stop
        self.repo = repo
        self.bookings = bookings
        self.clock: Clock = clock or SystemClock()
        self.interval = interval
        self.on_queued = on_queued
        self._task: asyncio.Task[None] | None = None
        if bookings is None:
            log.info("look-to-book alerts off: no --webhookd to count confirmed bookings")

    # -- anomalies -----------------------------------------------------------------------------------------

    async def _traffic(self, account_id: str, start: dt.datetime, end: dt.datetime) -> anomaly_rules.Traffic:
        cells = await self.repo.query_usage_counts(
            UsageQuery(account_id, ENVIRONMENT, start, end, Grain.HOUR, ["status"], None, must_exist=False)
        )
        histogram = [0] * BUCKETS
        for c in cells:
            add_into(histogram, c.buckets)
        return anomaly_rules.Traffic(
            requests=sum(c.count for c in cells),
            errors=sum(c.count for c in cells if c.status >= 400),
            p95_ms=float(percentile(histogram, 0.95)),
        )

    async def anomalies(self, now: dt.datetime) -> int:
        """Judge the last whole hour of every account active in it; returns the alerts queued."""
        end = now.astimezone(dt.UTC).replace(minute=0, second=0, microsecond=0)
        start = end - dt.timedelta(hours=1)
        sent = 0
        for account_id in await self.repo.accounts_active(start, end, ENVIRONMENT):
            hour = await self._traffic(account_id, start, end)
            baseline = await self._traffic(account_id, start - dt.timedelta(days=7), start)
            for found in anomaly_rules.anomalies(hour, baseline):
                kind = anomaly_kind(found.kind)
                last = await self.repo.traffic_alert_sent(account_id, kind)
                if not anomaly_rules.may_send(last, now):
                    continue
                data = accountkinds.anomaly(
                    found.kind.value,
                    start,
                    ENVIRONMENT.value,
                    hour.requests,
                    hour.errors,
                    hour.p95_ms,
                    baseline.error_rate,
                    baseline.p95_ms,
                )
                sent += await self._send(account_id, kind, last, accountkinds.ANOMALY, data, now)
        return sent

    # -- look-to-book --------------------------------------------------------------------------------------

    async def look_to_book(self, now: dt.datetime) -> int:
        if self.bookings is None:
            return 0
        today = now.astimezone(dt.UTC).date()
        first = today - dt.timedelta(days=looktobook.WINDOW_DAYS - 1)
        sent = 0
        for account_id, target in await self.repo.look_to_book_targets():
            searches = await self.repo.searches_per_day(account_id, first, today)
            window = looktobook.Window(sum(searches.values()), 0)
            if not looktobook.exceeded(window, target):
                continue  # not even with no booking at all: webhookd need not be asked
            booked = await self.bookings(account_id, first)
            window = looktobook.Window(window.searches, sum(booked.values()))
            last = await self.repo.traffic_alert_sent(account_id, LOOK_TO_BOOK_KIND)
            if not looktobook.should_alert(window, target, last, now):
                continue
            data = accountkinds.look_to_book_exceeded(first, today, window.searches, window.bookings, target)
            sent += await self._send(
                account_id, LOOK_TO_BOOK_KIND, last, accountkinds.LOOK_TO_BOOK, data, now
            )
        return sent

    async def _send(
        self,
        account_id: str,
        kind: str,
        last: dt.datetime | None,
        event_kind: str,
        data: dict[str, object],
        now: dt.datetime,
    ) -> int:
        event = OutboxEvent(
            id=new_id("obx"),
            account_id=account_id,
            environment=ENVIRONMENT,
            type=event_kind,
            state=STATES[event_kind],
            data=dict(data),
            created_at=now,
        )
        if not await self.repo.send_traffic_alert(kind, last, event):
            return 0
        log.info("traffic alert queued", extra={"account_id": account_id, "kind": kind})
        self.on_queued()
        return 1

    # -- the loop ------------------------------------------------------------------------------------------

    async def evaluate(self) -> int:
        now = self.clock.now()
        return await self.anomalies(now) + await self.look_to_book(now)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self.hooks is not None:
            await self.hooks.close()

    async def _run(self) -> None:
        while True:
            try:
                await self.evaluate()
            except Exception as exc:
                if OUTAGES.count(exc) is None:
                    log.exception("traffic alerts: evaluation failed")
            await asyncio.sleep(self.interval)  # real time: a FakeClock must not spin it
