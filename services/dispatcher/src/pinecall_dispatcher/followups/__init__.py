"""Follow-ups: every call back dialled (issue 18, "Call backs, dialled"; seed 003).

The rules are pure (:mod:`.rules`); the dialler (:mod:`.dialler`) takes call-log's call backs,
dials each follow-up due when its fleet has a seat free, and applies each try's outcome; the SQL
is :mod:`pinecall_dispatcher.store.followups`.
"""
