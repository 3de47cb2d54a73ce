"""Rolling upgrades across revision 0009 without a second send: ``wh_deliveries.next_attempt_at`` is set
only on deliveries a process of a release before 0009 queued (this release leaves it NULL), and webhookd's
housekeeping moves those into ``wh_pending`` (``webhookd._queue_sql`` "adopt"); this partial index finds
them without reading the delivery log. Deliveries the queue already holds get the column cleared first
(0009 as first released left it at the due time), so the index starts empty.

Expand-only: the previous release ignores the index and never reads the column of a delivery it did not
queue.
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"

OLD_QUEUED = "next_attempt_at IS NOT NULL"


def upgrade() -> None:
    op.execute(
        "UPDATE wh_deliveries SET next_attempt_at = NULL"
        " WHERE next_attempt_at IS NOT NULL AND id IN (SELECT id FROM wh_pending)"
    )
    op.create_index(
        "wh_deliveries_old_queue",
        "wh_deliveries",
        ["next_attempt_at"],
        sqlite_where=sa.text(OLD_QUEUED),
        postgresql_where=sa.text(OLD_QUEUED),
    )


def downgrade() -> None:
    op.drop_index("wh_deliveries_old_queue", table_name="wh_deliveries")
