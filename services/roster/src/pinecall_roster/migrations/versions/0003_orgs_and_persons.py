"""Orgs and persons as rows (issue 21), and a key's optional person.

Expand only: two new tables and a nullable column. Every key made before has no person and acts
as its kind allows, as it did; the previous release reads ``roster.keys`` by its own columns and
never sees the new one.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "orgs",
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("environments", postgresql.ARRAY(sa.String(32)), nullable=False),
        sa.Column("quotas", postgresql.JSONB, nullable=False, server_default=sa.text("'{}'")),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_orgs"),
        schema="roster",
    )
    op.create_table(
        "persons",
        sa.Column("id", sa.String(12), nullable=False),
        sa.Column("org", sa.String(128), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("agents", postgresql.ARRAY(sa.String(128)), nullable=True),
        sa.Column("production", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("operator", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("disabled", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_persons"),
        sa.ForeignKeyConstraint(
            ["org"], ["roster.orgs.name"], name="fk_persons_org_orgs"
        ),
        sa.UniqueConstraint("org", "name", name="uq_persons_org_name"),
        sa.CheckConstraint(
            "role IN ('viewer', 'developer', 'admin', 'owner')", name="role"
        ),
        schema="roster",
    )
    op.add_column("keys", sa.Column("person", sa.String(12), nullable=True), schema="roster")
    op.create_foreign_key(
        "fk_keys_person_persons", "keys", "persons", ["person"], ["id"],
        source_schema="roster", referent_schema="roster",
    )
    op.create_index("ix_keys_person", "keys", ["person"], schema="roster")


def downgrade() -> None:
    op.drop_index("ix_keys_person", "keys", schema="roster")
    op.drop_constraint("fk_keys_person_persons", "keys", type_="foreignkey", schema="roster")
    op.drop_column("keys", "person", schema="roster")
    op.drop_table("persons", schema="roster")
    op.drop_table("orgs", schema="roster")
