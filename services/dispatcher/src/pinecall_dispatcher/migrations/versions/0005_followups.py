"""Follow-ups (issue 18, "Call backs, dialled"): every call back dialled, each try once.

``followups``: one row per call-log call back (``callback_id`` unique), ``waiting`` until
``due_at``, ``dialling`` while a try is out, then ``answered`` or ``given_up``. ``followup_tries``:
one row per try, keyed ``(followup, attempt)``: the row is the try's claim, so two replicas never
dial one try.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "followups",
        sa.Column("id", sa.BigInteger, sa.Identity(), nullable=False),
        sa.Column("callback_id", sa.BigInteger, nullable=False),
        sa.Column("environment", sa.String(32), nullable=False),
        sa.Column("agent", sa.String(128), nullable=False),
        sa.Column("org", sa.String(128), nullable=False, server_default=""),
        sa.Column("number", sa.String(32), nullable=True),
        sa.Column("call", sa.String(128), nullable=True),
        sa.Column("reason", sa.Text, nullable=False, server_default=""),
        sa.Column("callback_seq", sa.BigInteger, nullable=False),
        sa.Column("requested_at", TS, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("tries", sa.Integer, nullable=False, server_default="0"),
        sa.Column("burnt", sa.Integer, nullable=False, server_default="0"),
        sa.Column("due_at", TS, nullable=False),
        sa.Column("given_up", sa.String(32), nullable=True),
        sa.Column("updated_at", TS, nullable=False),
        sa.CheckConstraint(
            "state IN ('waiting', 'dialling', 'answered', 'given_up')",
            name="ck_followups_followup_state",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_followups"),
        schema="dispatcher",
    )
    op.create_index(
        "uq_followups_callback", "followups", ["callback_id"], unique=True, schema="dispatcher"
    )
    op.create_index(
        "ix_followups_due", "followups", ["environment", "due_at"], schema="dispatcher",
        postgresql_where=sa.text("state = 'waiting'"),
    )  # fmt: skip
    op.create_table(
        "followup_tries",
        sa.Column("followup", sa.BigInteger, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("environment", sa.String(32), nullable=False),
        sa.Column("claimed_at", TS, nullable=False),
        sa.Column("claimed_by", sa.String(128), nullable=False),
        sa.Column("call", sa.String(128), nullable=True),
        sa.Column("dialled_at", TS, nullable=True),
        sa.Column("outcome", sa.String(32), nullable=True),
        sa.Column("status", sa.String(64), nullable=True),
        sa.Column("ended_at", TS, nullable=True),
        sa.PrimaryKeyConstraint("followup", "attempt", name="pk_followup_tries"),
        schema="dispatcher",
    )
    op.create_index("ix_followup_tries_call", "followup_tries", ["call"], schema="dispatcher")
    op.create_index(
        "ix_followup_tries_ended", "followup_tries", ["ended_at"], schema="dispatcher"
    )


def downgrade() -> None:
    op.drop_table("followup_tries", schema="dispatcher")
    op.drop_table("followups", schema="dispatcher")
