"""Platform plumbing shared by every Pinecall service.

settings (environment, read once) · errors (the one tree) · telemetry (OpenTelemetry and logs)
· bus (NATS: typed publish/subscribe/request, JetStream, KV, ops services) · db (SQLAlchemy 2 async
on psycopg 3, alembic) · http (the Litestar base: health, readiness, metrics, problem details,
OpenAPI) · keys (hashed keys, a 5 s cache, revocations said on NATS) · lifecycle (serving, SIGTERM
drains, exit codes) · platform (the running Postgres and NATS, or embedded ones) · testing (pytest
fixtures: a database and a NATS namespace per test).
"""
