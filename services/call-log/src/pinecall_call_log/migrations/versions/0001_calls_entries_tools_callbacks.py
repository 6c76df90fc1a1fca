"""Calls and their heads, entries, tool calls, the agent log and callbacks.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "calls",
        sa.Column("call_id", sa.String(128), nullable=False),
        sa.Column("agent", sa.String(128), nullable=False),
        sa.Column("org", sa.String(128), nullable=False),
        sa.Column("environment", sa.String(32), nullable=False),
        sa.Column("room", sa.String(256), nullable=False),
        sa.Column("worker", sa.String(320), nullable=False),
        sa.Column("context", JSONB, nullable=False),
        sa.Column("config", JSONB, nullable=False),
        sa.Column("prompt_hash", sa.String(128), nullable=True),
        sa.Column("reopened", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("written", sa.Integer, nullable=False, server_default="0"),
        sa.Column("last_seq", sa.Integer, nullable=False, server_default="0"),
        sa.Column("outcome", sa.String(32), nullable=True),
        sa.Column("opened_at", TS, nullable=False),
        sa.Column("ended_at", TS, nullable=True),
        sa.Column("sealed_at", TS, nullable=True),
        sa.PrimaryKeyConstraint("call_id", name="pk_calls"),
        schema="calllog",
    )
    op.create_table(
        "entries",
        sa.Column("call_id", sa.String(128), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("counted", sa.Integer, nullable=True),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("ts", TS, nullable=False),
        sa.Column("data", JSONB, nullable=False),
        sa.Column("digest", sa.LargeBinary(16), nullable=True),
        sa.PrimaryKeyConstraint("call_id", "seq", name="pk_entries"),
        sa.UniqueConstraint("call_id", "counted", name="uq_entries_call_id_counted"),
        schema="calllog",
    )
    op.create_table(
        "tool_calls",
        sa.Column("call_id", sa.String(128), nullable=False),
        sa.Column("tool_id", sa.String(128), nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("arguments", JSONB, nullable=False),
        sa.Column("deadline", TS, nullable=False),
        sa.Column("call_seq", sa.Integer, nullable=False),
        sa.Column("result", JSONB, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("result_seq", sa.Integer, nullable=True),
        sa.PrimaryKeyConstraint("call_id", "tool_id", name="pk_tool_calls"),
        schema="calllog",
    )
    op.create_table(
        "agent_entries",
        sa.Column("seq", sa.BigInteger, sa.Identity(), nullable=False),
        sa.Column("environment", sa.String(32), nullable=False),
        sa.Column("agent", sa.String(128), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("ts", TS, nullable=False),
        sa.Column("data", JSONB, nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_agent_entries"),
        schema="calllog",
    )
    op.create_index(
        "ix_agent_entries_agent", "agent_entries", ["environment", "agent", "seq"],
        schema="calllog",
    )
    op.create_table(
        "callbacks",
        sa.Column("id", sa.BigInteger, sa.Identity(), nullable=False),
        sa.Column("environment", sa.String(32), nullable=False),
        sa.Column("agent", sa.String(128), nullable=False),
        sa.Column("call_id", sa.String(128), nullable=True),
        sa.Column("number", sa.String(24), nullable=True),
        sa.Column("contact", sa.Text, nullable=True),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("agent_seq", sa.BigInteger, nullable=False),
        sa.Column("requested_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_callbacks"),
        schema="calllog",
    )
    op.create_index(
        "uq_callbacks_call_id", "callbacks", ["call_id"], unique=True,
        postgresql_where=sa.text("call_id IS NOT NULL"), schema="calllog",
    )


def downgrade() -> None:
    for table in ("callbacks", "agent_entries", "tool_calls", "entries", "calls"):
        op.drop_table(table, schema="calllog")
