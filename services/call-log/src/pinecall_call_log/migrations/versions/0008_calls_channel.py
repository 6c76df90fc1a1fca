"""A written call's channel (issue 17): ``chat`` or ``whatsapp`` beside the call, None for a
voice call; the reaper ends a written call by it (it has no room to read).

Expand only: a nullable column, so the previous release runs beside it (it neither writes nor
reads the column).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("calls", sa.Column("channel", sa.String(16), nullable=True), schema="calllog")


def downgrade() -> None:
    op.drop_column("calls", "channel", schema="calllog")
