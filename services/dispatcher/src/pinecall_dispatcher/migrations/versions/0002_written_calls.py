"""Written calls admitted (issue 17): each counts against its org's quota, no seat, no room.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "written",
        sa.Column("call", sa.String(128), nullable=False),
        sa.Column("environment", sa.String(32), nullable=False),
        sa.Column("org", sa.String(128), nullable=False),
        sa.Column("agent", sa.String(128), nullable=False),
        sa.Column("channel", sa.String(16), nullable=False),
        sa.Column("admitted_at", TS, nullable=False),
        sa.Column("admitted_until", TS, nullable=False),
        sa.Column("opened_at", TS, nullable=True),
        sa.Column("ended_at", TS, nullable=True),
        sa.Column("outcome", sa.String(32), nullable=True),
        sa.PrimaryKeyConstraint("call", name="pk_written"),
        schema="dispatcher",
    )
    # the live written calls of an org (its quota)
    op.create_index(
        "ix_written_live_org", "written", ["org", "environment"], schema="dispatcher",
        postgresql_where=sa.text("ended_at IS NULL"),
    )  # fmt: skip


def downgrade() -> None:
    op.drop_table("written", schema="dispatcher")
