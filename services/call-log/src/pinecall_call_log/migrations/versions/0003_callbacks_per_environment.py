"""A call back is once per call of an environment, not once per call id across environments:
a key of one environment could otherwise take (and read back) the call back of another's call.

Expand only: the new index is wider than the one it replaces (it refuses less), so the previous
release runs beside it.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "uq_callbacks_environment_call_id", "callbacks", ["environment", "call_id"], unique=True,
        postgresql_where=sa.text("call_id IS NOT NULL"), schema="calllog",
    )
    op.drop_index("uq_callbacks_call_id", table_name="callbacks", schema="calllog")


def downgrade() -> None:
    op.create_index(
        "uq_callbacks_call_id", "callbacks", ["call_id"], unique=True,
        postgresql_where=sa.text("call_id IS NOT NULL"), schema="calllog",
    )
    op.drop_index("uq_callbacks_environment_call_id", table_name="callbacks", schema="calllog")
