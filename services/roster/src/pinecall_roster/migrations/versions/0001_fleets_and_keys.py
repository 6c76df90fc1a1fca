"""The fleets rows and the keys table.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "fleets",
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("environment", sa.String(32), nullable=False),
        sa.Column("livekit_url", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("name", name="pk_fleets"),
        schema="roster",
    )
    op.create_table(
        "keys",
        sa.Column("id", sa.String(12), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("environment", sa.String(32), nullable=True),
        sa.Column("secret_sha256", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_keys"),
        sa.CheckConstraint("kind IN ('operator', 'fleet', 'app')", name="ck_keys_kind"),
        schema="roster",
    )


def downgrade() -> None:
    op.drop_table("keys", schema="roster")
    op.drop_table("fleets", schema="roster")
