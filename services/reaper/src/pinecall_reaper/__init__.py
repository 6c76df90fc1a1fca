"""The reaper: every minute, ends what the webhooks missed (seed 002, "A call nobody is
running"; seed 003, the 30-minute ceiling; issue 8, "The reaper").

Layers: ``domain`` (pure rules: which call is reaped and why, which room is unclaimed, the
written calls' rule) ← ``calls`` (call-log's REST: the unsealed calls, end, seal) and ``livekit``
(RoomService through :mod:`pinecall_clients.livekit`: rooms, agents, DeleteRoom) ← ``reaper``
(the reap and its loop) ← ``metrics``, ``app`` (``/healthz``, ``/readyz``, ``/metrics``; the
loop in the lifespan) ← ``main`` (``reaper serve``). It owns no table: calls are call-log's, rooms LiveKit's.
"""
