"""The dispatcher's tables, in schema ``dispatcher`` (migrated by ``dispatcher migrate``).

``rooms``: one row per call the dispatcher places, keyed by the call id, from the token (state
``admitted``) or the caller's arrival (``waiting``) to its end. The row decides: a duplicate or
reordered webhook finds it and changes nothing, and an offer is taken by the update that finds the
count of offers (``cardinality(tried)``) it read.

==========  ====================================================================================
state       meaning
==========  ====================================================================================
admitted    a visitor's token was minted; counted against the org's quota until ``admitted_until``
waiting     kept in offers: not offered yet, or offered to ``worker`` and not opened
overflow    given to ``<fleet>/overflow`` (``outcome`` says why); no more offers
opened      a worker opened the call or its agent joined: holds a seat on ``worker``
ended       the room ended, the caller hung up before an open, the call ended, or its ring was
            refused before any offer (``outcome`` ``unknown_agent``)
==========  ====================================================================================

``job`` and ``written`` are the seam of a worker that dies (issue 8): such a room is offered again
as ``JobOffer(job="sentence", written=…)``. ``journal``: every offer and where each room went.
``written``: the written calls admitted (issue 17; the chat service asks, ``POST
/v1/written-calls``): no room, no fleet, no seat, only a place in the org's count, from their
admission until ``call.ended`` (or ``admitted_until`` when ``call.opened`` never came).
``outbound``: the outbound calls placed (issue 18), one row per call, unique on the app's
request id in its org and environment, so a retried request finds its call and never dials twice.
``quotas``: an org's ``concurrent_calls`` per environment. ``phone_numbers``: an org's numbers
(issue 18), each with the LiveKit it was set up on and the trunk and rule made there (both null
while being made: a number is claimed first, then made on LiveKit). ``followups`` and
``followup_tries``: call backs to dial and each try, claimed by one replica; ``followup_notes``:
the entries each change of theirs owes the agent's log, made in the change's transaction and
sent until written (an outbox: a crash between the change and the log re-sends, never loses;
call-log writes each once by its key). ``refusals``: the token endpoint's
refusals and the rings refused at placing (intake health: they leave no call record).
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

from pinecall_servicekit import db

SCHEMA = "dispatcher"
METADATA = db.metadata(SCHEMA)
STATES = ("admitted", "waiting", "overflow", "opened", "ended")
LIVE = ("admitted", "waiting", "overflow", "opened")

ROOMS = sa.Table(
    "rooms",
    METADATA,
    sa.Column("call", sa.String(128), primary_key=True),
    sa.Column("environment", sa.String(32), nullable=False),
    sa.Column("fleet", sa.String(63), nullable=False),
    sa.Column("room", sa.String(256), nullable=False),
    sa.Column("room_sid", sa.String(64), nullable=True),
    # the ring's dispatch id: the pending dispatch to the fleet's plain name
    sa.Column("ring", sa.String(64), nullable=True),
    sa.Column("agent", sa.String(128), nullable=False),
    sa.Column("org", sa.String(128), nullable=False, server_default=""),
    sa.Column("caller", sa.String(16), nullable=False),
    sa.Column("caller_identity", sa.String(256), nullable=True),
    sa.Column("number", sa.String(32), nullable=True),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("job", sa.String(16), nullable=False, server_default="answer"),
    sa.Column("written", sa.Integer, nullable=True),
    sa.Column("tried", ARRAY(sa.String(320)), nullable=False, server_default="{}"),
    sa.Column("worker", sa.String(320), nullable=True),
    sa.Column("dispatch", sa.String(64), nullable=True),
    sa.Column("waited", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("outcome", sa.String(32), nullable=True),
    sa.Column("context", JSONB, nullable=False, server_default="{}"),
    sa.Column("config", JSONB, nullable=False, server_default="{}"),
    # an outbound call's: the LiveKit SIP outbound trunk its job dials through (issue 18)
    sa.Column("sip_trunk", sa.String(64), nullable=True),
    sa.Column("admitted_until", db.UTC_TIMESTAMP, nullable=True),
    sa.Column("arrived_at", db.UTC_TIMESTAMP, nullable=True),
    sa.Column("offered_at", db.UTC_TIMESTAMP, nullable=True),
    sa.Column("opened_at", db.UTC_TIMESTAMP, nullable=True),
    sa.Column("ended_at", db.UTC_TIMESTAMP, nullable=True),
    sa.Column("created_at", db.UTC_TIMESTAMP, nullable=False, server_default=sa.func.now()),
    sa.CheckConstraint(f"state IN {STATES!r}", name="state"),
)

JOURNAL = sa.Table(
    "journal",
    METADATA,
    sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
    sa.Column("call", sa.String(128), nullable=False),
    sa.Column("room", sa.String(256), nullable=False),
    sa.Column("fleet", sa.String(63), nullable=False),
    sa.Column("at", db.UTC_TIMESTAMP, nullable=False),
    sa.Column("line", sa.Text, nullable=False),
)

WRITTEN = sa.Table(
    "written",
    METADATA,
    sa.Column("call", sa.String(128), primary_key=True),
    sa.Column("environment", sa.String(32), nullable=False),
    sa.Column("org", sa.String(128), nullable=False),
    sa.Column("agent", sa.String(128), nullable=False),
    sa.Column("channel", sa.String(16), nullable=False),
    sa.Column("admitted_at", db.UTC_TIMESTAMP, nullable=False),
    sa.Column("admitted_until", db.UTC_TIMESTAMP, nullable=False),
    sa.Column("opened_at", db.UTC_TIMESTAMP, nullable=True),
    sa.Column("ended_at", db.UTC_TIMESTAMP, nullable=True),
    sa.Column("outcome", sa.String(32), nullable=True),
)

OUTBOUND = sa.Table(
    "outbound",
    METADATA,
    sa.Column("call", sa.String(128), primary_key=True),
    sa.Column("environment", sa.String(32), nullable=False),
    sa.Column("org", sa.String(128), nullable=False),
    # the app-minted id of the request; NULL: none named (every request a new call)
    sa.Column("request", sa.String(64), nullable=True),
    sa.Column("agent", sa.String(128), nullable=False),
    sa.Column("number", sa.String(32), nullable=False),
    sa.Column("context", JSONB, nullable=False, server_default="{}"),
    sa.Column("fleet", sa.String(63), nullable=False),
    sa.Column("room", sa.String(256), nullable=False),
    sa.Column("sip_trunk", sa.String(64), nullable=False),
    sa.Column("placed_at", db.UTC_TIMESTAMP, nullable=False),
    sa.UniqueConstraint("environment", "org", "request", name="uq_outbound_request"),
)

QUOTAS = sa.Table(
    "quotas",
    METADATA,
    sa.Column("org", sa.String(128), primary_key=True),
    sa.Column("environment", sa.String(32), primary_key=True),
    sa.Column("concurrent_calls", sa.Integer, nullable=False),
    sa.Column("updated_at", db.UTC_TIMESTAMP, nullable=False, server_default=sa.func.now()),
    sa.CheckConstraint("concurrent_calls >= 0", name="concurrent_calls"),
)

REFUSALS = sa.Table(
    "refusals",
    METADATA,
    sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
    sa.Column("at", db.UTC_TIMESTAMP, nullable=False),
    sa.Column("environment", sa.String(32), nullable=False),
    sa.Column("fleet", sa.String(63), nullable=False),
    sa.Column("agent", sa.String(128), nullable=False),
    sa.Column("org", sa.String(128), nullable=False),
    sa.Column("reason", sa.String(32), nullable=False),
)

PHONE_NUMBERS = sa.Table(
    "phone_numbers",
    METADATA,
    sa.Column("number", sa.String(16), primary_key=True),
    sa.Column("org", sa.String(128), nullable=False),
    sa.Column("environment", sa.String(32), nullable=False),
    sa.Column("agent", sa.String(128), nullable=False),
    sa.Column("fleet", sa.String(63), nullable=False),
    sa.Column("livekit_url", sa.String(512), nullable=False),
    sa.Column("trunk_id", sa.String(64), nullable=True),
    sa.Column("rule_id", sa.String(64), nullable=True),
    sa.Column("created_at", db.UTC_TIMESTAMP, nullable=False, server_default=sa.func.now()),
    sa.Index("ix_phone_numbers_org", "org", "environment"),
)

FOLLOWUP_STATES = ("waiting", "dialling", "answered", "given_up")

FOLLOWUPS = sa.Table(
    "followups",
    METADATA,
    sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
    sa.Column("callback_id", sa.BigInteger, nullable=False),
    sa.Column("environment", sa.String(32), nullable=False),
    sa.Column("agent", sa.String(128), nullable=False),
    sa.Column("org", sa.String(128), nullable=False, server_default=""),
    sa.Column("number", sa.String(32), nullable=True),
    sa.Column("call", sa.String(128), nullable=True),
    sa.Column("reason", sa.Text, nullable=False, server_default=""),
    sa.Column("callback_seq", sa.BigInteger, nullable=False),
    sa.Column("requested_at", db.UTC_TIMESTAMP, nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("tries", sa.Integer, nullable=False, server_default="0"),
    sa.Column("burnt", sa.Integer, nullable=False, server_default="0"),
    sa.Column("due_at", db.UTC_TIMESTAMP, nullable=False),
    sa.Column("given_up", sa.String(32), nullable=True),
    sa.Column("updated_at", db.UTC_TIMESTAMP, nullable=False),
    sa.CheckConstraint(f"state IN {FOLLOWUP_STATES!r}", name="followup_state"),
    sa.Index("uq_followups_callback", "callback_id", unique=True),
    sa.Index(
        "ix_followups_due",
        "environment",
        "due_at",
        postgresql_where=sa.text("state = 'waiting'"),
    ),
)

FOLLOWUP_TRIES = sa.Table(
    "followup_tries",
    METADATA,
    sa.Column("followup", sa.BigInteger, primary_key=True),
    sa.Column("attempt", sa.Integer, primary_key=True),
    sa.Column("environment", sa.String(32), nullable=False),
    sa.Column("claimed_at", db.UTC_TIMESTAMP, nullable=False),
    sa.Column("claimed_by", sa.String(128), nullable=False),
    sa.Column("call", sa.String(128), nullable=True),
    sa.Column("dialled_at", db.UTC_TIMESTAMP, nullable=True),
    sa.Column("outcome", sa.String(32), nullable=True),
    sa.Column("status", sa.String(64), nullable=True),
    sa.Column("ended_at", db.UTC_TIMESTAMP, nullable=True),
    sa.Index("ix_followup_tries_call", "call"),
    sa.Index("ix_followup_tries_ended", "ended_at"),
)

FOLLOWUP_NOTES = sa.Table(
    "followup_notes",
    METADATA,
    sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
    sa.Column("environment", sa.String(32), nullable=False),
    sa.Column("agent", sa.String(128), nullable=False),
    sa.Column("kind", sa.String(64), nullable=False),
    sa.Column("data", JSONB, nullable=False),
    sa.Column("made_at", db.UTC_TIMESTAMP, nullable=False),
    sa.Column("written_at", db.UTC_TIMESTAMP, nullable=True),
    sa.Index("ix_followup_notes_owed", "id", postgresql_where=sa.text("written_at IS NULL")),
)
