"""When a key was rotated out (RFC 9745 Deprecation): a column, filled for keys rotated before it
existed from their successor's creation time (the same transaction's clock).
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"


def upgrade() -> None:
    with op.batch_alter_table("auth_keys") as batch:
        batch.add_column(sa.Column("rotated_at", sa.Float(), nullable=True))
    op.execute(
        "UPDATE auth_keys SET rotated_at = (SELECT successor.created_at FROM auth_keys AS successor"
        " WHERE successor.id = auth_keys.rotated_to_key_id) WHERE rotated_to_key_id <> ''"
    )


def downgrade() -> None:
    with op.batch_alter_table("auth_keys") as batch:
        batch.drop_column("rotated_at")
