"""The delivery queue: the worker's port (``Queue``) and what every store shares (``StatementQueue``).

Every write to the deliveries table is a named statement of ``webhookd._queue_sql`` run by a queue, as
procrastinate's job manager runs the named queries of its ``queries.sql`` through whichever connector it
was given. Each step (a cycle's record then claim, a fan-out, a recovery...) is written once here, as a
generator that yields ``(statement name, parameters)`` and is sent what the statement answers; a store
only runs named statements:

- ``SqliteQueue`` runs a whole step inside its own thread, one hop per step (``drive``);
- ``PostgresQueue`` awaits each statement on its own asyncpg connection (``drive_async``);
- ``MemoryQueue`` runs each name's Python twin on dicts, so the worker's cycle is tested without a database.

The sandbox clock (``advance_sandbox``) moves an account's sandbox schedule forward in one step of its own.

Fan-out, an endpoint's deletion and a hold by hand are written in the repository's own transaction (the
event or endpoint they go with commits with them): ``conn`` is that SQLAlchemy connection, and the same
named statements run on it. The store is picked once, at start (``webhookd._queues.new_queue``).
"""

from __future__ import annotations

import abc
import datetime as dt
from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import Any, Protocol, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection

from svckit import catalog
from svckit.webhook_status import DeliveryStatus
from webhookd import _queue_rows as qr
from webhookd import _queue_sql as q
from webhookd._admission import NO_SKIPS, Skips
from webhookd._delivery_counts import count_rows, cutoffs
from webhookd._repository import (
    Alert,
    AttemptRecord,
    Claim,
    DeliveryRecord,
    DeliveryResult,
    EndpointRecord,
    Stats,
)
from webhookd._rows import DeliveryRow, EndpointRow, attempt_row, delivery_of, delivery_row, pending_row
from webhookd._times import at_us, from_us, us

T = TypeVar("T")
# A step: yields (statement name, parameters), is sent each statement's answer, returns its own.
Step = Generator[tuple[str, Any], Any, T]


class Queue(Protocol):
    """What the delivery worker needs of storage."""

    async def record_and_claim(
        self,
        outcomes: Sequence[DeliveryResult],
        owner: str,
        now: dt.datetime,
        limit: int,
        lease_until: dt.datetime,
        skips: Skips = NO_SKIPS,
    ) -> tuple[list[Alert], list[Claim]]:
        """One cycle, one transaction: write ``outcomes`` (their leases held by ``owner``), then lease up
        to ``limit`` due deliveries to ``owner`` until ``lease_until`` (none when ``limit`` is 0), leaving
        what ``skips`` names in the table (``webhookd._admission``)."""
        ...

    async def claim_due(
        self, now: dt.datetime, limit: int, lease_until: dt.datetime, owner: str
    ) -> list[Claim]: ...

    async def record_outcomes(
        self, outcomes: Sequence[DeliveryResult], owner: str, now: dt.datetime
    ) -> list[Alert]: ...

    async def next_due(self) -> dt.datetime | None: ...

    async def next_due_after(self, now: dt.datetime) -> dt.datetime | None: ...


def drive(step: Step[T], run: Callable[[str, Any], Any]) -> T:
    """Run ``step`` to its end, each statement by ``run(name, params)``."""
    try:
        request = next(step)
        while True:
            request = step.send(run(*request))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def drive_async(step: Step[T], run: Callable[[str, Any], Awaitable[Any]]) -> T:
    """``drive`` with a statement runner that awaits."""
    try:
        request = next(step)
        while True:
            request = step.send(await run(*request))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


# The steps, written once.


def one(name: str, params: Any) -> Step[Any]:
    """A single statement."""
    return (yield name, params)


def record(rows: qr.ResultRows, owner: str) -> Step[list[tuple[Any, ...]]]:
    """Write a cycle's results; the new alerts as ``insert_alert``'s rows."""
    yield "record_results", (
        rows.t, owner, rows.attempts, rows.counts, rows.deliveries, rows.finished, rows.retried
    )  # fmt: skip
    alerts: list[tuple[Any, ...]] = []
    notices = list(rows.exhausted)
    for endpoint_id, reason in rows.disabling:
        disabled = qr.targeted((yield "disable_endpoint", (reason, rows.t, endpoint_id)))
        if disabled is not None:
            alert = qr.alert_row(endpoint_id, reason, disabled, rows.t)
            yield "insert_alert", alert
            alerts.append(alert)
            data = catalog.endpoint_disabled(endpoint_id, disabled[2], reason, at_us(rows.t))
            notices.append(qr.notice_row(disabled, endpoint_id, "endpoint.disabled", data, rows.t))
    for endpoint_id, (level, attempts, error) in rows.levels.items():
        raised = qr.targeted((yield "raise_failing", (level, endpoint_id)))
        if raised is not None:
            data = catalog.endpoint_failing(endpoint_id, raised[2], level, attempts, error)
            notices.append(qr.notice_row(raised, endpoint_id, "endpoint.failing", data, rows.t))
    for endpoint_id in sorted(rows.recovered):
        cleared = qr.targeted((yield "clear_failing", (endpoint_id,)))
        if cleared is not None:
            data = catalog.endpoint_recovered(endpoint_id, cleared[2])
            notices.append(qr.notice_row(cleared, endpoint_id, "endpoint.recovered", data, rows.t))
    if notices:
        yield "insert_notices", notices
    if rows.failing:
        yield from hold(rows.holds())
    return alerts


def result_parts(params: Sequence[Any]) -> list[tuple[str, Any]]:
    """``record_results`` as the statements it is made of, each with its parameters (for a store that
    runs it part by part)."""
    t, owner, attempts, counts, deliveries, finished, retried = params
    parts: list[tuple[str, Any]] = []
    if attempts:
        parts += [("record_attempts", ((), attempts)), ("count_attempts", counts)]
    parts.append(("record_deliveries", ((t, owner), deliveries)))
    if finished:
        parts.append(("finish_pending", ((owner,), finished)))
    if retried:
        parts.append(("retry_pending", ((owner,), retried)))
    return parts


def hold(pairs: list[tuple[int, str]]) -> Step[None]:
    """Hold what waits, unleased, for each (now, endpoint id) whose endpoint is disabled."""
    yield "hold", pairs
    yield "hold_pending", [(endpoint_id,) for _t, endpoint_id in pairs]


def fan_out(deliveries: Sequence[DeliveryRecord]) -> Step[None]:
    """New deliveries, and the queue rows of the pending ones."""
    yield "insert_deliveries", [delivery_row(d) for d in deliveries]
    # A polling endpoint's go to its poll queue instead (``webhookd._polls``): the worker never claims them.
    pending = [pending_row(d) for d in deliveries if d.status == DeliveryStatus.PENDING and not d.polled]
    if pending:
        yield "insert_pending", pending


def unorder(endpoint_id: str) -> Step[int]:
    changed = yield "unorder", (endpoint_id,)
    yield "unorder_pending", (endpoint_id,)
    return int(changed)


def fail_endpoint(endpoint_id: str, now_us: int) -> Step[int]:
    yield "fail_pending", (endpoint_id,)
    return int((yield "fail_deliveries", (now_us, endpoint_id)))


def recover(params: tuple[Any, ...]) -> Step[int]:
    """(now, endpoint id[, created since]): the queue rows first, while the deliveries are not pending."""
    name = "recover_since" if len(params) > 2 else "recover"
    yield f"{name}_pending", params
    return int((yield name, params))


def cycle(
    rows: qr.ResultRows | None, owner: str, claim: tuple[Any, ...] | None
) -> Step[tuple[list[tuple[Any, ...]], qr.Claimed]]:
    """The worker's cycle: record (if there are results), then claim (if there is room)."""
    alerts = (yield from record(rows, owner)) if rows is not None else []
    claimed = (yield "claim", claim) if claim is not None else qr.NOTHING_CLAIMED
    return alerts, claimed


def manual_attempt(
    attempt: tuple[Any, ...], counts: list[tuple[Any, ...]], delivery_id: str, succeeded: bool, now_us: int
) -> Step[None]:
    yield "record_attempts", ((), [attempt])
    yield "count_attempts", counts
    name = "manual_succeeded" if succeeded else "manual_failed"
    yield name, (now_us, delivery_id)
    yield f"{name}_pending", (delivery_id,)


def advance_sandbox(by_us: int, now_us: int, account_id: str) -> Step[int]:
    """The sandbox clock: bring the account's sandbox schedule forward; how many of its deliveries are due."""
    yield "advance_sandbox", (by_us, now_us, account_id)
    yield "advance_sandbox_pending", (by_us, now_us, account_id)
    (due,) = yield "sandbox_due", (now_us, account_id)
    return int(due)


def stats(now_us: int) -> Step[tuple[int, int | None, int]]:
    """(pending, the oldest due time of those not being sent, leases run out). A delivery whose lease ran
    out (its holder died) is not being sent either: it has waited since it was due."""
    (depth,) = yield "queue_depth", ()
    (oldest,) = yield "oldest_due", (now_us,)
    expired, expired_due = yield "lease_expired", (now_us,)
    due = [int(t) for t in (oldest, expired_due) if t is not None]
    return int(depth), min(due, default=None), int(expired)


class StatementQueue(abc.ABC):
    """A store of the queue: runs the steps above, one transaction each, by statement name."""

    dialect: str  # whose texts of the statements it runs: "sqlite", "postgresql" (or "memory")
    single_process: bool  # True: every lease left at start is a dead predecessor's

    def __init__(self, endpoint_from_row: Callable[[Any], EndpointRecord]) -> None:
        self._endpoint_from_row = endpoint_from_row

    @abc.abstractmethod
    async def _run(self, step: Step[T], *, write: bool = True) -> T:
        """Run ``step`` in one transaction of the store's own (``write``: one that may write)."""

    @abc.abstractmethod
    async def close(self) -> None: ...

    async def _run_in(self, conn: AsyncConnection | None, step: Step[T]) -> T:
        """Run ``step`` in the caller's transaction ``conn`` (SQLAlchemy's), or in one of our own."""
        if conn is None:
            return await self._run(step)

        async def run(name: str, params: Any) -> Any:
            statement = q.STATEMENTS[name]
            text = statement.postgres_text() if self.dialect == "postgresql" else statement.sqlite_text()
            if statement.kind is q.Kind.MANY:
                if params:
                    await conn.exec_driver_sql(text, list(params))
                return None
            if statement.kind is q.Kind.EXEC:
                return int((await conn.exec_driver_sql(text, tuple(params))).rowcount or 0)
            if statement.kind is q.Kind.ONE:
                return (await conn.exec_driver_sql(text, tuple(params))).first()
            raise ValueError(
                f"{name}: a {statement.kind.value} statement runs in the queue's own transaction"
            )

        return await drive_async(step, run)

    # The worker's cycle

    async def record_and_claim(
        self,
        outcomes: Sequence[DeliveryResult],
        owner: str,
        now: dt.datetime,
        limit: int,
        lease_until: dt.datetime,
        skips: Skips = NO_SKIPS,
    ) -> tuple[list[Alert], list[Claim]]:
        # Rows are built before the store's hop and claims after it: a store does nothing but run statements.
        rows = qr.ResultRows(outcomes, us(now)) if outcomes else None
        claim = (us(lease_until), owner, us(now), limit, *skips.params()) if limit > 0 else None
        if rows is None and claim is None:
            return [], []  # no transaction for nothing
        alert_rows, claimed = await self._run(cycle(rows, owner, claim))
        return qr.alerts_of(alert_rows, now), self._claims(claimed)

    def _claims(self, claimed: qr.Claimed) -> list[Claim]:
        """Claims, oldest delivery first."""
        endpoints = {k: self._endpoint_from_row(EndpointRow(*r)) for k, r in claimed.endpoints.items()}
        claims = []
        for r in claimed.rows:
            d = delivery_of(DeliveryRow(*r[: q.DELIVERY_WIDTH]))
            claims.append(Claim(d, bytes(claimed.bodies[d.event_id]), endpoints.get(d.endpoint_id)))
        claims.sort(key=lambda c: c.delivery.created_at)
        return claims

    async def claim_due(
        self, now: dt.datetime, limit: int, lease_until: dt.datetime, owner: str
    ) -> list[Claim]:
        _alerts, claims = await self.record_and_claim([], owner, now, limit, lease_until)
        return claims

    async def record_outcomes(
        self, outcomes: Sequence[DeliveryResult], owner: str, now: dt.datetime
    ) -> list[Alert]:
        alerts, _claims = await self.record_and_claim(outcomes, owner, now, 0, now)
        return alerts

    async def release_leases(self, now: dt.datetime) -> int:
        """At start: hand back the leases no live process can hold (with several processes, none: a
        killed process's leases run out by themselves)."""
        if not self.single_process:
            return 0
        return int(await self._run(one("release_leases", ())))

    async def _read_one(self, name: str, params: Any) -> Any:
        """One reading statement: a snapshot of its own is enough (a store may run it without a transaction
        block: on PostgreSQL, one round trip instead of BEGIN, the statement and COMMIT)."""
        return await self._run(one(name, params), write=False)

    async def next_due(self) -> dt.datetime | None:
        (value,) = await self._read_one("next_due", ())
        return from_us(value)

    async def next_due_after(self, now: dt.datetime) -> dt.datetime | None:
        (value,) = await self._read_one("next_due_after", (us(now),))
        return from_us(value)

    async def stats(self, now: dt.datetime) -> Stats:
        depth, oldest, expired = await self._run(stats(us(now)), write=False)
        age = max(0.0, (us(now) - int(oldest)) / 1_000_000) if oldest is not None else 0.0
        return Stats(depth, age, expired)

    # What the service writes

    async def fan_out(
        self, deliveries: Sequence[DeliveryRecord], conn: AsyncConnection | None = None
    ) -> None:
        """New deliveries (an event's fan-out, a test send)."""
        await self._run_in(conn, fan_out(deliveries))

    async def hold(self, endpoint_id: str, now: dt.datetime, conn: AsyncConnection | None = None) -> None:
        """Keep what a disabled endpoint has waiting (nothing if it is enabled)."""
        await self._run_in(conn, hold([(us(now), endpoint_id)]))

    async def unorder(self, endpoint_id: str, conn: AsyncConnection | None = None) -> int:
        """The endpoint was made unordered: nothing of it waits for an earlier delivery any more."""
        return await self._run_in(conn, unorder(endpoint_id))

    async def fail_endpoint(
        self, endpoint_id: str, now: dt.datetime, conn: AsyncConnection | None = None
    ) -> int:
        """A deleted endpoint's waiting and held deliveries fail."""
        return await self._run_in(conn, fail_endpoint(endpoint_id, us(now)))

    async def record_manual_attempt(self, attempt: AttemptRecord, succeeded: bool, now: dt.datetime) -> None:
        await self._run(
            manual_attempt(
                attempt_row(attempt), count_rows([attempt]), attempt.delivery_id, succeeded, us(now)
            )
        )

    async def recover(self, endpoint_id: str, since: dt.datetime | None, now: dt.datetime) -> int:
        """Held and failed deliveries (created at or after ``since``) of the endpoint are due now."""
        if since is None:
            return await self._run(recover((us(now), endpoint_id)))
        return await self._run(recover((us(now), endpoint_id, us(since))))

    async def recoverable(self, endpoint_id: str, since: dt.datetime | None) -> int:
        """How many deliveries ``recover`` would queue again (a dry run)."""
        (count,) = await self._run(one("recoverable", (endpoint_id, us(since) if since else 0)), write=False)
        return int(count)

    async def advance_sandbox(self, account_id: str, by: dt.timedelta, now: dt.datetime) -> int:
        """The account's sandbox deliveries waiting for a later attempt become due ``by`` earlier (never
        before ``now``; live ones are never moved). Answers how many of its sandbox deliveries are due now."""
        return int(await self._run(advance_sandbox(by // dt.timedelta(microseconds=1), us(now), account_id)))

    async def adopt(self, now: dt.datetime) -> int:
        """Queue the deliveries a process of a release before revision 0009 queued and no longer holds
        (a rolling upgrade); their count."""
        return int(await self._run(one("adopt", (us(now),))))

    async def purge_attempts(self, before: dt.datetime) -> int:
        return int(await self._run(one("purge_attempts", (us(before),))))

    async def purge_delivery_counts(self, now: dt.datetime) -> int:
        """Delete the delivery counts past each grain's retention (``webhookd._delivery_counts``)."""
        removed = 0
        for grain, before in cutoffs(now):
            removed += int(await self._run(one("purge_delivery_counts", (grain, before))))
        return removed

    async def purge_sandbox_attempts(self, before: dt.datetime) -> int:
        return int(await self._run(one("purge_sandbox_attempts", (us(before),))))
