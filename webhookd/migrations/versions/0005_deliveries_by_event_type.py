"""An index for the delivery log filtered by event kind (ListDeliveries.event_type), newest first."""

from alembic import op

revision = "0005"
down_revision = "0004"


def upgrade() -> None:
    op.create_index(
        "wh_deliveries_scope_type",
        "wh_deliveries",
        ["account_id", "environment", "event_type", "created_at"],
        if_not_exists=True,  # a database stamped back to an older revision (as tests do) upgrades again
    )


def downgrade() -> None:
    op.drop_index("wh_deliveries_scope_type", table_name="wh_deliveries")
