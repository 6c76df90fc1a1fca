"""The call log's tables, in schema ``calllog`` (owned and migrated by this service only).

``calls`` is each call's head: what the call is (written once, at open) and where its log stands
(``written``: the writer's count; ``last_seq``: the last seq taken). Every write to a call's log
locks that row ``FOR UPDATE`` at READ COMMITTED, so the writes of one call go one at a time on any
replica; ``entries`` has ``PRIMARY KEY (call_id, seq)`` and ``UNIQUE (call_id, counted)``, so even
a bug in the head could not write a seq or a writer's place twice.

``app_holds`` says which app socket (replica, instance) holds which call; a call without a row
is parked. ``tool_holds`` says which draining socket still runs a tool call of a call it let go.

``agent_versions`` holds every version of every agent (an org's definition in an environment),
never updated: ``PRIMARY KEY (org, environment, name, version)``, so two writers can never store
the same version twice.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB

from pinecall_servicekit import db

SCHEMA = "calllog"
METADATA = db.metadata(SCHEMA)

CALLS = sa.Table(
    "calls",
    METADATA,
    sa.Column("call_id", sa.String(128), primary_key=True),
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
    sa.Column("cause", sa.String(32), nullable=True),
    sa.Column("channel", sa.String(16), nullable=True),
    sa.Column("opened_at", db.UTC_TIMESTAMP, nullable=False),
    sa.Column("ended_at", db.UTC_TIMESTAMP, nullable=True),
    sa.Column("sealed_at", db.UTC_TIMESTAMP, nullable=True),
    sa.Index(
        "ix_calls_unsealed",
        "environment",
        "call_id",
        postgresql_where=sa.text("sealed_at IS NULL"),
    ),
)

ENTRIES = sa.Table(
    "entries",
    METADATA,
    sa.Column("call_id", sa.String(128), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True),
    sa.Column("counted", sa.Integer, nullable=True),
    sa.Column("kind", sa.String(64), nullable=False),
    sa.Column("ts", db.UTC_TIMESTAMP, nullable=False),
    sa.Column("data", JSONB, nullable=False),
    sa.Column("digest", sa.LargeBinary(16), nullable=True),
    sa.UniqueConstraint("call_id", "counted", name="uq_entries_call_id_counted"),
    sa.Index(
        "ix_entries_recording_failed",
        "ts",
        postgresql_where=sa.text("kind = 'call.recording_failed'"),
    ),
)

TOOL_CALLS = sa.Table(
    "tool_calls",
    METADATA,
    sa.Column("call_id", sa.String(128), primary_key=True),
    sa.Column("tool_id", sa.String(128), primary_key=True),
    sa.Column("name", sa.String(128), nullable=False),
    sa.Column("arguments", JSONB, nullable=False),
    sa.Column("deadline", db.UTC_TIMESTAMP, nullable=False),
    sa.Column("call_seq", sa.Integer, nullable=False),
    sa.Column("result", JSONB, nullable=True),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("result_seq", sa.Integer, nullable=True),
)

AGENT_ENTRIES = sa.Table(
    "agent_entries",
    METADATA,
    sa.Column("seq", sa.BigInteger, sa.Identity(), primary_key=True),
    sa.Column("environment", sa.String(32), nullable=False),
    sa.Column("agent", sa.String(128), nullable=False),
    sa.Column("kind", sa.String(64), nullable=False),
    sa.Column("ts", db.UTC_TIMESTAMP, nullable=False),
    sa.Column("data", JSONB, nullable=False),
    sa.Column("key", sa.String(128), nullable=True),
    sa.Index("ix_agent_entries_agent", "environment", "agent", "seq"),
    sa.Index(
        "uq_agent_entries_key",
        "environment",
        "agent",
        "key",
        unique=True,
        postgresql_where=sa.text("key IS NOT NULL"),
    ),
    sa.Index(
        "uq_agent_entries_message",
        "environment",
        "agent",
        "kind",
        sa.text("(data ->> 'message')"),
        unique=True,
        postgresql_where=sa.text("kind IN ('message.waiting', 'message.taken', 'message.expired')"),
    ),
)

CALLBACKS = sa.Table(
    "callbacks",
    METADATA,
    sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
    sa.Column("environment", sa.String(32), nullable=False),
    sa.Column("agent", sa.String(128), nullable=False),
    sa.Column("call_id", sa.String(128), nullable=True),
    sa.Column("number", sa.String(24), nullable=True),
    sa.Column("contact", sa.Text, nullable=True),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("agent_seq", sa.BigInteger, nullable=False),
    sa.Column("requested_at", db.UTC_TIMESTAMP, nullable=False),
    sa.Index(
        "uq_callbacks_environment_call_id",
        "environment",
        "call_id",
        unique=True,
        postgresql_where=sa.text("call_id IS NOT NULL"),
    ),
)

AGENT_VERSIONS = sa.Table(
    "agent_versions",
    METADATA,
    sa.Column("org", sa.String(128), primary_key=True),
    sa.Column("environment", sa.String(32), primary_key=True),
    sa.Column("name", sa.String(128), primary_key=True),
    sa.Column("version", sa.Integer, primary_key=True),
    sa.Column("definition", JSONB, nullable=False),
    sa.Column("prompt_hash", sa.String(64), nullable=False),
    sa.Column("created_at", db.UTC_TIMESTAMP, nullable=False),
    sa.CheckConstraint("version >= 1", name="version_positive"),
)

APP_HOLDS = sa.Table(
    "app_holds",
    METADATA,
    sa.Column("call_id", sa.String(128), primary_key=True),
    sa.Column("environment", sa.String(32), nullable=False),
    sa.Column("org", sa.String(128), nullable=False),
    sa.Column("agent", sa.String(128), nullable=False),
    sa.Column("replica", sa.String(256), nullable=False),
    sa.Column("instance", sa.String(128), nullable=False),
    sa.Column("since", db.UTC_TIMESTAMP, nullable=False),
    sa.Index("ix_app_holds_replica", "replica"),
)
"""A call held by an app socket: the replica and instance holding it. No row: the call is
parked. ``PRIMARY KEY (call_id)``: one holder at a time, whichever replica claims first."""

TOOL_HOLDS = sa.Table(
    "tool_holds",
    METADATA,
    sa.Column("call_id", sa.String(128), primary_key=True),
    sa.Column("tool_id", sa.String(128), primary_key=True),
    sa.Column("replica", sa.String(256), nullable=False),
    sa.Column("instance", sa.String(128), nullable=False),
    sa.Column("since", db.UTC_TIMESTAMP, nullable=False),
    sa.Index("ix_tool_holds_replica", "replica"),
)
"""A tool call a socket that drained the call still runs (acceptance 3): the call's next holder
is not sent it while the row is there. It goes when that socket closes or its replica is taken
for dead, and the tool call is then sent to whichever socket holds the call."""

WHATSAPP_NUMBERS = sa.Table(
    "whatsapp_numbers",
    METADATA,
    sa.Column("phone_number_id", sa.String(32), primary_key=True),
    sa.Column("org", sa.String(128), nullable=False),
    sa.Column("environment", sa.String(32), nullable=False),
    sa.Column("agent", sa.String(128), nullable=False),
    sa.Column("display_phone_number", sa.String(20), nullable=False),
    sa.Column("verify_token_sha256", sa.String(64), nullable=False),
    sa.Column("app_secret", sa.Text, nullable=False),
    sa.Column("access_token", sa.Text, nullable=False),
    sa.Column("updated_at", db.UTC_TIMESTAMP, nullable=False),
    sa.Index("ix_whatsapp_numbers_org", "org", "environment"),
    sa.Index("ix_whatsapp_numbers_verify_token", "verify_token_sha256"),
)
"""A WhatsApp business number, one org's in one environment, tied to one of its agents (issue
17). ``PRIMARY KEY (phone_number_id)``: a number is one org's; the verify token is its SHA-256."""
