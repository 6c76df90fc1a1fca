"""The chat service on real Postgres and NATS, with a call-log replica of its test kit."""

from __future__ import annotations
