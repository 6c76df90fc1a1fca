"""Which app socket holds which call (issue 16, "The app socket"): one row per call held, naming
the call-log replica and the app instance; no row is a parked call. The primary key makes a call
held by one socket at a time across replicas.

Expand only: a new table, nothing of the previous release's changed, so it runs beside it.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "app_holds",
        sa.Column("call_id", sa.String(128), nullable=False),
        sa.Column("environment", sa.String(32), nullable=False),
        sa.Column("org", sa.String(128), nullable=False),
        sa.Column("agent", sa.String(128), nullable=False),
        sa.Column("replica", sa.String(256), nullable=False),
        sa.Column("instance", sa.String(128), nullable=False),
        sa.Column("since", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("call_id", name="pk_app_holds"),
        schema="calllog",
    )
    op.create_index("ix_app_holds_replica", "app_holds", ["replica"], schema="calllog")


def downgrade() -> None:
    op.drop_table("app_holds", schema="calllog")
