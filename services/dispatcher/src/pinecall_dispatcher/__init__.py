"""The dispatcher: the runtime chooses who answers every call (seed 000, "Who takes a call",
"Full, at the endpoint"; seed 003; issue 7).

Owns the offers of rooms to workers (Postgres, schema ``dispatcher``): it reads LiveKit's events
from the LiveKit stream with a durable consumer, keeps each room with a ring nobody took in
offers, offers it at once to the worker heard lately with the most seats free, re-offers at 12 s,
overflows after three offers or when no worker has a seat, and sweeps every 3 s; admission at the
token endpoint (503 ``not_ready`` / ``fleet_full``, the orgs' ``concurrent_calls`` quotas); the
offers' journal.

Layers: ``domain`` (pure rules) ← ``store`` (the only SQL) and ``livekit``/``roster`` (the wire
to LiveKit and the roster) ← ``offering`` ← ``placing``, ``admission`` ← ``service`` (one
replica's wiring) ← ``api`` (HTTP), ``ops`` (NATS), ``metrics``.
"""
