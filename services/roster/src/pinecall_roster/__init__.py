"""The roster: hears every worker of every fleet (seed 000, "The gateway hears every worker").

Owns worker heartbeats and the roster of every fleet (in memory on every replica, fed over NATS),
cordons (JetStream KV, newest revision wins), failing, ``GET /v1/ops/fleet``,
``POST /v1/ops/fleet/{worker}/cordon``, ``GET /v1/fleet/wanted`` (KEDA), the fleets rows and the
keys table, and the workers' metrics.

Layers: ``domain`` (pure rules) ← ``roster`` and ``cordons`` (state) ← ``service`` (one replica's
wiring) ← ``api`` (HTTP), ``ops`` (NATS), ``metrics``; ``store`` is the only module that speaks SQL.
"""
