"""Alembic's entry for the roster's schema; the shared body is in servicekit."""

from pinecall_roster.store import METADATA
from pinecall_servicekit.db import run_migration_env

run_migration_env(METADATA)
