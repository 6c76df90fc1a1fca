"""An index of the calls not sealed yet, per environment: what the reaper lists every minute.

Expand only: an index, no column changed, so the previous release runs beside it.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_calls_unsealed", "calls", ["environment", "call_id"],
        postgresql_where=sa.text("sealed_at IS NULL"), schema="calllog",
    )


def downgrade() -> None:
    op.drop_index("ix_calls_unsealed", table_name="calls", schema="calllog")
