"""Issue 21, delivery throughput on PostgreSQL: the queue in a table of its own, ``wh_pending``, one row per
pending delivery, so that a claim and a result no longer put new versions of the delivery log's rows into all
six of its indexes (``webhookd._tables``). The pending deliveries are copied in, leases and all (a lease held
by a process running the previous release runs out as it would have); the due and ordered indexes move from
``wh_deliveries`` to ``wh_pending``, whose ``next_attempt_at`` and ``lease_owner`` are cleared for the pending
ones (the previous release's processes, which claim from them, leave them alone); on PostgreSQL
``wh_deliveries`` keeps 30 % of each page free (fillfactor 70), so most results' updates are HOT (the new row
version on the same page, no index entry).
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"

ORDERED_PENDING = "ordering_key IS NOT NULL"
OLD_ORDERED_PENDING = "status = 'pending' AND ordering_key IS NOT NULL"


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        # Processes of the previous release may run beside this (a rolling upgrade): no delivery of theirs
        # may be written between the copy below and the clearing after it, or it would be in neither
        # queue. Their writes wait for this revision's commit; their reads go on.
        op.execute("LOCK TABLE wh_deliveries IN EXCLUSIVE MODE")
    op.create_table(
        "wh_pending",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("endpoint_id", sa.String(64), nullable=False),
        sa.Column("account_id", sa.String(64), nullable=False),
        sa.Column("environment", sa.String(16), nullable=False),
        sa.Column("attempt_count", sa.Integer, nullable=False),
        sa.Column("next_attempt_at", sa.BigInteger, nullable=False),
        sa.Column("lease_owner", sa.String(64), nullable=True),
        sa.Column("ordering_key", sa.String(255), nullable=True),
        sa.Column("event_seq", sa.BigInteger, nullable=True),
        sqlite_with_rowid=False,
    )
    op.execute(
        "INSERT INTO wh_pending (id, endpoint_id, account_id, environment, attempt_count, next_attempt_at,"
        " lease_owner, ordering_key, event_seq)"
        " SELECT id, endpoint_id, account_id, environment, attempt_count,"
        " COALESCE(next_attempt_at, due_at, created_at), lease_owner, ordering_key, event_seq"
        " FROM wh_deliveries WHERE status = 'pending'"
    )
    # Cleared, not left to the due time: a process of the previous release claims from these columns, and
    # may still run during a rolling upgrade; what it can no longer see it cannot send twice. (Until
    # 2026-11-29 this wrote next_attempt_at = due_at, so the previous release's processes claimed again what
    # the queue now held: docs/operations.md "Upgrades and rollbacks".)
    op.execute(
        "UPDATE wh_deliveries SET next_attempt_at = NULL, lease_owner = NULL"
        " WHERE status = 'pending' AND id IN (SELECT id FROM wh_pending)"
    )
    op.create_index("wh_pending_due", "wh_pending", ["next_attempt_at"])
    op.create_index(
        "wh_pending_ordered",
        "wh_pending",
        ["endpoint_id", "ordering_key", "event_seq"],
        sqlite_where=sa.text(ORDERED_PENDING),
        postgresql_where=sa.text(ORDERED_PENDING),
    )
    op.drop_index("wh_deliveries_ordered", table_name="wh_deliveries")
    op.drop_index("wh_deliveries_due", table_name="wh_deliveries")
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE wh_deliveries SET (fillfactor = 70)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE wh_deliveries RESET (fillfactor)")
    op.create_index("wh_deliveries_due", "wh_deliveries", ["status", "next_attempt_at"])
    op.create_index(
        "wh_deliveries_ordered",
        "wh_deliveries",
        ["endpoint_id", "ordering_key", "event_seq"],
        sqlite_where=sa.text(OLD_ORDERED_PENDING),
        postgresql_where=sa.text(OLD_ORDERED_PENDING),
    )
    op.execute(
        "UPDATE wh_deliveries SET next_attempt_at = (SELECT p.next_attempt_at FROM wh_pending p"
        " WHERE p.id = wh_deliveries.id), lease_owner = (SELECT p.lease_owner FROM wh_pending p"
        " WHERE p.id = wh_deliveries.id) WHERE status = 'pending'"
    )
    op.drop_index("wh_pending_ordered", table_name="wh_pending")
    op.drop_index("wh_pending_due", table_name="wh_pending")
    op.drop_table("wh_pending")
