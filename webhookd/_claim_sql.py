"""The claim's statements (``webhookd._queue_sql`` runs them by the name ``claim``): the due rows a worker
leases, the ordered ones held back by an earlier delivery of their key (``FREE``), and on SQLite the reads
of what was claimed. Parameters are numbered as in ``webhookd._queue_sql``."""

from __future__ import annotations

from svckit.webhook_status import DeliveryStatus as D
from webhookd._ordering import HOLDS_BACK
from webhookd._tables import DELIVERY_COLUMNS, ENDPOINT_COLUMNS, spelled

# A queue row ``d`` is free unless an earlier delivery of its ordering key to its endpoint is pending
# (``webhookd._ordering``): an unordered one (no key) never looks further; an ordered one looks in the
# partial index ``wh_pending_ordered`` of keyed queue rows, ``IS NOT NULL`` written as in the index's own
# WHERE so that both SQLite and PostgreSQL use it.
if HOLDS_BACK != {D.PENDING}:
    raise ImportError("wh_pending holds pending deliveries only: it no longer covers HOLDS_BACK")
FREE = """(d.ordering_key IS NULL OR NOT EXISTS (
            SELECT 1 FROM wh_pending e
            WHERE e.endpoint_id = d.endpoint_id AND e.ordering_key = d.ordering_key
              AND e.ordering_key IS NOT NULL AND e.event_seq < d.event_seq))"""

# claim: (lease expiry, owner, now, limit, skipped endpoints, accounts ("environment:account"),
# environments, environments whose retries are skipped, accounts in probation skipped but for their
# proven endpoints, those endpoints, due after (µs; -1: every due row), the ordering keys freed
# ([[endpoint id, key], ...])) -> delivery columns [+ envelope + endpoint columns].
# The skips are JSON arrays of text (``webhookd._admission.Skips``): what the worker already holds its fill
# of is left in the table, so the claim reaches the deliveries of others behind it. ``{elements}`` is the
# dialect's set of a JSON array's texts. The claim walks the due rows in order (after $11: a range of the
# due index, ``webhookd._claim_walks``), and takes besides the head of each ordering key the worker's last
# results freed (found by ``wh_pending_ordered``, never by a walk of the rows behind it), each as the walk
# would: due, not skipped, free.
_TAKEN = f"""
          next_attempt_at <= $3
          AND endpoint_id NOT IN ({{elements5}})
          AND environment || ':' || account_id NOT IN ({{elements6}})
          AND environment NOT IN ({{elements7}})
          AND (attempt_count = 0 OR environment NOT IN ({{elements8}}))
          AND (environment || ':' || account_id NOT IN ({{elements9}}) OR endpoint_id IN ({{elements10}}))
          AND {FREE}"""
_CLAIM = f"""
    UPDATE wh_pending SET next_attempt_at = $1, lease_owner = $2
    WHERE id IN (
        SELECT id FROM (
            SELECT id FROM wh_pending d
            WHERE next_attempt_at > $11 AND {_TAKEN}
            ORDER BY next_attempt_at LIMIT $4 {{lock}}
        ) walked
        UNION ALL
        SELECT id FROM (
            SELECT id FROM wh_pending d
            WHERE id IN (
                SELECT (SELECT e.id FROM wh_pending e
                        WHERE e.endpoint_id = f.endpoint_id AND e.ordering_key = f.ordering_key
                          AND e.ordering_key IS NOT NULL
                        ORDER BY e.event_seq LIMIT 1)
                FROM ({{freed}}) f
            ) AND {_TAKEN}
            {{lock}}
        ) freed
    )
    RETURNING id
"""


def _claim_text(lock: str, elements: str, freed: str) -> str:
    return _CLAIM.format(
        lock=lock, freed=freed, **{f"elements{i}": elements.format(i=i) for i in (5, 6, 7, 8, 9, 10)}
    )


_PG_ELEMENTS = "SELECT jsonb_array_elements_text(${i}::jsonb)"
_SQLITE_ELEMENTS = "SELECT value FROM json_each(${i})"
_PG_FREED = "SELECT f->>0 AS endpoint_id, f->>1 AS ordering_key FROM jsonb_array_elements($12::jsonb) f"
_SQLITE_FREED = "SELECT value ->> 0 AS endpoint_id, value ->> 1 AS ordering_key FROM json_each($12)"
# Numbered as PostgreSQL's ($n): ``webhookd._queue_sql.sqlite`` spells it for SQLite.
CLAIM_SQLITE = _claim_text("", _SQLITE_ELEMENTS, _SQLITE_FREED)
CLAIM_POSTGRES = f"""
    WITH claimed AS ({_claim_text("FOR UPDATE SKIP LOCKED", _PG_ELEMENTS, _PG_FREED)})
    SELECT {spelled(DELIVERY_COLUMNS, "dl.")}, ev.envelope, {spelled(ENDPOINT_COLUMNS, "ep.")}
    FROM claimed c JOIN wh_deliveries dl ON dl.id = c.id JOIN wh_events ev ON ev.id = dl.event_id
    LEFT JOIN wh_endpoints ep ON ep.id = dl.endpoint_id AND ep.deleted_at IS NULL
"""
# SQLite has no UPDATE inside WITH: the claim returns the ids, then these read the deliveries with their
# event bodies, and each endpoint once (the sqlite3 module makes a Python object of every value read: an
# endpoint's columns with each of 200 deliveries cost the claim a third more), each one statement whatever
# the number of ids (a JSON array, so its text and prepared statement stay the same).
CLAIMED_SQLITE = f"""
    SELECT {spelled(DELIVERY_COLUMNS, "dl.")}, ev.envelope
    FROM json_each(?1) c JOIN wh_deliveries dl ON dl.id = c.value JOIN wh_events ev ON ev.id = dl.event_id
"""
CLAIMED_ENDPOINTS_SQLITE = f"""
    SELECT {spelled(ENDPOINT_COLUMNS, "ep.")}
    FROM json_each(?1) c JOIN wh_endpoints ep ON ep.id = c.value WHERE ep.deleted_at IS NULL
"""
