"""Outbound calls (issue 18): one row per call, unique on the app's request id; a room's trunk.

Expand only: a table and a nullable column. The brief's revision is 0004 after 0003; no 0003
exists on this branch's main, so it follows 0002 here and the lead re-chains it at merge.

Revision ID: 0004
Revises: 0002
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "outbound",
        sa.Column("call", sa.String(128), nullable=False),
        sa.Column("environment", sa.String(32), nullable=False),
        sa.Column("org", sa.String(128), nullable=False),
        sa.Column("request", sa.String(64), nullable=True),
        sa.Column("agent", sa.String(128), nullable=False),
        sa.Column("number", sa.String(32), nullable=False),
        sa.Column("context", JSONB, nullable=False, server_default="{}"),
        sa.Column("fleet", sa.String(63), nullable=False),
        sa.Column("room", sa.String(256), nullable=False),
        sa.Column("sip_trunk", sa.String(64), nullable=False),
        sa.Column("placed_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("call", name="pk_outbound"),
        sa.UniqueConstraint("environment", "org", "request", name="uq_outbound_request"),
        schema="dispatcher",
    )
    op.add_column(
        "rooms", sa.Column("sip_trunk", sa.String(64), nullable=True), schema="dispatcher"
    )


def downgrade() -> None:
    op.drop_column("rooms", "sip_trunk", schema="dispatcher")
    op.drop_table("outbound", schema="dispatcher")
