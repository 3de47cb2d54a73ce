"""The audit trail's actor names the calling service (from its mutual-TLS certificate)."""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    with op.batch_alter_table("auth_audit_events") as batch:
        batch.add_column(sa.Column("actor_service", sa.String(length=100), server_default="", nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("auth_audit_events") as batch:
        batch.drop_column("actor_service")
