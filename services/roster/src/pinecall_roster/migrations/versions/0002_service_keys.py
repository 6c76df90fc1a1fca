"""A fifth kind of key: ``service``, a service's own key for what it reads and posts of another
service (the fleets rows, call-log's ends), so no service borrows a person's operator key.

Expand only: the new check is wider than the one it replaces (it refuses less), so the previous
release runs beside it; a service key it meets is of a kind it does not know, and it refuses it
(403), as it refuses any key of the wrong kind.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

CHECK = "ck_keys_ck_keys_kind"
"""0001's check as the naming convention named it (``ck_<table>_<name>``)."""


def upgrade() -> None:
    op.drop_constraint(op.f(CHECK), "keys", type_="check", schema="roster")
    op.create_check_constraint(
        op.f(CHECK), "keys", "kind IN ('operator', 'fleet', 'app', 'service')", schema="roster"
    )


def downgrade() -> None:
    op.drop_constraint(op.f(CHECK), "keys", type_="check", schema="roster")
    op.create_check_constraint(
        op.f(CHECK), "keys", "kind IN ('operator', 'fleet', 'app')", schema="roster"
    )
