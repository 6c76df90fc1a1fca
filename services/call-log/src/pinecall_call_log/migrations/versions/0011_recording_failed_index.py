"""The recordings that failed lately, read by ``doctor`` (issue 19: "``doctor`` counts them"):
a partial index of ``entries.ts`` over ``call.recording_failed`` entries only, so counting a
recent window reads those entries and no other.

Expand only: an index; the previous release neither reads nor minds it, so it runs beside it.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_entries_recording_failed",
        "entries",
        ["ts"],
        schema="calllog",
        postgresql_where=sa.text("kind = 'call.recording_failed'"),
    )


def downgrade() -> None:
    op.drop_index("ix_entries_recording_failed", "entries", schema="calllog")
