"""The rooms kept in offers, the journal, the orgs' quotas and the refusals at admission.

Revision ID: 0001
Revises:
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "rooms",
        sa.Column("call", sa.String(128), nullable=False),
        sa.Column("environment", sa.String(32), nullable=False),
        sa.Column("fleet", sa.String(63), nullable=False),
        sa.Column("room", sa.String(256), nullable=False),
        sa.Column("room_sid", sa.String(64), nullable=True),
        sa.Column("ring", sa.String(64), nullable=True),
        sa.Column("agent", sa.String(128), nullable=False),
        sa.Column("org", sa.String(128), nullable=False, server_default=""),
        sa.Column("caller", sa.String(16), nullable=False),
        sa.Column("caller_identity", sa.String(256), nullable=True),
        sa.Column("number", sa.String(32), nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("job", sa.String(16), nullable=False, server_default="answer"),
        sa.Column("written", sa.Integer, nullable=True),
        sa.Column("tried", ARRAY(sa.String(320)), nullable=False, server_default="{}"),
        sa.Column("worker", sa.String(320), nullable=True),
        sa.Column("dispatch", sa.String(64), nullable=True),
        sa.Column("waited", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("outcome", sa.String(32), nullable=True),
        sa.Column("context", JSONB, nullable=False, server_default="{}"),
        sa.Column("config", JSONB, nullable=False, server_default="{}"),
        sa.Column("admitted_until", TS, nullable=True),
        sa.Column("arrived_at", TS, nullable=True),
        sa.Column("offered_at", TS, nullable=True),
        sa.Column("opened_at", TS, nullable=True),
        sa.Column("ended_at", TS, nullable=True),
        sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("call", name="pk_rooms"),
        sa.CheckConstraint(
            "state IN ('admitted', 'waiting', 'overflow', 'opened', 'ended')",
            name="ck_rooms_state",
        ),
        schema="dispatcher",
    )
    # the rooms of a room name (webhooks name the room), the live rooms of a fleet (offers,
    # seats), of an org (its quota), and the recent ones (rooms waiting in ten minutes)
    op.create_index("ix_rooms_room", "rooms", ["environment", "room"], schema="dispatcher")
    op.create_index(
        "ix_rooms_live_fleet", "rooms", ["fleet", "state"], schema="dispatcher",
        postgresql_where=sa.text("state <> 'ended'"),
    )
    op.create_index(
        "ix_rooms_live_org", "rooms", ["org", "environment"], schema="dispatcher",
        postgresql_where=sa.text("state <> 'ended'"),
    )
    op.create_index("ix_rooms_arrived_at", "rooms", ["arrived_at"], schema="dispatcher")
    op.create_table(
        "journal",
        sa.Column("id", sa.BigInteger, sa.Identity(), nullable=False),
        sa.Column("call", sa.String(128), nullable=False),
        sa.Column("room", sa.String(256), nullable=False),
        sa.Column("fleet", sa.String(63), nullable=False),
        sa.Column("at", TS, nullable=False),
        sa.Column("line", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_journal"),
        schema="dispatcher",
    )
    op.create_index("ix_journal_call", "journal", ["call", "id"], schema="dispatcher")
    op.create_table(
        "quotas",
        sa.Column("org", sa.String(128), nullable=False),
        sa.Column("environment", sa.String(32), nullable=False),
        sa.Column("concurrent_calls", sa.Integer, nullable=False),
        sa.Column("updated_at", TS, nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("org", "environment", name="pk_quotas"),
        sa.CheckConstraint("concurrent_calls >= 0", name="ck_quotas_concurrent_calls"),
        schema="dispatcher",
    )
    op.create_table(
        "refusals",
        sa.Column("id", sa.BigInteger, sa.Identity(), nullable=False),
        sa.Column("at", TS, nullable=False),
        sa.Column("environment", sa.String(32), nullable=False),
        sa.Column("fleet", sa.String(63), nullable=False),
        sa.Column("agent", sa.String(128), nullable=False),
        sa.Column("org", sa.String(128), nullable=False),
        sa.Column("reason", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_refusals"),
        schema="dispatcher",
    )
    op.create_index("ix_refusals_at", "refusals", ["at"], schema="dispatcher")


def downgrade() -> None:
    op.drop_table("refusals", schema="dispatcher")
    op.drop_table("quotas", schema="dispatcher")
    op.drop_table("journal", schema="dispatcher")
    op.drop_table("rooms", schema="dispatcher")
