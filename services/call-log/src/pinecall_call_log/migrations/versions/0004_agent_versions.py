"""An org's agents, versioned (issue 16, "Agents, as data"): one row per version of each agent
of an org in an environment, never updated; the latest is the highest version.

Expand only: a new table, nothing of the previous release's changed, so it runs beside it.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "agent_versions",
        sa.Column("org", sa.String(128), nullable=False),
        sa.Column("environment", sa.String(32), nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("definition", JSONB, nullable=False),
        sa.Column("prompt_hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint(
            "org", "environment", "name", "version", name="pk_agent_versions"
        ),
        sa.CheckConstraint("version >= 1", name="ck_agent_versions_version_positive"),
        schema="calllog",
    )


def downgrade() -> None:
    op.drop_table("agent_versions", schema="calllog")
