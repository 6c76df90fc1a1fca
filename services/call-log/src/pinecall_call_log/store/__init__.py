"""The call log's Postgres: tables (:mod:`.tables`), calls and entries (:mod:`.calls`, their
head's SQL :mod:`.head` and :mod:`.lifecycle`), tool calls (:mod:`.tools`), the agent log and
callbacks (:mod:`.agents`), the calls not sealed yet (:mod:`.unsealed`), the agents' definitions
and their versions (:mod:`.definitions`), what an app socket is handed and the app's
commands (:mod:`.held`), WhatsApp numbers (:mod:`.numbers`), call backs read for the
dispatcher's follow-ups (:mod:`.callbacks`), the recordings that failed lately (:mod:`.failed`).
The only package of the service that speaks SQL; driver errors leave it as ``StoreUnavailable``.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine

from pinecall_call_log.store.agents import AgentStore
from pinecall_call_log.store.callbacks import CallbackStore
from pinecall_call_log.store.calls import CallStore
from pinecall_call_log.store.definitions import DefinitionStore
from pinecall_call_log.store.failed import FailedRecordings
from pinecall_call_log.store.held import HeldStore, WaitingTool
from pinecall_call_log.store.numbers import NumberStore
from pinecall_call_log.store.tables import SCHEMA
from pinecall_call_log.store.tools import ToolState, ToolStore
from pinecall_call_log.store.unsealed import UnsealedCalls
from pinecall_servicekit.migrations import Migrations

__all__ = [
    "AgentStore",
    "CallStore",
    "CallbackStore",
    "DefinitionStore",
    "FailedRecordings",
    "HeldStore",
    "NumberStore",
    "Store",
    "ToolState",
    "ToolStore",
    "UnsealedCalls",
    "WaitingTool",
    "migrate",
]


migrate = Migrations(Path(__file__).parent.parent / "migrations", SCHEMA)
"""The call log's migrations: ``migrate(url)`` runs them; the ``pinecall_runtime.migrations`` entry
point, which ``doctor`` also asks where a database stands."""


class Store:
    """The stores on one engine."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.calls = CallStore(engine)
        self.agents = AgentStore(engine)
        self.tools = ToolStore(engine)
        self.unsealed = UnsealedCalls(engine)
        self.definitions = DefinitionStore(engine)
        self.held = HeldStore(engine)
        self.numbers = NumberStore(engine)
        self.callbacks = CallbackStore(engine)
        self.failed_recordings = FailedRecordings(engine)
