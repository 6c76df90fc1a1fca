"""The overflow: a livekit-agents ``AgentServer`` registered as ``<fleet>/overflow``.

Seed 000, "Full, at the endpoint": when no worker of a fleet has a seat, or a room ran out of
offers, the dispatcher offers the room to ``<fleet>/overflow`` (and nobody else does: no SIP rule
or token names it). It says one sentence (``PINECALL_OVERFLOW_SAYS``), puts the caller's number
on the agent's log as ``callback.requested``, ends the call ``overflow`` and hangs up. No ears, no
model. It also takes a dead worker's room when its fleet is full (seed 000, "A worker that dies"):
the sentence job of :mod:`pinecall_jobs`.

Layers: ``settings`` ← ``job`` (the entrypoint of one job: the two kinds of offer) ← ``health``
(the health port) ← ``server`` (the AgentServer, its load, drain) ← ``main`` (``overflow start``).
"""
