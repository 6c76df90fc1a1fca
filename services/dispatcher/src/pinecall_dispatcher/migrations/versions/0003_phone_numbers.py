"""Phone numbers (issue 18): an org's number rings one agent, with its trunk and rule on LiveKit.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "phone_numbers",
        sa.Column("number", sa.String(16), nullable=False),
        sa.Column("org", sa.String(128), nullable=False),
        sa.Column("environment", sa.String(32), nullable=False),
        sa.Column("agent", sa.String(128), nullable=False),
        sa.Column("fleet", sa.String(63), nullable=False),
        sa.Column("livekit_url", sa.String(512), nullable=False),
        sa.Column("trunk_id", sa.String(64), nullable=True),
        sa.Column("rule_id", sa.String(64), nullable=True),
        sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("number", name="pk_phone_numbers"),
        schema="dispatcher",
    )
    # an org's numbers in one environment (the list)
    op.create_index(
        "ix_phone_numbers_org", "phone_numbers", ["org", "environment"], schema="dispatcher"
    )


def downgrade() -> None:
    op.drop_table("phone_numbers", schema="dispatcher")
