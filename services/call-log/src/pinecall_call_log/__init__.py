"""The call log: the only writer of calls, their entries, the agent log, tool calls and callbacks
(seed 002, whole; seed 000, "Full, at the endpoint", "A worker that dies").

Any replica answers any request of any call: what a call is (agent, environment, room, worker,
context, config) is written when it opens, read once by a replica that needs it and kept in
memory after; where a call's log stands is read under its head's lock at every write.

Layers: ``domain`` (pure rules) ← ``store`` (the only SQL) ← ``service`` (one replica: cache,
NATS, tool round trips) ← ``api`` (HTTP), ``ops`` (NATS ops verbs), ``metrics``.
"""
