"""Alembic's entry for the call log's schema; the shared body is in servicekit."""

from pinecall_call_log.store.tables import METADATA
from pinecall_servicekit.db import run_migration_env

run_migration_env(METADATA)
