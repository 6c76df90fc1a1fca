"""Pinecall Runtime's wire: every HTTP body and NATS message, and the NATS subjects.

Contracts only grow (``shared/CONVENTIONS.md`` habit 1): every type is a frozen, keyword-only
msgspec Struct with an explicit tag (``"fleet.worker_heartbeat.v1"``); a new field comes with a
default; a breaking change is a new ``.v2`` type. Golden JSON fixtures under ``tests/golden``
must keep decoding. This package imports nothing first-party.
"""
