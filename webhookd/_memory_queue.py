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
from webhookd import _queue_rows as qr
from webhookd import _queue_sql as q
from webhookd._health import DISABLED_LEVEL
from webhookd._ordering import held_back
from webhookd._queue import StatementQueue, Step, drive, result_parts
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
    PENDING_COLUMNS,
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
        self.pending: dict[str, Row] = {}  # wh_pending: the queue rows, by delivery id
        self.attempts: list[Row] = []
        # wh_delivery_counts: (account, environment, grain, period, endpoint, outcome) -> sums
        self.delivery_counts: dict[tuple[Any, ...], list[int]] = {}
        self.alerts: list[Row] = []
        self.notices: list[Row] = []
        self._statements: dict[str, Callable[[Any], Any]] = {
            "claim": self._claim,
            "record_results": self._record_results,
            "record_attempts": self._record_attempts,
            "count_attempts": self._count_attempts,
            "purge_delivery_counts": self._purge_delivery_counts,
            "record_deliveries": self._record_deliveries,
            "finish_pending": self._finish_pending,
            "retry_pending": self._retry_pending,
            "disable_endpoint": self._disable_endpoint,
            "insert_alert": self._insert_alert,
            "raise_failing": self._raise_failing,
            "clear_failing": self._clear_failing,
            "insert_notices": self._insert_notices,
            "hold": self._hold,
            "hold_pending": self._hold_pending,
            "release_leases": self._release_leases,
            "insert_deliveries": self._insert_deliveries,
            "insert_pending": self._insert_pending,
            "fail_pending": self._fail_pending,
            "fail_deliveries": self._fail_deliveries,
            "unorder": self._unorder,
            "unorder_pending": self._unorder_pending,
            "manual_succeeded": lambda p: self._manual(p, succeeded=True),
            "manual_failed": lambda p: self._manual(p, succeeded=False),
            "manual_succeeded_pending": lambda p: int(self.pending.pop(p[0], None) is not None),
            "manual_failed_pending": self._manual_failed_pending,
            "recover_pending": lambda p: self._recover_pending(p[0], p[1], None),
            "recover_since_pending": lambda p: self._recover_pending(p[0], p[1], p[2]),
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
            "advance_sandbox_pending": self._advance_sandbox_pending,
            "sandbox_due": self._sandbox_due,
            "adopt": lambda p: 0,  # one process of one release: nothing queued by another
        }
        if self._statements.keys() != q.STATEMENTS.keys():
            raise TypeError(f"MemoryQueue runs {sorted(self._statements)}, not {sorted(q.STATEMENTS)}")

    def statement_names(self) -> frozenset[str]:
        return frozenset(self._statements)

    async def _run(self, step: Step[T], *, write: bool = True) -> T:
        saved = copy.deepcopy(
            (self.endpoints, self.deliveries, self.pending, self.attempts, self.alerts, self.notices)
        )
        try:
            return drive(step, lambda name, params: self._statements[name](params))
        except BaseException:
            self.endpoints, self.deliveries, self.pending, self.attempts, self.alerts, self.notices = saved
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

    def _claim(self, params: tuple[Any, ...]) -> qr.Claimed:
        lease_until, owner, now, limit, *skip_json, after, freed_json = params
        endpoints_skipped, accounts, environments, retries_in, probation, proven = (
            set(json.loads(j)) for j in skip_json
        )

        def taken(d: Row) -> bool:
            return (
                d["next_attempt_at"] <= now
                and d["endpoint_id"] not in endpoints_skipped
                and f"{d['environment']}:{d['account_id']}" not in accounts
                and d["environment"] not in environments
                and (d["attempt_count"] == 0 or d["environment"] not in retries_in)
                and (f"{d['environment']}:{d['account_id']}" not in probation or d["endpoint_id"] in proven)
                and self._free(d)
            )

        walked = sorted(
            (d for d in self.pending.values() if after < d["next_attempt_at"] and taken(d)),
            key=lambda d: d["next_attempt_at"],
        )[:limit]
        heads = []  # the first pending row of each freed key, by event seq
        for endpoint_id, key in json.loads(freed_json):
            keyed = [
                d
                for d in self.pending.values()
                if d["endpoint_id"] == endpoint_id and d["ordering_key"] == key
            ]
            if keyed:
                head = min(keyed, key=lambda d: d["event_seq"])
                if taken(head) and head not in walked and head not in heads:
                    heads.append(head)
        due = walked + heads
        for p in due:
            p["next_attempt_at"], p["lease_owner"] = lease_until, owner
        claimed = [self.deliveries[p["id"]] for p in due]
        rows = [tuple(d[c] for c in DELIVERY_COLUMNS) for d in claimed]
        live = {k: ep for k, ep in self.endpoints.items() if ep["deleted_at"] is None}
        endpoints: dict[str, Sequence[Any]] = {
            d["endpoint_id"]: tuple(live[d["endpoint_id"]][c] for c in ENDPOINT_COLUMNS)
            for d in claimed
            if d["endpoint_id"] in live
        }
        return qr.Claimed(rows, {d["event_id"]: self.envelopes[d["event_id"]] for d in claimed}, endpoints)

    def _free(self, p: Row) -> bool:
        """A queue row not held back by an earlier pending delivery of its ordering key
        (``webhookd._ordering``): the other queue rows are the pending deliveries."""
        if p["ordering_key"] is None:
            return True
        earlier = (
            (o["ordering_key"], o["event_seq"], D.PENDING)
            for o in self.pending.values()
            if o["endpoint_id"] == p["endpoint_id"] and o["id"] != p["id"]
        )
        return not held_back(p["ordering_key"], p["event_seq"], earlier)

    def _unorder(self, params: tuple[str]) -> int:
        keyed = [
            d
            for d in self.deliveries.values()
            if d["endpoint_id"] == params[0] and d["ordering_key"] is not None and d["status"] != D.SUCCEEDED
        ]
        for d in keyed:
            d["ordering_key"] = None
        return len(keyed)

    def _unorder_pending(self, params: tuple[str]) -> int:
        keyed = [p for p in self.pending.values() if p["endpoint_id"] == params[0] and p["ordering_key"]]
        for p in keyed:
            p["ordering_key"] = None
        return len(keyed)

    def _count_attempts(self, rows: Sequence[tuple[Any, ...]]) -> None:
        for row in rows:
            key, sums = row[:6], row[6:]
            total = self.delivery_counts.setdefault(key, [0] * len(sums))
            for i, value in enumerate(sums):
                total[i] += value

    def _purge_delivery_counts(self, params: tuple[int, int]) -> int:
        grain, before = params
        gone = [k for k in self.delivery_counts if k[2] == grain and k[3] < before]
        for k in gone:
            del self.delivery_counts[k]
        return len(gone)

    def _record_results(self, params: Any) -> None:
        for name, part in result_parts(params):
            self._statements[name](part)

    def _record_attempts(self, params: tuple[tuple[()], Sequence[tuple[Any, ...]]]) -> None:
        self.attempts.extend(dict(zip(ATTEMPT_COLUMNS, row, strict=True)) for row in params[1])

    def _record_deliveries(self, params: tuple[tuple[int, str], Sequence[tuple[Any, ...]]]) -> None:
        (t, owner), rows = params
        for status, nxt, delivery_id, inc in rows:
            d, p = self.deliveries.get(delivery_id), self.pending.get(delivery_id)
            if d is None or p is None or p["lease_owner"] != owner:
                continue
            d.update(status=status, next_attempt_at=nxt, due_at=nxt, updated_at=t)
            d["attempt_count"] += inc
            d["schedule_count"] += inc

    def _finish_pending(self, params: tuple[tuple[str], Sequence[tuple[str]]]) -> None:
        (owner,), rows = params
        for (delivery_id,) in rows:
            p = self.pending.get(delivery_id)
            if p is not None and p["lease_owner"] == owner:
                del self.pending[delivery_id]

    def _retry_pending(self, params: tuple[tuple[str], Sequence[tuple[int, str, int]]]) -> None:
        (owner,), rows = params
        for nxt, delivery_id, inc in rows:
            p = self.pending.get(delivery_id)
            if p is not None and p["lease_owner"] == owner:
                p.update(next_attempt_at=nxt, lease_owner=None, attempt_count=p["attempt_count"] + inc)

    def _disable_endpoint(self, params: tuple[str, int, str]) -> tuple[str, str, str, str, str] | None:
        reason, t, endpoint_id = params
        ep = self.endpoints.get(endpoint_id)
        if ep is None or ep["status"] != E.ENABLED:
            return None
        ep.update(status=str(E.DISABLED), disabled_reason=reason, updated_at=t, failing_level=DISABLED_LEVEL)
        return ep["account_id"], ep["environment"], ep["url"], ep["destination_type"], ep["destination"]

    def _raise_failing(self, params: tuple[int, str]) -> tuple[str, str, str, str, str] | None:
        level, endpoint_id = params
        ep = self.endpoints.get(endpoint_id)
        if ep is None or ep["failing_level"] >= level or ep["status"] != E.ENABLED:
            return None
        ep["failing_level"] = level
        return ep["account_id"], ep["environment"], ep["url"], ep["destination_type"], ep["destination"]

    def _clear_failing(self, params: tuple[str]) -> tuple[str, str, str, str, str] | None:
        ep = self.endpoints.get(params[0])
        if ep is None or ep["failing_level"] <= 0:
            return None
        ep["failing_level"] = 0
        return ep["account_id"], ep["environment"], ep["url"], ep["destination_type"], ep["destination"]

    def _recoverable(self, params: tuple[str, int]) -> tuple[int]:
        endpoint_id, since = params
        return (len(self._recoverable_of(endpoint_id, since)),)

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
                if self.pending[d["id"]]["lease_owner"] is None:
                    d.update(status=str(D.HELD), updated_at=t)

    def _hold_pending(self, params: Sequence[tuple[str]]) -> None:
        for (endpoint_id,) in params:
            ep = self.endpoints.get(endpoint_id)
            if ep is None or ep["status"] != E.DISABLED:
                continue
            for d in self._waiting(endpoint_id, (D.HELD,)):
                self.pending.pop(d["id"], None)

    def _release_leases(self, params: tuple[()]) -> int:
        leased = [p for p in self.pending.values() if p["lease_owner"]]
        for p in leased:
            due = self.deliveries[p["id"]]["due_at"]
            p.update(next_attempt_at=p["next_attempt_at"] if due is None else due, lease_owner=None)
        return len(leased)

    def _insert_deliveries(self, params: Sequence[tuple[Any, ...]]) -> None:
        _insert(self.deliveries, DELIVERY_INSERT_COLUMNS, params, "insert_deliveries")

    def _insert_pending(self, params: Sequence[tuple[Any, ...]]) -> None:
        _insert(self.pending, PENDING_COLUMNS, params, "insert_pending")

    def _fail_pending(self, params: tuple[str]) -> int:
        gone = [d["id"] for d in self._waiting(params[0], (D.PENDING,)) if d["id"] in self.pending]
        for delivery_id in gone:
            del self.pending[delivery_id]
        return len(gone)

    def _fail_deliveries(self, params: tuple[int, str]) -> int:
        t, endpoint_id = params
        waiting = self._waiting(endpoint_id, (D.PENDING, D.HELD))
        for d in waiting:
            d.update(status=str(D.FAILED), updated_at=t)
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

    def _manual_failed_pending(self, params: tuple[str]) -> int:
        p = self.pending.get(params[0])
        if p is None:
            return 0
        p["attempt_count"] += 1
        return 1

    def _recoverable_of(self, endpoint_id: str, since: int | None) -> list[Row]:
        return [
            d
            for d in self._waiting(endpoint_id, (D.HELD, D.FAILED))
            if since is None or d["created_at"] >= since
        ]

    def _recover_pending(self, t: int, endpoint_id: str, since: int | None) -> int:
        found = self._recoverable_of(endpoint_id, since)
        self._insert_pending(
            [
                tuple({**d, "next_attempt_at": t, "lease_owner": None}[c] for c in PENDING_COLUMNS)
                for d in found
            ]
        )
        return len(found)

    def _recover(self, t: int, endpoint_id: str, since: int | None) -> int:
        found = self._recoverable_of(endpoint_id, since)
        for d in found:
            d.update(status=str(D.PENDING), next_attempt_at=t, due_at=t, schedule_count=0, updated_at=t)
        return len(found)

    def _queue_depth(self, params: tuple[()]) -> tuple[int]:
        return (len(self.pending),)

    def _oldest_due(self, params: tuple[int]) -> tuple[int | None]:
        due = [
            p["next_attempt_at"]
            for p in self.pending.values()
            if p["lease_owner"] is None and p["next_attempt_at"] <= params[0] and self._free(p)
        ]
        return (min(due, default=None),)

    def _lease_expired(self, params: tuple[int]) -> tuple[int, int | None]:
        expired = [
            self.deliveries[p["id"]]["due_at"] or p["next_attempt_at"]
            for p in self.pending.values()
            if p["lease_owner"] is not None and p["next_attempt_at"] <= params[0]
        ]
        return len(expired), min(expired, default=None)

    def _next_due(self, params: tuple[()]) -> tuple[int | None]:
        due = [p["next_attempt_at"] for p in self.pending.values() if self._free(p)]
        return (min(due, default=None),)

    def _next_due_after(self, params: tuple[int]) -> tuple[int | None]:
        due = [p["next_attempt_at"] for p in self.pending.values() if p["next_attempt_at"] > params[0]]
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
        moved = [p for p in self._sandbox_pending(account_id) if p["next_attempt_at"] > t]
        for p in moved:
            d = self.deliveries[p["id"]]
            due = max(d["due_at"] - by, t)
            d.update(next_attempt_at=due, due_at=due, updated_at=t)
        return len(moved)

    def _advance_sandbox_pending(self, params: tuple[int, int, str]) -> int:
        by, t, account_id = params
        moved = [p for p in self._sandbox_pending(account_id) if p["next_attempt_at"] > t]
        for p in moved:
            p["next_attempt_at"] = max(p["next_attempt_at"] - by, t)
        return len(moved)

    def _sandbox_due(self, params: tuple[int, str]) -> tuple[int]:
        t, account_id = params
        return (sum(1 for p in self._sandbox_pending(account_id) if p["next_attempt_at"] <= t),)

    def _sandbox_pending(self, account_id: str) -> list[Row]:
        """The queue rows of the account's sandbox deliveries waiting, unleased, for an attempt."""
        return [
            p
            for p in self.pending.values()
            if p["account_id"] == account_id and p["environment"] == Env.SANDBOX and p["lease_owner"] is None
        ]

    def _waiting(self, endpoint_id: str, statuses: tuple[str, ...]) -> list[Row]:
        return [
            d for d in self.deliveries.values() if d["endpoint_id"] == endpoint_id and d["status"] in statuses
        ]


class _Named:
    """A dict row read by attribute, as the row conversions read rows."""

    def __init__(self, row: Row) -> None:
        self.__dict__.update(row)


def _insert(
    table: dict[str, Row], columns: Sequence[str], params: Sequence[tuple[Any, ...]], name: str
) -> None:
    """Rows of ``columns`` into ``table`` by id, all or none: an id taken (or twice in ``params``) is the
    primary key's error."""
    rows = [dict(zip(columns, row, strict=True)) for row in params]
    if any(r["id"] in table for r in rows) or len({r["id"] for r in rows}) < len(rows):
        raise ValueError(f"{name}: a delivery id is taken")
    table.update((r["id"], r) for r in rows)
