"""Each step of the delivery queue as one named statement, and the rows they take.

Both stores (``SqliteQueue``, ``PostgresQueue``) and the repository run these texts and no other queue
SQL, as procrastinate keeps each queue step in its ``sql/queries.sql``. Parameters are numbered
(``$1`` for PostgreSQL; ``sqlite`` turns them into SQLite's ``?1``, and the same tuple binds both). Where
the dialects must differ the variants stand side by side: PostgreSQL claims with ``FOR UPDATE SKIP
LOCKED`` (several processes share the work) and joins the event bodies and endpoints into the claim, and
takes a cycle's results as arrays (``unnest``), one statement per table; SQLite (one process, one writer)
has neither, so it claims, then reads bodies and endpoints, and writes multi-row ``VALUES`` lists.

A claimed delivery's ``next_attempt_at`` is its lease expiry; ``due_at`` keeps when it was due. A result
is written only while its lease is held (``lease_owner``), so a result that comes back after its lease ran
out and the delivery was claimed again elsewhere cannot overwrite the newer claim.
"""

from __future__ import annotations

import collections
import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

from svckit.ids import new_id
from svckit.webhook_status import DeliveryStatus as D
from svckit.webhook_status import EndpointStatus as E
from webhookd._repository import Alert, Claim, DeliveryRecord, EndpointRecord, Outcome
from webhookd._times import at_us, us


def sqlite(statement: str) -> str:
    """The SQLite spelling of a statement: ``$n`` parameters as ``?n``."""
    return statement.replace("$", "?")


def values_list(rows: int, width: int, first: int) -> str:
    """SQLite's ``VALUES`` rows of numbered parameters from ``?first`` on: ``(?3,?4),(?5,?6)``."""
    n = iter(range(first, first + rows * width))
    return ",".join("(" + ",".join(f"?{next(n)}" for _ in range(width)) + ")" for _ in range(rows))


DELIVERY_COLUMNS = (
    "id, event_id, endpoint_id, account_id, environment, event_type, status,"
    " attempt_count, schedule_count, due_at, created_at, updated_at"
)
ENDPOINT_COLUMNS = (
    "id, account_id, environment, url, events, description, status, disabled_reason, secrets,"
    " created_at, updated_at"
)
ATTEMPT_COLUMNS = (
    "id, delivery_id, endpoint_id, event_id, account_id, environment, attempt_number, outcome,"
    " response_status, response_body, request_headers, latency_ms, error, attempted_at, manual,"
    " response_headers"
)

# claim: (lease expiry, owner, now, limit) -> delivery columns [+ envelope + endpoint columns]
_CLAIM = f"""
    UPDATE wh_deliveries SET next_attempt_at = $1, lease_owner = $2
    WHERE id IN (
        SELECT id FROM wh_deliveries
        WHERE status = '{D.PENDING}' AND next_attempt_at <= $3
        ORDER BY next_attempt_at LIMIT $4 {{lock}}
    )
    RETURNING {DELIVERY_COLUMNS}
"""
CLAIM_SQLITE = _CLAIM.format(lock="")
CLAIM_POSTGRES = f"""
    WITH claimed AS ({_CLAIM.format(lock="FOR UPDATE SKIP LOCKED")})
    SELECT c.*, ev.envelope, {", ".join("ep." + c.strip() for c in ENDPOINT_COLUMNS.split(","))}
    FROM claimed c JOIN wh_events ev ON ev.id = c.event_id
    LEFT JOIN wh_endpoints ep ON ep.id = c.endpoint_id AND ep.deleted_at IS NULL
"""
# SQLite reads what the claim needs in separate statements (no UPDATE inside WITH): ids as ``{marks}``.
CLAIMED_EVENTS_SQLITE = "SELECT id, envelope FROM wh_events WHERE id IN ({marks})"
CLAIMED_ENDPOINTS_SQLITE = (
    f"SELECT {ENDPOINT_COLUMNS} FROM wh_endpoints WHERE id IN ({{marks}}) AND deleted_at IS NULL"
)

# record results, attempts: the 16 attempt columns (``attempt_row``), many rows at once
RECORD_ATTEMPTS_SQLITE = f"INSERT INTO wh_attempts ({ATTEMPT_COLUMNS}) VALUES {{values}}"
RECORD_ATTEMPTS_POSTGRES = f"""
    INSERT INTO wh_attempts ({ATTEMPT_COLUMNS})
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
        $7::int[], $8::text[], $9::int[], $10::text[], $11::text[], $12::float8[], $13::text[],
        $14::bigint[], $15::bool[], $16::text[])
"""
# record results, deliveries: (now, owner) then rows (status, next attempt, delivery id, 1 if counted else 0)
_RECORD_DELIVERIES = """
    UPDATE wh_deliveries SET status = v.status, next_attempt_at = v.nxt, due_at = v.nxt,
        lease_owner = NULL, updated_at = $1, attempt_count = wh_deliveries.attempt_count + v.inc,
        schedule_count = wh_deliveries.schedule_count + v.inc
    FROM ({rows}) AS v
    WHERE wh_deliveries.id = v.id AND wh_deliveries.lease_owner = $2
"""
RECORD_DELIVERIES_SQLITE = _RECORD_DELIVERIES.format(
    rows="SELECT column1 AS status, column2 AS nxt, column3 AS id, column4 AS inc FROM (VALUES {values})"
)
RECORD_DELIVERIES_POSTGRES = _RECORD_DELIVERIES.format(
    rows="SELECT * FROM unnest($3::text[], $4::bigint[], $5::text[], $6::int[]) AS u(status, nxt, id, inc)"
)
# record results, the last attempt failed: (reason, now, endpoint id) -> account, environment, url
DISABLE_ENDPOINT = f"""
    UPDATE wh_endpoints SET status = '{E.DISABLED}', disabled_reason = $1, updated_at = $2
    WHERE id = $3 AND status = '{E.ENABLED}' RETURNING account_id, environment, url
"""
INSERT_ALERT = """
    INSERT INTO wh_alerts (id, account_id, environment, endpoint_id, url, reason, created_at, sent_at, error)
    VALUES ($1, $2, $3, $4, $5, $6, $7, NULL, '')
"""
# hold: (now, endpoint id). Deliveries waiting for an endpoint that is disabled are kept, not sent; run
# for each endpoint a cycle saw fail and when an endpoint is disabled by hand.
HOLD = f"""
    UPDATE wh_deliveries SET status = '{D.HELD}', updated_at = $1
    WHERE endpoint_id IN (SELECT id FROM wh_endpoints WHERE id = $2 AND status = '{E.DISABLED}')
      AND status = '{D.PENDING}' AND lease_owner IS NULL
"""
# release leases (SQLite at start: one process, so every lease is a dead predecessor's): ()
RELEASE_LEASES = f"""
    UPDATE wh_deliveries SET next_attempt_at = due_at, lease_owner = NULL
    WHERE status = '{D.PENDING}' AND lease_owner IS NOT NULL
"""
# purge: (before) the attempt log past its 30 days
PURGE_ATTEMPTS = "DELETE FROM wh_attempts WHERE attempted_at < $1"


class Results:
    """One cycle's results as statement parameters, built before the storage hop."""

    __slots__ = ("attempts", "deliveries", "disabling", "failing", "t")

    def __init__(self, outcomes: Sequence[Outcome], now_us: int) -> None:
        self.t = now_us
        self.attempts: list[tuple[Any, ...]] = []
        self.deliveries: list[tuple[Any, ...]] = []  # (status, next, id, inc)
        self.disabling: list[tuple[str, str]] = []  # (endpoint id, reason)
        failing: set[str] = set()
        for o in outcomes:
            a = o.attempt
            if a is not None:
                self.attempts.append(
                    (
                        a.id,
                        a.delivery_id,
                        a.endpoint_id,
                        a.event_id,
                        a.account_id,
                        a.environment,
                        a.attempt_number,
                        a.outcome,
                        a.response_status,
                        a.response_body,
                        json.dumps(a.request_headers),
                        a.latency_ms,
                        a.error,
                        us(a.attempted_at),
                        a.manual,
                        json.dumps(a.response_headers),
                    )
                )
            nxt = us(o.next_attempt_at) if o.next_attempt_at else None
            self.deliveries.append((str(o.status), nxt, o.delivery_id, 1 if o.counts_attempt else 0))
            if o.disable_endpoint:
                self.disabling.append((o.endpoint_id, o.disabled_reason))
            if o.status != D.SUCCEEDED:
                failing.add(o.endpoint_id)
        self.failing = sorted(failing)

    def holds(self) -> list[tuple[int, str]]:
        """HOLD's parameters for each endpoint that saw a failure."""
        return [(self.t, endpoint_id) for endpoint_id in self.failing]


EndpointRow = collections.namedtuple("EndpointRow", ENDPOINT_COLUMNS.replace(",", " "))  # type: ignore[misc]


def claimed(
    rows: Sequence[Sequence[Any]], bodies: dict[str, bytes], endpoints: dict[str, EndpointRecord]
) -> list[Claim]:
    """Claims from rows of ``DELIVERY_COLUMNS``, oldest delivery first."""
    claims = []
    for r in rows:
        status = D(r[6])
        d = DeliveryRecord(
            id=r[0],
            event_id=r[1],
            endpoint_id=r[2],
            account_id=r[3],
            environment=r[4],
            event_type=r[5],
            status=status,
            attempt_count=r[7],
            schedule_count=r[8],
            next_attempt_at=at_us(r[9]) if status is D.PENDING and r[9] is not None else None,
            created_at=at_us(r[10]),
            updated_at=at_us(r[11]),
        )
        claims.append(Claim(d, bytes(bodies[d.event_id]), endpoints.get(d.endpoint_id)))
    claims.sort(key=lambda c: c.delivery.created_at)
    return claims


def alert_row(endpoint_id: str, reason: str, disabled: Sequence[Any], now_us: int) -> tuple[Any, ...]:
    """INSERT_ALERT's parameters for an endpoint DISABLE_ENDPOINT just disabled (its returned row)."""
    return (new_id("alrt"), disabled[0], disabled[1], endpoint_id, disabled[2], reason, now_us)


def alerts_of(rows: Sequence[tuple[Any, ...]], now: dt.datetime) -> list[Alert]:
    """Alerts from INSERT_ALERT's parameter rows."""
    return [Alert(a[0], a[1], a[2], a[3], a[4], a[5], now) for a in rows]
