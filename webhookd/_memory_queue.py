"""The delivery queue in memory: each named statement of ``webhookd._queue_sql`` has its Python twin here,
keyed by the same name, over tables of dicts (one per row, keyed by ``webhookd._tables``' column names).

It runs the same steps as the SQL stores (``webhookd._queue``), so the worker's cycle (claim, send, record
a success, a retry, a disabled endpoint) is tested without a database. One process, no lease outlives it;
a step that raises leaves the tables as they were. Not a store for the service: tests only.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from svckit.vocabulary import Environment as Env
from svckit.webhook_status import DeliveryStatus as D
from svckit.webhook_status import EndpointStatus as E
from webhookd import _queue_sql as q
from webhookd._health import DISABLED_LEVEL
from webhookd._ordering import held_back
from webhookd._queue import StatementQueue, Step, drive
from webhookd._repository import DeliveryRecord, EndpointRecord
from webhookd._rows import DeliveryRow, delivery_of, endpoint_of, endpoint_values
from webhookd._secretbox import SecretBox
from webhookd._tables import (
    ALERT_INSERT_COLUMNS,
    ATTEMPT_COLUMNS,
    DELIVERY_COLUMNS,
    DELIVERY_INSERT_COLUMNS,
    ENDPOINT_COLUMNS,
    NOTICE_INSERT_COLUMNS,
)

T = TypeVar("T")
Row = dict[str, Any]


class MemoryQueue(StatementQueue):
    dialect = "memory"
    single_process = True

    def __init__(self, endpoint_from_row: Callable[[Any], EndpointRecord] | None = None) -> None:
        box = SecretBox()
        super().__init__(endpoint_from_row or (lambda row: endpoint_of(row, box)))
        self._box = box
        self.endpoints: dict[str, Row] = {}
        self.envelopes: dict[str, bytes] = {}  # event id -> envelope
        self.deliveries: dict[str, Row] = {}
        self.attempts: list[Row] = []
        self.alerts: list[Row] = []
        self.notices: list[Row] = []
        self._statements: dict[str, Callable[[Any], Any]] = {
            "claim": self._claim,
            "record_attempts": self._record_attempts,
            "record_deliveries": self._record_deliveries,
            "disable_endpoint": self._disable_endpoint,
            "insert_alert": self._insert_alert,
            "raise_failing": self._raise_failing,
            "clear_failing": self._clear_failing,
            "insert_notices": self._insert_notices,
            "hold": self._hold,
            "release_leases": self._release_leases,
            "insert_deliveries": self._insert_deliveries,
            "fail_deliveries": self._fail_deliveries,
            "unorder": self._unorder,
            "manual_succeeded": lambda p: self._manual(p, succeeded=True),
            "manual_failed": lambda p: self._manual(p, succeeded=False),
            "recover": lambda p: self._recover(p[0], p[1], None),
            "recover_since": lambda p: self._recover(p[0], p[1], p[2]),
            "recoverable": self._recoverable,
            "queue_depth": self._queue_depth,
            "oldest_due": self._oldest_due,
            "lease_expired": self._lease_expired,
            "next_due": self._next_due,
            "next_due_after": self._next_due_after,
            "purge_attempts": self._purge_attempts,
            "purge_sandbox_attempts": self._purge_sandbox_attempts,
            "advance_sandbox": self._advance_sandbox,
            "sandbox_due": self._sandbox_due,
        }
        if self._statements.keys() != q.STATEMENTS.keys():
            raise TypeError(f"MemoryQueue runs {sorted(self._statements)}, not {sorted(q.STATEMENTS)}")

    def statement_names(self) -> frozenset[str]:
        return frozenset(self._statements)

    async def _run(self, step: Step[T], *, write: bool = True) -> T:
        saved = copy.deepcopy((self.endpoints, self.deliveries, self.attempts, self.alerts, self.notices))
        try:
            return drive(step, lambda name, params: self._statements[name](params))
        except BaseException:
            self.endpoints, self.deliveries, self.attempts, self.alerts, self.notices = saved
            raise

    async def _run_in(self, conn: Any, step: Step[T]) -> T:
        return await self._run(step)  # no transaction but ours

    async def close(self) -> None:
        pass

    # What the service and the repository would have stored

    def add_endpoint(self, endpoint: EndpointRecord) -> None:
        values = endpoint_values(endpoint, self._box)
        self.endpoints[endpoint.id] = {**values, "deleted_at": None, "failing_level": endpoint.failing_level}

    def add_event(self, event_id: str, envelope: bytes) -> None:
        self.envelopes[event_id] = envelope

    def delivery(self, delivery_id: str) -> DeliveryRecord:
        return delivery_of(DeliveryRow(*(self.deliveries[delivery_id][c] for c in DELIVERY_COLUMNS)))

    def endpoint(self, endpoint_id: str) -> EndpointRecord:
        return endpoint_of(_Named(self.endpoints[endpoint_id]), self._box)

    # The statements' twins, by name (their parameters as in ``webhookd._queue_sql``)

    def _claim(self, params: tuple[Any, ...]) -> q.Claimed:
        lease_until, owner, now, limit, *skip_json = params
        endpoints_skipped, accounts, environments, retries_in = (set(json.loads(j)) for j in skip_json)
        due = sorted(
            (
                d
                for d in self.deliveries.values()
                if d["status"] == D.PENDING
                and d["next_attempt_at"] is not None
                and d["next_attempt_at"] <= now
                and d["endpoint_id"] not in endpoints_skipped
                and f"{d['environment']}:{d['account_id']}" not in accounts
                and d["environment"] not in environments
                and (d["attempt_count"] == 0 or d["environment"] not in retries_in)
                and self._free(d)
            ),
            key=lambda d: d["next_attempt_at"],
        )[:limit]
        for d in due:
            d["next_attempt_at"], d["lease_owner"] = lease_until, owner
        rows = [tuple(d[c] for c in DELIVERY_COLUMNS) for d in due]
        live = {k: ep for k, ep in self.endpoints.items() if ep["deleted_at"] is None}
        endpoints: dict[str, Sequence[Any]] = {
            d["endpoint_id"]: tuple(live[d["endpoint_id"]][c] for c in ENDPOINT_COLUMNS)
            for d in due
            if d["endpoint_id"] in live
        }
        return q.Claimed(rows, {d["event_id"]: self.envelopes[d["event_id"]] for d in due}, endpoints)

    def _free(self, d: Row) -> bool:
        """Not held back by an earlier pending delivery of its ordering key (``webhookd._ordering``)."""
        if d["ordering_key"] is None:
            return True
        earlier = (
            (o["ordering_key"], o["event_seq"], o["status"])
            for o in self.deliveries.values()
            if o["endpoint_id"] == d["endpoint_id"] and o["id"] != d["id"]
        )
        return not held_back(d["ordering_key"], d["event_seq"], earlier)

    def _unorder(self, params: tuple[str]) -> int:
        keyed = [
            d
            for d in self.deliveries.values()
            if d["endpoint_id"] == params[0] and d["ordering_key"] is not None and d["status"] != D.SUCCEEDED
        ]
        for d in keyed:
            d["ordering_key"] = None
        return len(keyed)

    def _record_attempts(self, params: tuple[tuple[()], Sequence[tuple[Any, ...]]]) -> None:
        self.attempts.extend(dict(zip(ATTEMPT_COLUMNS, row, strict=True)) for row in params[1])

    def _record_deliveries(self, params: tuple[tuple[int, str], Sequence[tuple[Any, ...]]]) -> None:
        (t, owner), rows = params
        for status, nxt, delivery_id, inc in rows:
            d = self.deliveries.get(delivery_id)
            if d is None or d["lease_owner"] != owner:
                continue
            d.update(status=status, next_attempt_at=nxt, due_at=nxt, lease_owner=None, updated_at=t)
            d["attempt_count"] += inc
            d["schedule_count"] += inc

    def _disable_endpoint(self, params: tuple[str, int, str]) -> tuple[str, str, str] | None:
        reason, t, endpoint_id = params
        ep = self.endpoints.get(endpoint_id)
        if ep is None or ep["status"] != E.ENABLED:
            return None
        ep.update(status=str(E.DISABLED), disabled_reason=reason, updated_at=t, failing_level=DISABLED_LEVEL)
        return ep["account_id"], ep["environment"], ep["url"]

    def _raise_failing(self, params: tuple[int, str]) -> tuple[str, str, str] | None:
        level, endpoint_id = params
        ep = self.endpoints.get(endpoint_id)
        if ep is None or ep["failing_level"] >= level or ep["status"] != E.ENABLED:
            return None
        ep["failing_level"] = level
        return ep["account_id"], ep["environment"], ep["url"]

    def _clear_failing(self, params: tuple[str]) -> tuple[str, str, str] | None:
        ep = self.endpoints.get(params[0])
        if ep is None or ep["failing_level"] <= 0:
            return None
        ep["failing_level"] = 0
        return ep["account_id"], ep["environment"], ep["url"]

    def _recoverable(self, params: tuple[str, int]) -> tuple[int]:
        endpoint_id, since = params
        return (
            sum(
                1
                for d in self.deliveries.values()
                if d["endpoint_id"] == endpoint_id
                and d["status"] in (D.HELD, D.FAILED)
                and d["created_at"] >= since
            ),
        )

    def _insert_notices(self, params: Sequence[tuple[Any, ...]]) -> None:
        for row in params:
            self.notices.append({**dict(zip(NOTICE_INSERT_COLUMNS, row, strict=True)), "published_at": None})

    def _insert_alert(self, params: tuple[Any, ...]) -> int:
        self.alerts.append(dict(zip(ALERT_INSERT_COLUMNS, (*params, None, ""), strict=True)))
        return 1

    def _hold(self, params: Sequence[tuple[int, str]]) -> None:
        for t, endpoint_id in params:
            ep = self.endpoints.get(endpoint_id)
            if ep is None or ep["status"] != E.DISABLED:
                continue
            for d in self._waiting(endpoint_id, (D.PENDING,)):
                if d["lease_owner"] is None:
                    d.update(status=str(D.HELD), updated_at=t)

    def _release_leases(self, params: tuple[()]) -> int:
        leased = [d for d in self.deliveries.values() if d["status"] == D.PENDING and d["lease_owner"]]
        for d in leased:
            d.update(next_attempt_at=d["due_at"], lease_owner=None)
        return len(leased)

    def _insert_deliveries(self, params: Sequence[tuple[Any, ...]]) -> None:
        rows = [dict(zip(DELIVERY_INSERT_COLUMNS, row, strict=True)) for row in params]
        if any(r["id"] in self.deliveries for r in rows) or len({r["id"] for r in rows}) < len(rows):
            raise ValueError("insert_deliveries: a delivery id is taken")
        self.deliveries.update((r["id"], r) for r in rows)

    def _fail_deliveries(self, params: tuple[int, str]) -> int:
        t, endpoint_id = params
        waiting = self._waiting(endpoint_id, (D.PENDING, D.HELD))
        for d in waiting:
            d.update(status=str(D.FAILED), updated_at=t, lease_owner=None)
        return len(waiting)

    def _manual(self, params: tuple[int, str], *, succeeded: bool) -> int:
        t, delivery_id = params
        d = self.deliveries.get(delivery_id)
        if d is None:
            return 0
        d.update(attempt_count=d["attempt_count"] + 1, updated_at=t)
        if succeeded:
            d.update(status=str(D.SUCCEEDED), next_attempt_at=None, due_at=None)
        return 1

    def _recover(self, t: int, endpoint_id: str, since: int | None) -> int:
        found = [
            d
            for d in self._waiting(endpoint_id, (D.HELD, D.FAILED))
            if since is None or d["created_at"] >= since
        ]
        for d in found:
            d.update(
                status=str(D.PENDING),
                next_attempt_at=t,
                due_at=t,
                schedule_count=0,
                lease_owner=None,
                updated_at=t,
            )
        return len(found)

    def _queue_depth(self, params: tuple[()]) -> tuple[int]:
        return (sum(1 for d in self.deliveries.values() if d["status"] == D.PENDING),)

    def _oldest_due(self, params: tuple[int]) -> tuple[int | None]:
        due = [
            d["next_attempt_at"]
            for d in self.deliveries.values()
            if d["status"] == D.PENDING
            and d["lease_owner"] is None
            and d["next_attempt_at"] is not None
            and d["next_attempt_at"] <= params[0]
            and self._free(d)
        ]
        return (min(due, default=None),)

    def _lease_expired(self, params: tuple[int]) -> tuple[int, int | None]:
        expired = [
            d["due_at"] or d["next_attempt_at"]
            for d in self.deliveries.values()
            if d["status"] == D.PENDING
            and d["lease_owner"] is not None
            and d["next_attempt_at"] is not None
            and d["next_attempt_at"] <= params[0]
        ]
        return len(expired), min(expired, default=None)

    def _next_due(self, params: tuple[()]) -> tuple[int | None]:
        due = [
            d["next_attempt_at"]
            for d in self.deliveries.values()
            if d["status"] == D.PENDING and d["next_attempt_at"] is not None and self._free(d)
        ]
        return (min(due, default=None),)

    def _next_due_after(self, params: tuple[int]) -> tuple[int | None]:
        due = [
            d["next_attempt_at"]
            for d in self.deliveries.values()
            if d["status"] == D.PENDING
            and d["next_attempt_at"] is not None
            and d["next_attempt_at"] > params[0]
        ]
        return (min(due, default=None),)

    def _purge_attempts(self, params: tuple[int]) -> int:
        kept = [a for a in self.attempts if a["attempted_at"] >= params[0]]
        purged, self.attempts = len(self.attempts) - len(kept), kept
        return purged

    def _purge_sandbox_attempts(self, params: tuple[int]) -> int:
        kept = [a for a in self.attempts if a["attempted_at"] >= params[0] or a["environment"] != Env.SANDBOX]
        purged, self.attempts = len(self.attempts) - len(kept), kept
        return purged

    def _advance_sandbox(self, params: tuple[int, int, str]) -> int:
        by, t, account_id = params
        moved = [d for d in self._sandbox_pending(account_id) if d["next_attempt_at"] > t]
        for d in moved:
            due = max(d["next_attempt_at"] - by, t)
            d.update(next_attempt_at=due, due_at=due, updated_at=t)
        return len(moved)

    def _sandbox_due(self, params: tuple[int, str]) -> tuple[int]:
        t, account_id = params
        return (sum(1 for d in self._sandbox_pending(account_id) if d["next_attempt_at"] <= t),)

    def _sandbox_pending(self, account_id: str) -> list[Row]:
        """The account's sandbox deliveries waiting, unleased, for an attempt."""
        return [
            d
            for d in self.deliveries.values()
            if d["account_id"] == account_id
            and d["environment"] == Env.SANDBOX
            and d["status"] == D.PENDING
            and d["lease_owner"] is None
            and d["next_attempt_at"] is not None
        ]

    def _waiting(self, endpoint_id: str, statuses: tuple[str, ...]) -> list[Row]:
        return [
            d for d in self.deliveries.values() if d["endpoint_id"] == endpoint_id and d["status"] in statuses
        ]


class _Named:
    """A dict row read by attribute, as the row conversions read rows."""

    def __init__(self, row: Row) -> None:
        self.__dict__.update(row)
