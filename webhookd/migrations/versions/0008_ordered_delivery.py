"""Issue 21, ordered delivery (opt-in): an endpoint's delivery order ("none", the default, or
"perResource"); each delivery's ordering key (NULL: never held back) and its event's seq; a partial index
of the pending keyed deliveries for the claim's look for an earlier one (``webhookd._ordering``).
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"

ORDERED_PENDING = "status = 'pending' AND ordering_key IS NOT NULL"


def upgrade() -> None:
    op.add_column("wh_endpoints", sa.Column("ordering", sa.String(16), nullable=False, server_default="none"))
    op.add_column("wh_deliveries", sa.Column("ordering_key", sa.String(255), nullable=True))
    op.add_column("wh_deliveries", sa.Column("event_seq", sa.BigInteger(), nullable=True))
    op.create_index(
        "wh_deliveries_ordered",
        "wh_deliveries",
        ["endpoint_id", "ordering_key", "event_seq"],
        sqlite_where=sa.text(ORDERED_PENDING),
        postgresql_where=sa.text(ORDERED_PENDING),
    )


def downgrade() -> None:
    op.drop_index("wh_deliveries_ordered", table_name="wh_deliveries")
    op.drop_column("wh_deliveries", "event_seq")
    op.drop_column("wh_deliveries", "ordering_key")
    op.drop_column("wh_endpoints", "ordering")
