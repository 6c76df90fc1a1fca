"""Alembic's entry for the dispatcher's schema; the shared body is in servicekit."""

from pinecall_dispatcher.store.tables import METADATA
from pinecall_servicekit.db import run_migration_env

run_migration_env(METADATA)
