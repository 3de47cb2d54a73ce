"""Every step of the delivery queue as one named statement, and the rows they take.

Every write to the deliveries table is one of these, run only by a ``Queue`` (``webhookd._queue``), as
procrastinate keeps each job transition in its ``sql/queries.sql``: ``STATEMENTS`` is keyed by name, and
each queue (SQLite, PostgreSQL, memory) runs a statement by its name. Parameters are numbered (``$1`` for
PostgreSQL; ``sqlite`` turns them into SQLite's ``?1``, and the same tuple binds both). Column lists come
from the tables (``webhookd._tables``).

Where the dialects must differ the variants stand side by side: PostgreSQL claims with ``FOR UPDATE SKIP
LOCKED`` (several processes share the work) and joins the event bodies and endpoints into the claim, and
takes a cycle's results as arrays (``unnest``), every table in one statement (``record_results``); SQLite
(one process, one writer) has neither, so it claims, then reads bodies and endpoints, and writes multi-row
``VALUES`` lists, a statement per table.

The queue is ``wh_pending``, one row per pending delivery (revision 0009): a claim changes only that row,
whose ``next_attempt_at`` becomes its lease expiry (``wh_deliveries.due_at`` keeps when it was due); a result
updates the delivery's row in ``wh_deliveries`` and deletes its queue row, or moves it to the retry's time.
Every statement that makes a delivery pending, or ends that, writes both tables in the same step.
``wh_deliveries.next_attempt_at`` stays NULL: a release before 0009 claims from it, so during a rolling
upgrade its processes never claim what this release queued, and what they queue is adopted (``adopt``). A
result is written only while its lease is held (``wh_pending.lease_owner``), so a result that comes back after
its lease ran out and the delivery was claimed again elsewhere cannot overwrite the newer claim."""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from dataclasses import dataclass

from svckit.vocabulary import Environment as Env
from svckit.webhook_status import DeliveryStatus as D
from svckit.webhook_status import EndpointStatus as E
from webhookd._claim_sql import (
    CLAIM_POSTGRES,
    CLAIM_SQLITE,
    FREE,
)
from webhookd._health import DISABLED_LEVEL
from webhookd._tables import (
    ALERT_INSERT_COLUMNS,
    ATTEMPT_COLUMNS,
    COUNT_COLUMNS,
    DELIVERY_COLUMNS,
    DELIVERY_INSERT_COLUMNS,
    ENDPOINT_COLUMNS,
    NOTICE_INSERT_COLUMNS,
    PENDING_COLUMNS,
    spelled,
)


class Kind(enum.Enum):
    """How a statement is run, and what it answers."""

    EXEC = "exec"  # one parameter tuple -> the rows changed
    MANY = "many"  # a list of parameter tuples -> None
    ONE = "one"  # one parameter tuple -> the first row, or None
    BATCH = "batch"  # (leading parameters, rows) -> None: many rows in few statements
    CLAIM = "claim"  # (lease expiry, owner, now, limit) -> ``Claimed``
    RESULTS = "results"  # a cycle's results (``record_results``) -> None


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
_ATTEMPTS = spelled(ATTEMPT_COLUMNS)
ATTEMPT_WIDTH = len(ATTEMPT_COLUMNS)
DELIVERY_WIDTH = len(DELIVERY_COLUMNS)
ENDPOINT_WIDTH = len(ENDPOINT_COLUMNS)

# The queue rows of deliveries ``wh_deliveries`` lists for an endpoint or a scope ("{where}"), found
# through that table's indexes as the delivery log finds them (``wh_pending`` has only the due and
# ordered ones: every index of it is written again at each claim).
_PENDING_OF = f"SELECT id FROM wh_deliveries WHERE {{where}} AND status = '{D.PENDING}'"

# record results, deliveries: (now, owner) then rows (status, next attempt, delivery id, 1 if counted else 0);
# before the queue rows (their lease says whose the result is) are finished or retried
_RECORD_DELIVERIES = """
    UPDATE wh_deliveries SET status = v.status, next_attempt_at = NULL, due_at = v.nxt,
        updated_at = $1, attempt_count = wh_deliveries.attempt_count + v.inc,
        schedule_count = wh_deliveries.schedule_count + v.inc
    FROM ({rows}) AS v
    WHERE wh_deliveries.id = v.id
      AND EXISTS (SELECT 1 FROM wh_pending p WHERE p.id = v.id AND p.lease_owner = $2)
"""
# record results, the queue rows of those that are due again: (owner) then rows (next attempt, id, inc)
_RETRY_PENDING = """
    UPDATE wh_pending SET next_attempt_at = v.nxt, lease_owner = NULL,
        attempt_count = wh_pending.attempt_count + v.inc
    FROM ({rows}) AS v
    WHERE wh_pending.id = v.id AND wh_pending.lease_owner = $1
"""
# the sandbox clock: ``{earliest}`` is the dialect's two-argument maximum (GREATEST, max); the deliveries'
# due times first (an unleased queue row's next_attempt_at is its delivery's due_at), then the queue's
_SANDBOX_PENDING = _PENDING_OF.format(where=f"account_id = $3 AND environment = '{Env.SANDBOX}'")
_ADVANCE = f"""
    UPDATE wh_deliveries SET next_attempt_at = NULL, due_at = {{earliest}}(due_at - $1, $2), updated_at = $2
    WHERE id IN (SELECT id FROM wh_pending WHERE id IN ({_SANDBOX_PENDING})
                 AND lease_owner IS NULL AND next_attempt_at > $2)
"""
_ADVANCE_PENDING = f"""
    UPDATE wh_pending SET next_attempt_at = {{earliest}}(next_attempt_at - $1, $2)
    WHERE id IN ({_SANDBOX_PENDING}) AND lease_owner IS NULL AND next_attempt_at > $2
"""
# a recovered delivery's queue row: its own columns, due now ($1), no lease
_RECOVERED = {"next_attempt_at": "CAST($1 AS BIGINT)", "lease_owner": "NULL"}
_RECOVER_PENDING = f"""
    INSERT INTO wh_pending ({spelled(PENDING_COLUMNS)})
    SELECT {", ".join(_RECOVERED.get(c, c) for c in PENDING_COLUMNS)}
    FROM wh_deliveries WHERE endpoint_id = $2 AND status IN ('{D.HELD}', '{D.FAILED}'){{since}}
"""
# a recovered delivery (its queue row first, with the same parameters): pending again, due now
_RECOVER = f"""
    UPDATE wh_deliveries SET status = '{D.PENDING}', next_attempt_at = NULL, due_at = $1, schedule_count = 0,
        lease_owner = NULL, updated_at = $1
    WHERE endpoint_id = $2 AND status IN ('{D.HELD}', '{D.FAILED}'){{since}}
"""
_SINCE = " AND created_at >= $3"  # recover_since's (now, endpoint id, created since)
# adopt: (now,). A pending delivery whose ``wh_deliveries.next_attempt_at`` is set and that has no queue row
# was queued by a process of a release before revision 0009, which claims from that column (a rolling
# upgrade, docs/operations.md "Upgrades and rollbacks"). Unleased, or its lease run out, it moves into the
# queue, the column cleared in the same statement, so at every moment exactly one release's processes may
# claim it: the row lock (SKIP LOCKED) orders this against an old process's claim, and each re-checks.
_OLD_QUEUED = f"""status = '{D.PENDING}' AND next_attempt_at IS NOT NULL
          AND (lease_owner IS NULL OR next_attempt_at <= CAST($1 AS BIGINT))
          AND NOT EXISTS (SELECT 1 FROM wh_pending p WHERE p.id = d.id)"""
_ADOPTED = {"next_attempt_at": "COALESCE(due_at, CAST($1 AS BIGINT))", "lease_owner": "NULL"}
_ADOPTED_LIST = ", ".join(f"{_ADOPTED[c]} AS {c}" if c in _ADOPTED else c for c in PENDING_COLUMNS)
ADOPT_POSTGRES = f"""
    WITH moved AS (
        UPDATE wh_deliveries d SET next_attempt_at = NULL, lease_owner = NULL
        WHERE d.id IN (SELECT d.id FROM wh_deliveries d WHERE {_OLD_QUEUED} LIMIT 1000 FOR UPDATE SKIP LOCKED)
          AND {_OLD_QUEUED}
        RETURNING {_ADOPTED_LIST}
    )
    INSERT INTO wh_pending ({spelled(PENDING_COLUMNS)}) SELECT {spelled(PENDING_COLUMNS)} FROM moved
    ON CONFLICT (id) DO NOTHING
"""
# SQLite is one process of one release: nothing else claims, so the queue row alone is enough.
ADOPT_SQLITE = sqlite(f"""
    INSERT INTO wh_pending ({spelled(PENDING_COLUMNS)})
    SELECT {_ADOPTED_LIST} FROM wh_deliveries d WHERE {_OLD_QUEUED} LIMIT 1000
""")
_COUNT_UPSERT = (
    " ON CONFLICT (account_id, environment, grain, period, endpoint_id, outcome) DO UPDATE SET "
    + ", ".join(f"{c} = wh_delivery_counts.{c} + excluded.{c}" for c in COUNT_COLUMNS[6:])
)
_COUNT_TYPES = {"grain": "int", "period": "bigint"}  # the key's other columns text, the sums bigint


def _count_type(column: str) -> str:
    return _COUNT_TYPES.get(column, "text" if column in COUNT_COLUMNS[:6] else "bigint")


def _unnest_insert(
    table: str, columns: tuple[str, ...], type_of: Callable[[str], str], first: int = 1
) -> str:
    """An INSERT of rows given as one array per column, ``$first`` on (PostgreSQL's ``unnest``)."""
    arrays = ", ".join(f"${i}::{type_of(c)}[]" for i, c in enumerate(columns, start=first))
    return f"INSERT INTO {table} ({spelled(columns)}) SELECT * FROM unnest({arrays})"


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
        sqlite=sqlite(CLAIM_SQLITE),
    ),
    # record results, attempts: rows of ``ATTEMPT_COLUMNS`` (``_rows.attempt_row``), many at once
    Statement(
        "record_attempts",
        Kind.BATCH,
        "",
        postgres=_unnest_insert("wh_attempts", ATTEMPT_COLUMNS, lambda c: _ATTEMPT_TYPES.get(c, "text")),
        sqlite=f"INSERT INTO wh_attempts ({_ATTEMPTS}) VALUES {{values}}",
    ),
    # record results, the attempts' counts (``webhookd._delivery_counts.count_rows``): added into the rows
    # of their hour and day, one row per key
    Statement(
        "count_attempts",
        Kind.MANY,
        f"INSERT INTO wh_delivery_counts ({spelled(COUNT_COLUMNS)}) VALUES ({_params(1, len(COUNT_COLUMNS))})"
        + _COUNT_UPSERT,
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
    # record results, the queue rows of those that are done (succeeded, failed for good): (owner) then
    # rows (delivery id)
    Statement(
        "finish_pending",
        Kind.BATCH,
        "",
        postgres="DELETE FROM wh_pending WHERE lease_owner = $1 AND id = ANY($2::text[])",
        sqlite="DELETE FROM wh_pending WHERE lease_owner = ?1"
        " AND id IN (SELECT column1 FROM (VALUES {values}))",
    ),
    Statement(
        "retry_pending",
        Kind.BATCH,
        "",
        postgres=_RETRY_PENDING.format(
            rows="SELECT * FROM unnest($2::bigint[], $3::text[], $4::int[]) AS u(nxt, id, inc)"
        ),
        sqlite=sqlite(
            _RETRY_PENDING.format(
                rows="SELECT column1 AS nxt, column2 AS id, column3 AS inc FROM (VALUES {values})"
            )
        ),
    ),
    # record results, the last attempt failed: (reason, now, endpoint id) -> account, environment, url,
    # destination type and settings (``_queue_rows.targeted``)
    Statement(
        "disable_endpoint",
        Kind.ONE,
        f"""
    UPDATE wh_endpoints SET status = '{E.DISABLED}', disabled_reason = $1, updated_at = $2,
        failing_level = {DISABLED_LEVEL}
    WHERE id = $3 AND status = '{E.ENABLED}'
    RETURNING account_id, environment, url, destination_type, destination
""",
    ),
    # record results, an endpoint.failing level reached: (level, endpoint id) -> account, environment,
    # url when it is a new level for the endpoint (``webhookd._health``), else nothing
    Statement(
        "raise_failing",
        Kind.ONE,
        f"""
    UPDATE wh_endpoints SET failing_level = $1
    WHERE id = $2 AND failing_level < $1 AND status = '{E.ENABLED}'
    RETURNING account_id, environment, url, destination_type, destination
""",
    ),
    # record results, a 2xx from an endpoint with a level: (endpoint id) -> account, environment, url
    Statement(
        "clear_failing",
        Kind.ONE,
        "UPDATE wh_endpoints SET failing_level = 0 WHERE id = $1 AND failing_level > 0"
        " RETURNING account_id, environment, url, destination_type, destination",
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
    # for each endpoint a cycle saw fail and when an endpoint is disabled by hand. Then their queue rows
    # go: (endpoint id).
    Statement(
        "hold",
        Kind.MANY,
        f"""
    UPDATE wh_deliveries SET status = '{D.HELD}', updated_at = $1
    WHERE endpoint_id IN (SELECT id FROM wh_endpoints WHERE id = $2 AND status = '{E.DISABLED}')
      AND status = '{D.PENDING}'
      AND EXISTS (SELECT 1 FROM wh_pending p WHERE p.id = wh_deliveries.id AND p.lease_owner IS NULL)
""",
    ),
    Statement(
        "hold_pending",
        Kind.MANY,
        f"""
    DELETE FROM wh_pending
    WHERE EXISTS (SELECT 1 FROM wh_endpoints WHERE id = $1 AND status = '{E.DISABLED}')
      AND id IN (SELECT id FROM wh_deliveries WHERE endpoint_id = $1 AND status = '{D.HELD}')
""",
    ),
    # release leases (SQLite at start: one process, so every lease is a dead predecessor's): ()
    Statement(
        "release_leases",
        Kind.EXEC,
        """
    UPDATE wh_pending SET lease_owner = NULL, next_attempt_at = COALESCE(
        (SELECT d.due_at FROM wh_deliveries d WHERE d.id = wh_pending.id), next_attempt_at)
    WHERE lease_owner IS NOT NULL
""",
    ),
    # fan-out and test sends: rows of ``DELIVERY_INSERT_COLUMNS`` (``_rows.delivery_row``)
    Statement(
        "insert_deliveries",
        Kind.MANY,
        f"INSERT INTO wh_deliveries ({spelled(DELIVERY_INSERT_COLUMNS)})"
        f" VALUES ({_params(1, len(DELIVERY_INSERT_COLUMNS))})",
    ),
    # ... and the queue rows of the pending ones: rows of ``PENDING_COLUMNS`` (``_rows.pending_row``)
    Statement(
        "insert_pending",
        Kind.MANY,
        f"INSERT INTO wh_pending ({spelled(PENDING_COLUMNS)}) VALUES ({_params(1, len(PENDING_COLUMNS))})",
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
    Statement(
        "unorder_pending",
        Kind.EXEC,
        "UPDATE wh_pending SET ordering_key = NULL WHERE endpoint_id = $1 AND ordering_key IS NOT NULL",
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
    # an endpoint deleted: (endpoint id) its queue rows go, then (now, endpoint id) what it still had to send
    # fails.
    Statement(
        "fail_pending",
        Kind.EXEC,
        f"DELETE FROM wh_pending WHERE id IN ({_PENDING_OF.format(where='endpoint_id = $1')})",
    ),
    Statement(
        "fail_deliveries",
        Kind.EXEC,
        f"""
    UPDATE wh_deliveries SET status = '{D.FAILED}', updated_at = $1
    WHERE endpoint_id = $2 AND status IN ('{D.PENDING}', '{D.HELD}')
""",
    ),
    # a manual attempt (its row through record_attempts): (now, delivery id), then (delivery id) its queue
    # row's count, or the row goes when it succeeded
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
    Statement("manual_succeeded_pending", Kind.EXEC, "DELETE FROM wh_pending WHERE id = $1"),
    Statement(
        "manual_failed_pending",
        Kind.EXEC,
        "UPDATE wh_pending SET attempt_count = attempt_count + 1 WHERE id = $1",
    ),
    # recover an endpoint: (now, endpoint id[, created since]). Held and failed deliveries start a new run
    # of the retry schedule, due now (due_at too: a lease released after a crash goes back to it); their
    # queue rows first (the same parameters), while they are still held or failed.
    Statement("recover_pending", Kind.EXEC, _RECOVER_PENDING.format(since="")),
    Statement("recover_since_pending", Kind.EXEC, _RECOVER_PENDING.format(since=_SINCE)),
    Statement("recover", Kind.EXEC, _RECOVER.format(since="")),
    Statement("recover_since", Kind.EXEC, _RECOVER.format(since=_SINCE)),
    Statement("adopt", Kind.EXEC, "", postgres=ADOPT_POSTGRES, sqlite=ADOPT_SQLITE),
    # the sandbox clock: (by, now, account id). The account's sandbox deliveries waiting, unleased, for a
    # later attempt become due ``by`` earlier, never before now; live rows are never touched (the WHERE).
    Statement(
        "advance_sandbox",
        Kind.EXEC,
        "",
        postgres=_ADVANCE.format(earliest="GREATEST"),
        sqlite=sqlite(_ADVANCE.format(earliest="max")),
    ),
    Statement(
        "advance_sandbox_pending",
        Kind.EXEC,
        "",
        postgres=_ADVANCE_PENDING.format(earliest="GREATEST"),
        sqlite=sqlite(_ADVANCE_PENDING.format(earliest="max")),
    ),
    # (now, account id) -> (the account's sandbox deliveries due now and unleased,)
    Statement(
        "sandbox_due",
        Kind.ONE,
        f"""
    SELECT count(*) FROM wh_pending
    WHERE id IN ({_PENDING_OF.format(where=f"account_id = $2 AND environment = '{Env.SANDBOX}'")})
      AND lease_owner IS NULL AND next_attempt_at <= $1
""",
    ),
    # stats: () -> (pending deliveries,); (now,) -> (oldest due and unclaimed,); () -> (next due,);
    # (now,) -> (claimed under a lease that ran out (the holder died), the earliest due_at of those,).
    Statement("queue_depth", Kind.ONE, "SELECT count(*) FROM wh_pending"),
    # A delivery held back by an earlier one of its key is not due yet: it waits for its head, whose own
    # due time (a retry's, a lease's) is the next one, so an idle worker does not spin on it. Written as
    # the first row in due order (not min()): both databases then walk the due index and stop at the
    # first free row.
    Statement(
        "oldest_due",
        Kind.ONE,
        f"""
    SELECT (SELECT next_attempt_at FROM wh_pending d
            WHERE lease_owner IS NULL AND next_attempt_at <= $1 AND {FREE}
            ORDER BY next_attempt_at LIMIT 1)
""",
    ),
    Statement(
        "next_due",
        Kind.ONE,
        f"""
    SELECT (SELECT next_attempt_at FROM wh_pending d WHERE {FREE} ORDER BY next_attempt_at LIMIT 1)
""",
    ),
    Statement(
        "lease_expired",
        Kind.ONE,
        """
    SELECT count(*), min(coalesce(d.due_at, p.next_attempt_at))
    FROM wh_pending p JOIN wh_deliveries d ON d.id = p.id
    WHERE p.lease_owner IS NOT NULL AND p.next_attempt_at <= $1
""",
    ),
    # (now) -> the next time a pending delivery comes due, after now: a claim that skipped due rows and
    # found nothing else is not run again before then (``_delivery``), rather than after a whole poll.
    Statement(
        "next_due_after",
        Kind.ONE,
        "SELECT min(next_attempt_at) FROM wh_pending WHERE next_attempt_at > $1",
    ),
    # purge: (before) the attempt log past its 30 days
    Statement("purge_attempts", Kind.EXEC, "DELETE FROM wh_attempts WHERE attempted_at < $1"),
    # purge: (grain, before) the delivery counts of a grain past its retention
    Statement(
        "purge_delivery_counts",
        Kind.EXEC,
        "DELETE FROM wh_delivery_counts WHERE grain = $1 AND period < $2",
    ),
    # purge: (before) the sandbox's attempt log past its shorter retention (``_events.SANDBOX_RETENTION``)
    Statement(
        "purge_sandbox_attempts",
        Kind.EXEC,
        f"DELETE FROM wh_attempts WHERE attempted_at < $1 AND environment = '{Env.SANDBOX}'",
    ),
]


def _renumbered(text: str, first: int, keep: tuple[int, ...] = ()) -> str:
    """``text`` with its parameters numbered from ``$first`` on, but for the leading ones it shares with
    ``record_results`` (``keep``: ``$1`` now, ``$2`` owner, in the part's own order)."""

    def number(n: int) -> int:
        return keep[n - 1] if n <= len(keep) else first + n - 1 - len(keep)

    return re.sub(r"\$(\d+)", lambda m: f"${number(int(m[1]))}", text)


_TEXT = {s.name: s.postgres_text() for s in _ALL}
_COUNTS_AT = 3 + ATTEMPT_WIDTH
_DELIVERIES_AT = _COUNTS_AT + len(COUNT_COLUMNS)
_COUNTS = _unnest_insert("wh_delivery_counts", COUNT_COLUMNS, _count_type, _COUNTS_AT) + _COUNT_UPSERT
# record_results: (now, owner, attempts, counts, deliveries, finished, retried), each a list of the rows
# its part takes. On PostgreSQL one statement (one round trip, not five): its parts see the same snapshot,
# so record_deliveries still finds the queue rows finish_pending and retry_pending change (each delivery
# is in one of those two). Elsewhere the parts run one after the other (``result_parts``).
RESULTS_WIDTHS = (ATTEMPT_WIDTH, len(COUNT_COLUMNS), 4, 1, 3)
RECORD_RESULTS_POSTGRES = f"""
    WITH attempts AS ({_renumbered(_TEXT["record_attempts"], 3)}),
    counts AS ({_COUNTS}),
    deliveries AS ({_renumbered(_TEXT["record_deliveries"], _DELIVERIES_AT, (1, 2))}),
    finished AS ({_renumbered(_TEXT["finish_pending"], _DELIVERIES_AT + 4, (2,))}),
    retried AS ({_renumbered(_TEXT["retry_pending"], _DELIVERIES_AT + 5, (2,))})
    SELECT 1
"""


_ALL.append(Statement("record_results", Kind.RESULTS, "", postgres=RECORD_RESULTS_POSTGRES))
STATEMENTS: dict[str, Statement] = {s.name: s for s in _ALL}
# Only these read: a store may run them without taking its write lock.
READS = frozenset({"queue_depth", "oldest_due", "lease_expired", "next_due", "next_due_after", "recoverable"})
