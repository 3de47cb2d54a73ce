"""Every step of the delivery queue as one named statement, and the rows they take.

Every write to the deliveries table is one of these, run only by a ``Queue`` (``webhookd._queue``), as
procrastinate keeps each job transition in its ``sql/queries.sql``: ``STATEMENTS`` is keyed by name, and
each queue (SQLite, PostgreSQL, memory) runs a statement by its name. Parameters are numbered (``$1`` for
PostgreSQL; ``sqlite`` turns them into SQLite's ``?1``, and the same tuple binds both). Column lists come
from the tables (``webhookd._tables``).

Where the dialects must differ the variants stand side by side: PostgreSQL claims with ``FOR UPDATE SKIP
LOCKED`` (several processes share the work) and joins the event bodies and endpoints into the claim, and
takes a cycle's results as arrays (``unnest``), one statement per table; SQLite (one process, one writer)
has neither, so it claims, then reads bodies and endpoints, and writes multi-row ``VALUES`` lists.

A claimed delivery's ``next_attempt_at`` is its lease expiry; ``due_at`` keeps when it was due. A result
is written only while its lease is held (``lease_owner``), so a result that comes back after its lease ran
out and the delivery was claimed again elsewhere cannot overwrite the newer claim.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from svckit import catalog
from svckit.ids import new_id
from svckit.vocabulary import Environment as Env
from svckit.webhook_status import DeliveryStatus as D
from svckit.webhook_status import EndpointStatus as E
from webhookd._health import DISABLED_LEVEL
from webhookd._ordering import HOLDS_BACK
from webhookd._repository import Alert, DeliveryResult
from webhookd._rows import attempt_row
from webhookd._tables import (
    ALERT_INSERT_COLUMNS,
    ATTEMPT_COLUMNS,
    DELIVERY_COLUMNS,
    DELIVERY_INSERT_COLUMNS,
    ENDPOINT_COLUMNS,
    NOTICE_INSERT_COLUMNS,
    spelled,
)
from webhookd._times import us


class Kind(enum.Enum):
    """How a statement is run, and what it answers."""

    EXEC = "exec"  # one parameter tuple -> the rows changed
    MANY = "many"  # a list of parameter tuples -> None
    ONE = "one"  # one parameter tuple -> the first row, or None
    BATCH = "batch"  # (leading parameters, rows) -> None: many rows in few statements
    CLAIM = "claim"  # (lease expiry, owner, now, limit) -> ``Claimed``


@dataclass(frozen=True, slots=True)
class Statement:
    name: str
    kind: Kind
    text: str  # both dialects' ($n); "" where each has its own
    postgres: str = ""  # PostgreSQL's own text
    sqlite: str = ""  # SQLite's own text (a template: ``{values}``, ``{marks}``)

    def postgres_text(self) -> str:
        return self.postgres or self.text

    def sqlite_text(self) -> str:
        return self.sqlite or sqlite(self.text)


def sqlite(statement: str) -> str:
    """The SQLite spelling of a statement: ``$n`` parameters as ``?n``."""
    return statement.replace("$", "?")


def values_list(rows: int, width: int, first: int) -> str:
    """SQLite's ``VALUES`` rows of numbered parameters from ``?first`` on: ``(?3,?4),(?5,?6)``."""
    n = iter(range(first, first + rows * width))
    return ",".join("(" + ",".join(f"?{next(n)}" for _ in range(width)) + ")" for _ in range(rows))


def _params(first: int, count: int) -> str:
    return ", ".join(f"${i}" for i in range(first, first + count))


_DELIVERIES = spelled(DELIVERY_COLUMNS)
_ENDPOINTS = spelled(ENDPOINT_COLUMNS)
_ATTEMPTS = spelled(ATTEMPT_COLUMNS)
ATTEMPT_WIDTH = len(ATTEMPT_COLUMNS)
DELIVERY_WIDTH = len(DELIVERY_COLUMNS)
ENDPOINT_WIDTH = len(ENDPOINT_COLUMNS)

# A delivery ``d`` is free unless an earlier delivery of its ordering key to its endpoint is pending
# (``webhookd._ordering``): an unordered one (no key) never looks further; an ordered one looks in the
# partial index ``wh_deliveries_ordered`` of pending keyed rows, the status written ``= 'pending'`` as in
# the index's own WHERE so that both SQLite and PostgreSQL use it.
if HOLDS_BACK != {D.PENDING}:
    raise ImportError("wh_deliveries_ordered indexes pending rows only: it no longer covers HOLDS_BACK")
FREE = f"""(d.ordering_key IS NULL OR NOT EXISTS (
            SELECT 1 FROM wh_deliveries e
            WHERE e.endpoint_id = d.endpoint_id AND e.ordering_key = d.ordering_key
              AND e.status = '{D.PENDING}' AND e.ordering_key IS NOT NULL
              AND e.event_seq < d.event_seq))"""

# claim: (lease expiry, owner, now, limit, skipped endpoints, accounts ("environment:account"),
# environments, environments whose retries are skipped) -> delivery columns [+ envelope + endpoint columns].
# The skips are JSON arrays of text (``webhookd._admission.Skips``): what the worker already holds its fill
# of is left in the table, so the claim reaches the deliveries of others behind it. ``{elements}`` is the
# dialect's set of a JSON array's texts.
_CLAIM = f"""
    UPDATE wh_deliveries SET next_attempt_at = $1, lease_owner = $2
    WHERE id IN (
        SELECT id FROM wh_deliveries d
        WHERE status = '{D.PENDING}' AND next_attempt_at <= $3
          AND endpoint_id NOT IN ({{elements5}})
          AND environment || ':' || account_id NOT IN ({{elements6}})
          AND environment NOT IN ({{elements7}})
          AND (attempt_count = 0 OR environment NOT IN ({{elements8}}))
          AND {FREE}
        ORDER BY next_attempt_at LIMIT $4 {{lock}}
    )
    RETURNING {_DELIVERIES}
"""


def _claim_text(lock: str, elements: str) -> str:
    return _CLAIM.format(lock=lock, **{f"elements{i}": elements.format(i=i) for i in (5, 6, 7, 8)})


_PG_ELEMENTS = "SELECT jsonb_array_elements_text(${i}::jsonb)"
_SQLITE_ELEMENTS = "SELECT value FROM json_each(${i})"
CLAIM_POSTGRES = f"""
    WITH claimed AS ({_claim_text("FOR UPDATE SKIP LOCKED", _PG_ELEMENTS)})
    SELECT c.*, ev.envelope, {spelled(ENDPOINT_COLUMNS, "ep.")}
    FROM claimed c JOIN wh_events ev ON ev.id = c.event_id
    LEFT JOIN wh_endpoints ep ON ep.id = c.endpoint_id AND ep.deleted_at IS NULL
"""
# SQLite reads what the claim needs in separate statements (no UPDATE inside WITH): ids as ``{marks}``.
CLAIMED_EVENTS_SQLITE = "SELECT id, envelope FROM wh_events WHERE id IN ({marks})"
CLAIMED_ENDPOINTS_SQLITE = (
    f"SELECT {_ENDPOINTS} FROM wh_endpoints WHERE id IN ({{marks}}) AND deleted_at IS NULL"
)

# record results, deliveries: (now, owner) then rows (status, next attempt, delivery id, 1 if counted else 0)
_RECORD_DELIVERIES = """
    UPDATE wh_deliveries SET status = v.status, next_attempt_at = v.nxt, due_at = v.nxt,
        lease_owner = NULL, updated_at = $1, attempt_count = wh_deliveries.attempt_count + v.inc,
        schedule_count = wh_deliveries.schedule_count + v.inc
    FROM ({rows}) AS v
    WHERE wh_deliveries.id = v.id AND wh_deliveries.lease_owner = $2
"""
# the sandbox clock: ``{earliest}`` is the dialect's two-argument maximum (GREATEST, max)
_ADVANCE = f"""
    UPDATE wh_deliveries SET next_attempt_at = {{earliest}}(next_attempt_at - $1, $2),
        due_at = {{earliest}}(next_attempt_at - $1, $2), updated_at = $2
    WHERE account_id = $3 AND environment = '{Env.SANDBOX}' AND status = '{D.PENDING}'
      AND lease_owner IS NULL AND next_attempt_at > $2
"""
_ATTEMPT_TYPES = {
    "attempt_number": "int",
    "response_status": "int",
    "latency_ms": "float8",
    "attempted_at": "bigint",
    "manual": "bool",
}

_ALL = [
    Statement(
        "claim",
        Kind.CLAIM,
        "",
        postgres=CLAIM_POSTGRES,
        sqlite=sqlite(_claim_text("", _SQLITE_ELEMENTS)),
    ),
    # record results, attempts: rows of ``ATTEMPT_COLUMNS`` (``_rows.attempt_row``), many at once
    Statement(
        "record_attempts",
        Kind.BATCH,
        "",
        postgres=f"INSERT INTO wh_attempts ({_ATTEMPTS}) SELECT * FROM unnest("
        + ", ".join(
            f"${i}::{_ATTEMPT_TYPES.get(c, 'text')}[]" for i, c in enumerate(ATTEMPT_COLUMNS, start=1)
        )
        + ")",
        sqlite=f"INSERT INTO wh_attempts ({_ATTEMPTS}) VALUES {{values}}",
    ),
    Statement(
        "record_deliveries",
        Kind.BATCH,
        "",
        postgres=_RECORD_DELIVERIES.format(
            rows="SELECT * FROM unnest($3::text[], $4::bigint[], $5::text[], $6::int[])"
            " AS u(status, nxt, id, inc)"
        ),
        sqlite=sqlite(
            _RECORD_DELIVERIES.format(
                rows="SELECT column1 AS status, column2 AS nxt, column3 AS id, column4 AS inc"
                " FROM (VALUES {values})"
            )
        ),
    ),
    # record results, the last attempt failed: (reason, now, endpoint id) -> account, environment, url
    Statement(
        "disable_endpoint",
        Kind.ONE,
        f"""
    UPDATE wh_endpoints SET status = '{E.DISABLED}', disabled_reason = $1, updated_at = $2,
        failing_level = {DISABLED_LEVEL}
    WHERE id = $3 AND status = '{E.ENABLED}' RETURNING account_id, environment, url
""",
    ),
    # record results, an endpoint.failing level reached: (level, endpoint id) -> account, environment,
    # url when it is a new level for the endpoint (``webhookd._health``), else nothing
    Statement(
        "raise_failing",
        Kind.ONE,
        f"""
    UPDATE wh_endpoints SET failing_level = $1
    WHERE id = $2 AND failing_level < $1 AND status = '{E.ENABLED}' RETURNING account_id, environment, url
""",
    ),
    # record results, a 2xx from an endpoint with a level: (endpoint id) -> account, environment, url
    Statement(
        "clear_failing",
        Kind.ONE,
        "UPDATE wh_endpoints SET failing_level = 0 WHERE id = $1 AND failing_level > 0"
        " RETURNING account_id, environment, url",
    ),
    # operational events to publish (``NOTICE_INSERT_COLUMNS``; ``webhookd._notices`` publishes them)
    Statement(
        "insert_notices",
        Kind.MANY,
        f"INSERT INTO wh_notices ({spelled(NOTICE_INSERT_COLUMNS)})"
        f" VALUES ({_params(1, len(NOTICE_INSERT_COLUMNS))})",
    ),
    # (``ALERT_INSERT_COLUMNS`` less sent_at, error)
    Statement(
        "insert_alert",
        Kind.EXEC,
        f"INSERT INTO wh_alerts ({spelled(ALERT_INSERT_COLUMNS)}) VALUES ({_params(1, 7)}, NULL, '')",
    ),
    # hold: (now, endpoint id). Deliveries waiting for an endpoint that is disabled are kept, not sent; run
    # for each endpoint a cycle saw fail and when an endpoint is disabled by hand.
    Statement(
        "hold",
        Kind.MANY,
        f"""
    UPDATE wh_deliveries SET status = '{D.HELD}', updated_at = $1
    WHERE endpoint_id IN (SELECT id FROM wh_endpoints WHERE id = $2 AND status = '{E.DISABLED}')
      AND status = '{D.PENDING}' AND lease_owner IS NULL
""",
    ),
    # release leases (SQLite at start: one process, so every lease is a dead predecessor's): ()
    Statement(
        "release_leases",
        Kind.EXEC,
        f"""
    UPDATE wh_deliveries SET next_attempt_at = due_at, lease_owner = NULL
    WHERE status = '{D.PENDING}' AND lease_owner IS NOT NULL
""",
    ),
    # fan-out and test sends: rows of ``DELIVERY_INSERT_COLUMNS`` (``_rows.delivery_row``)
    Statement(
        "insert_deliveries",
        Kind.MANY,
        f"INSERT INTO wh_deliveries ({spelled(DELIVERY_INSERT_COLUMNS)})"
        f" VALUES ({_params(1, len(DELIVERY_INSERT_COLUMNS))})",
    ),
    # an endpoint made unordered: (endpoint id). What it has waiting no longer waits for its key's head.
    Statement(
        "unorder",
        Kind.EXEC,
        f"""
    UPDATE wh_deliveries SET ordering_key = NULL
    WHERE endpoint_id = $1 AND ordering_key IS NOT NULL AND status <> '{D.SUCCEEDED}'
""",
    ),
    # a recovery's dry run: (endpoint id, created since) -> how many RecoverEndpoint would queue again
    Statement(
        "recoverable",
        Kind.ONE,
        f"""
    SELECT count(*) FROM wh_deliveries
    WHERE endpoint_id = $1 AND status IN ('{D.HELD}', '{D.FAILED}') AND created_at >= $2
""",
    ),
    # an endpoint deleted: (now, endpoint id). What it still had to send fails.
    Statement(
        "fail_deliveries",
        Kind.EXEC,
        f"""
    UPDATE wh_deliveries SET status = '{D.FAILED}', updated_at = $1, lease_owner = NULL
    WHERE endpoint_id = $2 AND status IN ('{D.PENDING}', '{D.HELD}')
""",
    ),
    # a manual attempt (its row through record_attempts): (now, delivery id)
    Statement(
        "manual_succeeded",
        Kind.EXEC,
        f"""
    UPDATE wh_deliveries SET attempt_count = attempt_count + 1, updated_at = $1,
        status = '{D.SUCCEEDED}', next_attempt_at = NULL, due_at = NULL
    WHERE id = $2
""",
    ),
    Statement(
        "manual_failed",
        Kind.EXEC,
        "UPDATE wh_deliveries SET attempt_count = attempt_count + 1, updated_at = $1 WHERE id = $2",
    ),
    # recover an endpoint: (now, endpoint id[, created since]). Held and failed deliveries start a new run
    # of the retry schedule, due now (due_at too: a lease released after a crash goes back to it).
    Statement(
        "recover",
        Kind.EXEC,
        f"""
    UPDATE wh_deliveries SET status = '{D.PENDING}', next_attempt_at = $1, due_at = $1, schedule_count = 0,
        lease_owner = NULL, updated_at = $1
    WHERE endpoint_id = $2 AND status IN ('{D.HELD}', '{D.FAILED}')
""",
    ),
    Statement(
        "recover_since",
        Kind.EXEC,
        f"""
    UPDATE wh_deliveries SET status = '{D.PENDING}', next_attempt_at = $1, due_at = $1, schedule_count = 0,
        lease_owner = NULL, updated_at = $1
    WHERE endpoint_id = $2 AND status IN ('{D.HELD}', '{D.FAILED}') AND created_at >= $3
""",
    ),
    # the sandbox clock: (by, now, account id). The account's sandbox deliveries waiting, unleased, for a
    # later attempt become due ``by`` earlier, never before now; live rows are never touched (the WHERE).
    Statement(
        "advance_sandbox",
        Kind.EXEC,
        "",
        postgres=_ADVANCE.format(earliest="GREATEST"),
        sqlite=sqlite(_ADVANCE.format(earliest="max")),
    ),
    # (now, account id) -> (the account's sandbox deliveries due now and unleased,)
    Statement(
        "sandbox_due",
        Kind.ONE,
        f"""
    SELECT count(*) FROM wh_deliveries
    WHERE account_id = $2 AND environment = '{Env.SANDBOX}' AND status = '{D.PENDING}'
      AND lease_owner IS NULL AND next_attempt_at <= $1
""",
    ),
    # stats: () -> (pending deliveries,); (now,) -> (oldest due and unclaimed,); () -> (next due,);
    # (now,) -> (claimed under a lease that ran out (the holder died), the earliest due_at of those,).
    Statement("queue_depth", Kind.ONE, f"SELECT count(*) FROM wh_deliveries WHERE status = '{D.PENDING}'"),
    # A delivery held back by an earlier one of its key is not due yet: it waits for its head, whose own
    # due time (a retry's, a lease's) is the next one, so an idle worker does not spin on it. Written as
    # the first row in due order (not min()): both databases then walk the due index and stop at the
    # first free row.
    Statement(
        "oldest_due",
        Kind.ONE,
        f"""
    SELECT (SELECT next_attempt_at FROM wh_deliveries d
            WHERE status = '{D.PENDING}' AND lease_owner IS NULL AND next_attempt_at <= $1 AND {FREE}
            ORDER BY next_attempt_at LIMIT 1)
""",
    ),
    Statement(
        "next_due",
        Kind.ONE,
        f"""
    SELECT (SELECT next_attempt_at FROM wh_deliveries d
            WHERE status = '{D.PENDING}' AND next_attempt_at IS NOT NULL AND {FREE}
            ORDER BY next_attempt_at LIMIT 1)
""",
    ),
    Statement(
        "lease_expired",
        Kind.ONE,
        f"""
    SELECT count(*), min(coalesce(due_at, next_attempt_at)) FROM wh_deliveries
    WHERE status = '{D.PENDING}' AND lease_owner IS NOT NULL AND next_attempt_at <= $1
""",
    ),
    # (now) -> the next time a pending delivery comes due, after now: a claim that skipped due rows and
    # found nothing else is not run again before then (``_delivery``), rather than after a whole poll.
    Statement(
        "next_due_after",
        Kind.ONE,
        f"SELECT min(next_attempt_at) FROM wh_deliveries"
        f" WHERE status = '{D.PENDING}' AND next_attempt_at > $1",
    ),
    # purge: (before) the attempt log past its 30 days
    Statement("purge_attempts", Kind.EXEC, "DELETE FROM wh_attempts WHERE attempted_at < $1"),
    # purge: (before) the sandbox's attempt log past its shorter retention (``_events.SANDBOX_RETENTION``)
    Statement(
        "purge_sandbox_attempts",
        Kind.EXEC,
        f"DELETE FROM wh_attempts WHERE attempted_at < $1 AND environment = '{Env.SANDBOX}'",
    ),
]
STATEMENTS: dict[str, Statement] = {s.name: s for s in _ALL}
# Only these read: a store may run them without taking its write lock.
READS = frozenset({"queue_depth", "oldest_due", "lease_expired", "next_due", "next_due_after", "recoverable"})


@dataclass(slots=True)
class Claimed:
    """What a claim answers, as rows: deliveries (``DELIVERY_COLUMNS``), their event bodies by event id,
    their endpoints' rows (``ENDPOINT_COLUMNS``) by endpoint id (a deleted endpoint's is missing)."""

    rows: Sequence[Sequence[Any]]
    bodies: dict[str, bytes]
    endpoints: dict[str, Sequence[Any]]


NOTHING_CLAIMED = Claimed((), {}, {})


class ResultRows:
    """One cycle's results as statement parameters, built before the storage hop."""

    __slots__ = ("attempts", "deliveries", "disabling", "exhausted", "failing", "levels", "recovered", "t")

    def __init__(self, results: Sequence[DeliveryResult], now_us: int) -> None:
        self.t = now_us
        self.attempts: list[tuple[Any, ...]] = []
        self.deliveries: list[tuple[Any, ...]] = []  # (status, next, id, inc)
        self.disabling: list[tuple[str, str]] = []  # (endpoint id, reason)
        failing: set[str] = set()
        self.levels: dict[str, tuple[int, int, str]] = {}  # endpoint id -> (level, attempts, error)
        self.recovered: set[str] = set()
        self.exhausted: list[tuple[Any, ...]] = []  # ``insert_notices`` rows
        for r in results:
            if r.attempt is not None:
                self.attempts.append(attempt_row(r.attempt))
                a = r.attempt
                if r.failing_level and r.failing_level > self.levels.get(r.endpoint_id, (0, 0, ""))[0]:
                    self.levels[r.endpoint_id] = (r.failing_level, a.attempt_number, a.error)
                if r.recovered:
                    self.recovered.add(r.endpoint_id)
                if r.exhausted:
                    data = catalog.delivery_exhausted(
                        r.endpoint_id, r.delivery_id, a.event_id, a.attempt_number, a.error
                    )
                    self.exhausted.append(
                        notice_row(
                            (a.account_id, a.environment), r.endpoint_id, "delivery.exhausted", data, now_us
                        )
                    )
            nxt = us(r.next_attempt_at) if r.next_attempt_at else None
            self.deliveries.append((str(r.status), nxt, r.delivery_id, 1 if r.counts_attempt else 0))
            if r.disable_endpoint:
                self.disabling.append((r.endpoint_id, r.disabled_reason))
            if r.status != D.SUCCEEDED:
                failing.add(r.endpoint_id)
        self.failing = sorted(failing)

    def holds(self) -> list[tuple[int, str]]:
        """``hold``'s parameters for each endpoint that saw a failure."""
        return [(self.t, endpoint_id) for endpoint_id in self.failing]


def notice_row(
    scope: Sequence[Any], endpoint_id: str, kind: str, data: dict[str, Any], now_us: int
) -> tuple[Any, ...]:
    """An ``insert_notices`` row; ``scope`` starts with (account id, environment)."""
    return (new_id("ntc"), scope[0], scope[1], endpoint_id, kind, json.dumps(data), now_us)


def alert_row(endpoint_id: str, reason: str, disabled: Sequence[Any], now_us: int) -> tuple[Any, ...]:
    """``insert_alert``'s parameters for an endpoint ``disable_endpoint`` just disabled (its returned row)."""
    return (new_id("alrt"), disabled[0], disabled[1], endpoint_id, disabled[2], reason, now_us)


def alerts_of(rows: Sequence[tuple[Any, ...]], now: dt.datetime) -> list[Alert]:
    """Alerts from ``insert_alert``'s parameter rows."""
    return [Alert(a[0], a[1], a[2], a[3], a[4], a[5], now) for a in rows]
