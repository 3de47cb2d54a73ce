"""Receivers that authenticate us (``webhookd._receiver_auth``): per endpoint, the public parts of its
client certificate, OAuth2 client credentials and custom headers as JSON (``receiver_auth``), and their
secrets (the certificate's private key, the client secret) sealed like the signing secrets
(``receiver_secrets``); "" where the endpoint has none.

Expand-only: the previous release neither reads nor writes the columns (an endpoint it saves keeps
them: it updates named columns only).

Revision ID: 0013
Revises: 0011
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("wh_endpoints", sa.Column("receiver_auth", sa.Text(), nullable=False, server_default=""))
    op.add_column("wh_endpoints", sa.Column("receiver_secrets", sa.Text(), nullable=False, server_default=""))


def downgrade() -> None:
    op.drop_column("wh_endpoints", "receiver_secrets")
    op.drop_column("wh_endpoints", "receiver_auth")
