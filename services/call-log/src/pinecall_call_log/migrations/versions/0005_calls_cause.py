"""Why a call ended ``drained``: a ``cause`` beside the outcome (``EndCause``: drain_timeout,
shutdown, room_gone, lost_agent, stale), None where its ender did not say.

Expand only: a nullable column, so the previous release runs beside it (it neither writes nor
reads the column).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("calls", sa.Column("cause", sa.String(32), nullable=True), schema="calllog")


def downgrade() -> None:
    op.drop_column("calls", "cause", schema="calllog")
