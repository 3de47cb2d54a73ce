"""Issue 39, content filters and thin payloads: an endpoint's filter (compact JSON, NULL: none;
svckit.jsonmatch), when it was last set or cleared, and what its deliveries carry ("full", the default,
or "thin").

A filtered-out event leaves no row (docs/webhooks.md "Filters"): the portal's event page tells it from the
endpoint's filter, so a filter that drops most of a busy kind costs no storage.

Expand-only: the previous release ignores the three columns (it delivers every event in full, as before).

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("wh_endpoints", sa.Column("filter", sa.Text(), nullable=True))
    op.add_column("wh_endpoints", sa.Column("filter_updated_at", sa.BigInteger(), nullable=True))
    op.add_column("wh_endpoints", sa.Column("payload", sa.String(16), nullable=False, server_default="full"))


def downgrade() -> None:
    op.drop_column("wh_endpoints", "payload")
    op.drop_column("wh_endpoints", "filter_updated_at")
    op.drop_column("wh_endpoints", "filter")
