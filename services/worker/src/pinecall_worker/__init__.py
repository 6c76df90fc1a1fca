"""The worker: a livekit-agents ``AgentServer`` that counts its seats, says how it is, drains.

Layers: ``domain`` (pure: LiveKit's line, the two loads, the minute) ← ``measures`` (the datagram
socket the job processes report on) and ``heartbeat`` (to the roster) ← ``server`` (one worker
process: the AgentServer, its name, signals, drain and cordon) ← ``main`` (``worker start``).
Source: seed 000, "Capacity is counted in calls", "The gateway hears every worker", "A worker that
is up but bad", "Deploys drain, cordons shrink".
"""
