"""Portal settings of an account: whether owners and admins must sign in with TOTP."""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"


def upgrade() -> None:
    op.create_table(
        "auth_portal_settings",
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("require_totp", sa.Boolean(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("account_id"),
    )


def downgrade() -> None:
    op.drop_table("auth_portal_settings")
