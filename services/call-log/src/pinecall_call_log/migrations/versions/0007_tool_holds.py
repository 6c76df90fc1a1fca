"""A tool call a draining app socket still runs (issue 16, acceptance 3: "tools it is running
still answer"): one row per (call, tool call) naming the replica and instance running it. While
the row is there the call's next holder is not sent that tool call; the row goes when the socket
closes (the tool call is then sent to the call's holder) or its replica is taken for dead.

Expand only: a new table, nothing of the previous release's changed, so it runs beside it (a
replica of that release ignores the rows: it sends such a tool call again, as it did before).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tool_holds",
        sa.Column("call_id", sa.String(128), nullable=False),
        sa.Column("tool_id", sa.String(128), nullable=False),
        sa.Column("replica", sa.String(256), nullable=False),
        sa.Column("instance", sa.String(128), nullable=False),
        sa.Column("since", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("call_id", "tool_id", name="pk_tool_holds"),
        schema="calllog",
    )
    op.create_index("ix_tool_holds_replica", "tool_holds", ["replica"], schema="calllog")


def downgrade() -> None:
    op.drop_table("tool_holds", schema="calllog")
