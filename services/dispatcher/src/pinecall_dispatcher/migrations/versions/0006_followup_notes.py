"""The follow-ups' notes (issue 18, "Call backs, dialled": each try and its outcome on the agent's
log, once): an outbox. Every change of a follow-up or a try inserts the agent-log entries it owes
in its own transaction; the dialler sends them (each with its row id as the entry's key, which
call-log writes once: its migration 0010) and marks them written, so a crash between the change
and the log re-sends rather than loses.

Expand only: a new table; the previous release writes its entries directly and never reads it.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "followup_notes",
        sa.Column("id", sa.BigInteger, sa.Identity(), nullable=False),
        sa.Column("environment", sa.String(32), nullable=False),
        sa.Column("agent", sa.String(128), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("data", JSONB, nullable=False),
        sa.Column("made_at", TS, nullable=False),
        sa.Column("written_at", TS, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_followup_notes"),
        schema="dispatcher",
    )
    op.create_index(
        "ix_followup_notes_owed",
        "followup_notes",
        ["id"],
        schema="dispatcher",
        postgresql_where=sa.text("written_at IS NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_followup_notes_owed", "followup_notes", schema="dispatcher")
    op.drop_table("followup_notes", schema="dispatcher")
