"""WhatsApp numbers (issue 17, "WhatsApp"): a business number (Meta's phone_number_id) tied to
an org's agent in one environment, with the secrets its webhooks and replies need. The verify
token is kept as its SHA-256 (hex) only, indexed: Meta's handshake names no number, so the
token is found by its hash.

And a WhatsApp message's entries on an agent's log (``message.waiting``, ``message.taken``,
``message.expired``) once per message and kind: a unique index on ``data ->> 'message'`` (its
wamid), partial on those kinds, so a delivery Meta retries for days, or two chat replicas taking
one message, write it once (``shared/reference/app-socket.md`` §2: "make wamid the idempotency
key of message.waiting").

Expand only: a new table, nothing of the previous release's changed, so it runs beside it.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "whatsapp_numbers",
        sa.Column("phone_number_id", sa.String(32), nullable=False),
        sa.Column("org", sa.String(128), nullable=False),
        sa.Column("environment", sa.String(32), nullable=False),
        sa.Column("agent", sa.String(128), nullable=False),
        sa.Column("display_phone_number", sa.String(20), nullable=False),
        sa.Column("verify_token_sha256", sa.String(64), nullable=False),
        sa.Column("app_secret", sa.Text, nullable=False),
        sa.Column("access_token", sa.Text, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("phone_number_id", name="pk_whatsapp_numbers"),
        schema="calllog",
    )
    op.create_index(
        "ix_whatsapp_numbers_org", "whatsapp_numbers", ["org", "environment"], schema="calllog"
    )
    op.create_index(
        "ix_whatsapp_numbers_verify_token",
        "whatsapp_numbers",
        ["verify_token_sha256"],
        schema="calllog",
    )
    op.create_index(
        "uq_agent_entries_message",
        "agent_entries",
        ["environment", "agent", "kind", sa.text("(data ->> 'message')")],
        unique=True,
        schema="calllog",
        postgresql_where=sa.text(
            "kind IN ('message.waiting', 'message.taken', 'message.expired')"
        ),
    )


def downgrade() -> None:
    op.drop_index("uq_agent_entries_message", "agent_entries", schema="calllog")
    op.drop_table("whatsapp_numbers", schema="calllog")
