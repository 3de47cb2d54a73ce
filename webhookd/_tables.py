"""webhookd's tables as SQLAlchemy ``Table`` objects (the migrations in ``webhookd/migrations`` create them;
``tests/integration/test_migrations.py`` checks the two agree), and each table's column list, derived from
the table: the named statements (``_queue_sql``) and the row conversions (``_rows``) spell no column.

Times are stored as integer microseconds since the epoch (UTC): exact, index-friendly, the same on SQLite
and PostgreSQL.
"""

from __future__ import annotations

import sqlalchemy as sa

from svckit.db import account_columns

metadata = sa.MetaData()
# The rows of ``wh_pending_ordered``: pending deliveries that have an ordering key.
ORDERED_PENDING = "ordering_key IS NOT NULL"
_SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

endpoints = sa.Table(
    "wh_endpoints",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    *account_columns(),
    sa.Column("url", sa.Text, nullable=False),
    sa.Column("events", sa.Text, nullable=False),
    sa.Column("description", sa.Text, nullable=False, default=""),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("disabled_reason", sa.Text, nullable=False, default=""),
    sa.Column("secrets", sa.Text, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
    sa.Column("deleted_at", sa.BigInteger, nullable=True),
    # Revision 0007: which signature headers its deliveries carry (svckit.signing.SignatureScheme).
    sa.Column("signature_scheme", sa.String(16), nullable=False, server_default="stripe"),
    # Revision 0007: the highest endpoint.failing level announced (50, 90; 100 disabled) since it last
    # answered 2xx (``webhookd._health``); 0 healthy.
    sa.Column("failing_level", sa.Integer, nullable=False, server_default="0"),
    # Revision 0008: svckit.webhook_status.DeliveryOrder ("none", "perResource"), webhookd._ordering.
    sa.Column("ordering", sa.String(16), nullable=False, server_default="none"),
    # Revision 0012: the content filter as compact JSON (NULL: none; svckit.jsonmatch), when it was last
    # set or cleared (NULL: at creation), and svckit.webhook_status.PayloadMode ("full", "thin").
    sa.Column("filter", sa.Text, nullable=True),
    sa.Column("filter_updated_at", sa.BigInteger, nullable=True),
    sa.Column("payload", sa.String(16), nullable=False, server_default="full"),
    # Revision 0011 (``webhookd._destinations``): svckit.webhook_status.DestinationType, the type's settings
    # as JSON ("" for http and polling) and its credentials as JSON, sealed like ``secrets`` ("": none).
    sa.Column("destination_type", sa.String(16), nullable=False, server_default="http"),
    sa.Column("destination", sa.Text, nullable=False, server_default=""),
    sa.Column("destination_secret", sa.Text, nullable=False, server_default=""),
    # Revision 0013 (``webhookd._receiver_auth``): how the receiver authenticates us, its public parts as
    # JSON, and its secrets (a client certificate's key, an OAuth2 client secret) as JSON, sealed; "" none.
    sa.Column("receiver_auth", sa.Text, nullable=False, server_default=""),
    sa.Column("receiver_secrets", sa.Text, nullable=False, server_default=""),
    sa.Index("wh_endpoints_scope", "account_id", "environment", "created_at"),
)

events = sa.Table(
    "wh_events",
    metadata,
    sa.Column("seq", _SEQ, primary_key=True, autoincrement=True),
    sa.Column("id", sa.String(64), nullable=False, unique=True),
    *account_columns(),
    sa.Column("type", sa.String(64), nullable=False),
    sa.Column("state", sa.String(64), nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("envelope", sa.LargeBinary, nullable=False),
    sa.Column("idempotency_key", sa.String(255), nullable=True),
    sa.Index("wh_events_scope", "account_id", "environment", "seq"),
    sa.Index("wh_events_idem", "account_id", "environment", "idempotency_key", unique=True),
)

# Every delivery, as the logs list it. Revision 0009: no index holds a column a delivery's result changes
# (status, times, counts), so on PostgreSQL recording a result is a HOT update (no index entry; the table
# keeps room on its pages for it, fillfactor 70); what the queue walks is in ``wh_pending``.
deliveries = sa.Table(
    "wh_deliveries",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("event_id", sa.String(64), nullable=False),
    sa.Column("endpoint_id", sa.String(64), nullable=False),
    *account_columns(),
    sa.Column("event_type", sa.String(64), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("attempt_count", sa.Integer, nullable=False, default=0),
    sa.Column("schedule_count", sa.Integer, nullable=False, default=0),
    # When the next attempt is due (pending only). Since revision 0009 a lease is ``wh_pending``'s and
    # next_attempt_at and lease_owner are NULL, but on a delivery queued by a process of an older release
    # during a rolling upgrade (its claim reads them), until it is adopted (``webhookd._queue_sql``).
    sa.Column("due_at", sa.BigInteger, nullable=True),
    sa.Column("next_attempt_at", sa.BigInteger, nullable=True),
    sa.Column("lease_owner", sa.String(64), nullable=True),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
    # Revision 0008 (``webhookd._ordering``): the event's ordering key when its endpoint is ordered (NULL:
    # never held back) and the event's seq, which orders the deliveries of one key.
    sa.Column("ordering_key", sa.String(255), nullable=True),
    sa.Column("event_seq", sa.BigInteger, nullable=True),
    sa.Index("wh_deliveries_endpoint", "endpoint_id", "created_at"),
    sa.Index("wh_deliveries_event", "event_id"),
    sa.Index("wh_deliveries_scope", "account_id", "environment", "created_at"),
    # Revision 0005: the delivery log filtered by event kind, newest first.
    sa.Index("wh_deliveries_scope_type", "account_id", "environment", "event_type", "created_at"),
    # Revision 0010: the deliveries an older release queued (none, outside a rolling upgrade).
    sa.Index(
        "wh_deliveries_old_queue",
        "next_attempt_at",
        sqlite_where=sa.text("next_attempt_at IS NOT NULL"),
        postgresql_where=sa.text("next_attempt_at IS NOT NULL"),
    ),
)

# Revision 0009: the queue, one row per pending delivery (its ``wh_deliveries`` row has status pending
# exactly while it has one): when it is next due, or its lease expiry while claimed, and what the claim
# filters on, copied. A claim changes a row here (two index entries), not the delivery log's (four);
# a result deletes it, or moves it to the retry's time.
pending = sa.Table(
    "wh_pending",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),  # the delivery's
    sa.Column("endpoint_id", sa.String(64), nullable=False),
    *account_columns(),
    sa.Column("attempt_count", sa.Integer, nullable=False),
    sa.Column("next_attempt_at", sa.BigInteger, nullable=False),
    sa.Column("lease_owner", sa.String(64), nullable=True),
    sa.Column("ordering_key", sa.String(255), nullable=True),
    sa.Column("event_seq", sa.BigInteger, nullable=True),
    sa.Index("wh_pending_due", "next_attempt_at"),
    # The claim's look for an earlier pending delivery of the same key; only keyed rows are in it, so it
    # stays small and unordered endpoints never touch it.
    sa.Index(
        "wh_pending_ordered",
        "endpoint_id",
        "ordering_key",
        "event_seq",
        sqlite_where=sa.text(ORDERED_PENDING),
        postgresql_where=sa.text(ORDERED_PENDING),
    ),
    sqlite_with_rowid=False,
)

attempts = sa.Table(
    "wh_attempts",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("delivery_id", sa.String(64), nullable=False),
    sa.Column("endpoint_id", sa.String(64), nullable=False),
    sa.Column("event_id", sa.String(64), nullable=False),
    *account_columns(),
    sa.Column("attempt_number", sa.Integer, nullable=False),
    sa.Column("outcome", sa.String(16), nullable=False),
    sa.Column("response_status", sa.Integer, nullable=False),
    sa.Column("response_body", sa.Text, nullable=False),
    sa.Column("request_headers", sa.Text, nullable=False),
    sa.Column("latency_ms", sa.Float, nullable=False),
    sa.Column("error", sa.Text, nullable=False),
    sa.Column("attempted_at", sa.BigInteger, nullable=False),
    sa.Column("manual", sa.Boolean, nullable=False, default=False),
    # JSON object (revision 0003).
    sa.Column("response_headers", sa.Text, nullable=False, server_default="{}"),
    sa.Index("wh_attempts_delivery", "delivery_id"),
    # With the outcome (revision 0006), GetAttemptStats counts from the index alone.
    sa.Index("wh_attempts_scope_outcome", "account_id", "environment", "attempted_at", "outcome"),
    sa.Index("wh_attempts_time", "attempted_at"),
)

alerts = sa.Table(
    "wh_alerts",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    *account_columns(),
    sa.Column("endpoint_id", sa.String(64), nullable=False),
    sa.Column("url", sa.Text, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("sent_at", sa.BigInteger, nullable=True),
    sa.Column("error", sa.Text, nullable=False, default=""),
    sa.Index("wh_alerts_pending", "sent_at"),
)


# Revision 0007: the outbox of operational events (endpoint.failing/disabled/recovered,
# delivery.exhausted), written in the delivery results' transaction and published by
# ``webhookd._notices`` (the notice id is the event's idempotency key: published once).
notices = sa.Table(
    "wh_notices",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    *account_columns(),
    sa.Column("endpoint_id", sa.String(64), nullable=False),
    sa.Column("kind", sa.String(64), nullable=False),
    sa.Column("data", sa.Text, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("published_at", sa.BigInteger, nullable=True),
    sa.Index("wh_notices_pending", "published_at", "created_at"),
)


# The idempotency keys of endpoint registrations and rotations (kept 24 h): a retry after the caller
# lost the answer (the edge crashed after the call) gets the same endpoint instead of a second one.
idempotency = sa.Table(
    "wh_idempotency",
    metadata,
    *account_columns(primary_key=True),
    sa.Column("idempotency_key", sa.String(255), primary_key=True),
    sa.Column("request_hash", sa.String(64), nullable=False),
    sa.Column("endpoint_id", sa.String(64), nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
)

# Revision 0015: exact delivery-attempt counts per endpoint and outcome, per hour (grain 3600) and per
# day (86400), with a fixed-bucket latency histogram (svckit.usagecounts; ``lat_0`` .. ``lat_11``), added
# in the same transaction as the attempts (``webhookd._delivery_counts``). The key leads with the scope:
# every read is one account and environment over a range of periods.
delivery_counts = sa.Table(
    "wh_delivery_counts",
    metadata,
    sa.Column("account_id", sa.String(64), primary_key=True),
    sa.Column("environment", sa.String(16), primary_key=True),
    sa.Column("grain", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("period", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("endpoint_id", sa.String(64), primary_key=True),
    sa.Column("outcome", sa.String(16), primary_key=True),
    sa.Column("count", sa.BigInteger, nullable=False),
    sa.Column("latency_sum_ms", sa.BigInteger, nullable=False),
    *(sa.Column(f"lat_{i}", sa.BigInteger, nullable=False) for i in range(12)),
    # The prune of periods past their grain's retention.
    sa.Index("wh_delivery_counts_period", "grain", "period"),
)


# Revision 0014: polling endpoints (``webhookd._polls``, docs/webhooks.md "Polling"). One row per pending
# delivery of a polling endpoint (its ``wh_deliveries`` row is pending exactly while it has one): the
# worker never claims these (they are not in ``wh_pending``); a poll leases a batch of them under a lease id
# (the cursor it answers) until ``lease_until``, a commit of that cursor ends them.
polled = sa.Table(
    "wh_polled",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),  # the delivery's
    sa.Column("endpoint_id", sa.String(64), nullable=False),
    sa.Column("event_seq", sa.BigInteger, nullable=False),
    sa.Column("ordering_key", sa.String(255), nullable=True),
    sa.Column("lease_id", sa.String(64), nullable=True),
    sa.Column("lease_until", sa.BigInteger, nullable=True),
    sa.Column("leased_at", sa.BigInteger, nullable=True),
    sa.Column("leases", sa.Integer, nullable=False, server_default="0"),
    sa.Index("wh_polled_endpoint", "endpoint_id", "event_seq"),
    sa.Index("wh_polled_lease", "lease_id"),
)

# Revision 0014: every batch a poll leased (its id is the cursor), until a day after it ran out.
poll_leases = sa.Table(
    "wh_poll_leases",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("endpoint_id", sa.String(64), nullable=False),
    sa.Column("account_id", sa.String(64), nullable=False),
    sa.Column("environment", sa.String(16), nullable=False),
    sa.Column("size", sa.Integer, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("expires_at", sa.BigInteger, nullable=False),
    sa.Column("committed_at", sa.BigInteger, nullable=True),
    sa.Column("committed", sa.Integer, nullable=False, server_default="0"),
    sa.Index("wh_poll_leases_endpoint", "endpoint_id", "expires_at"),
)

# Revision 0014: when each polling endpoint was last polled (an empty poll too; written at most every 10 s).
pollers = sa.Table(
    "wh_pollers",
    metadata,
    sa.Column("endpoint_id", sa.String(64), primary_key=True),
    sa.Column("last_polled_at", sa.BigInteger, nullable=False),
)


def columns(table: sa.Table, *, without: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The table's column names in table order, less ``without`` (each of which must be a column)."""
    names = tuple(c.name for c in table.columns)
    missing = set(without) - set(names)
    if missing:
        raise ValueError(f"{table.name} has no column {sorted(missing)}")
    return tuple(n for n in names if n not in without)


def spelled(names: tuple[str, ...], prefix: str = "") -> str:
    """A column list as SQL: ``id, account_id, ...`` (each name after ``prefix``, e.g. ``ep.``)."""
    return ", ".join(prefix + n for n in names)


# A delivery as the worker reads it: not its lease (``next_attempt_at`` while claimed, ``lease_owner``).
DELIVERY_COLUMNS = columns(deliveries, without=("next_attempt_at", "lease_owner"))
# Every column: what a new delivery is inserted with.
DELIVERY_INSERT_COLUMNS = columns(deliveries)
# An endpoint as it is read: not its deletion time.
ENDPOINT_COLUMNS = columns(endpoints, without=("deleted_at",))
ATTEMPT_COLUMNS = columns(attempts)
PENDING_COLUMNS = columns(pending)
NOTICE_INSERT_COLUMNS = columns(notices, without=("published_at",))
ALERT_INSERT_COLUMNS = columns(alerts)
COUNT_COLUMNS = columns(delivery_counts)
