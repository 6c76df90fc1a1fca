"""pytest fixtures that give each test real Postgres and NATS, isolated from every other test.

Loaded by the ``pytest11`` entry point ``pinecall``; see :mod:`.plugin`.
"""
