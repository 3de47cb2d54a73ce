"""Destination types (``webhookd._destinations``): an endpoint's type (http, polling, amqp, nats), that
type's settings as JSON and its credentials as JSON, sealed like the signing secrets
(``webhookd._rows``; ``python -m webhookd reseal`` re-seals both columns).

Expand-only: every existing endpoint is an http one ("http", no settings), which the previous release
sends to as before; it ignores the new columns.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "wh_endpoints", sa.Column("destination_type", sa.String(16), nullable=False, server_default="http")
    )
    op.add_column("wh_endpoints", sa.Column("destination", sa.Text(), nullable=False, server_default=""))
    op.add_column(
        "wh_endpoints", sa.Column("destination_secret", sa.Text(), nullable=False, server_default="")
    )


def downgrade() -> None:
    op.drop_column("wh_endpoints", "destination_secret")
    op.drop_column("wh_endpoints", "destination")
    op.drop_column("wh_endpoints", "destination_type")
