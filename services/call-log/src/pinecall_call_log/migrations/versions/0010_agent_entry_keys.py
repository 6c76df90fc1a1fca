"""An agent-log entry's key (issue 18, "Call backs, dialled": each try on the agent's log once):
a writer's own id of an entry (``AgentEntry.key``), unique per agent's log, so an entry re-sent
after a crash of its writer (the follow-ups' dialler sends its notes until it knows them
written) is written once; entries without a key are as before.

Expand only: a nullable column and a partial unique index; the previous release writes no key
and reads none, so it runs beside it.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "agent_entries", sa.Column("key", sa.String(128), nullable=True), schema="calllog"
    )
    op.create_index(
        "uq_agent_entries_key",
        "agent_entries",
        ["environment", "agent", "key"],
        unique=True,
        schema="calllog",
        postgresql_where=sa.text("key IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("uq_agent_entries_key", "agent_entries", schema="calllog")
    op.drop_column("agent_entries", "key", schema="calllog")
