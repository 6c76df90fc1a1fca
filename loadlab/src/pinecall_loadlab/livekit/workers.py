"""The registry of connected workers, as LiveKit's `AgentHandler` keeps it.

A worker is stored under ``(agent_name, namespace, job_type, deployment)``
(`LK:pkg/service/agentservice.go:L162-167`); its status and load are only what its last
`UpdateWorkerStatus` said: status replaced only when present (starting `WS_AVAILABLE`), load always
replaced (`LK:pkg/agent/worker.go:L580-591`). It is removed only when its socket read fails.
Stand-in faults live on the record: ``frozen`` (a ghost) and ``answer_delay_s`` (a slow worker);
faults of a worker's link to LiveKit (a cut kept down, a hung server side) outlive its socket and
are kept by agent name (:class:`LinkFault`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Literal

from livekit.protocol import agent, models

from . import ids

WorkerKey = tuple[str, str, int, str]
"""``(agent_name, namespace, job_type, deployment)``."""


@dataclass(eq=False, kw_only=True)
class WorkerRecord:
    """One registered worker socket. Identity is by object, like LiveKit's ``*agent.Worker``."""

    id: str
    agent_name: str
    namespace: str
    job_type: int
    deployment: str
    version: str
    api_key: str
    """The key the worker authenticated with; its agent tokens are signed with it."""
    permissions: models.ParticipantPermission
    status: int = agent.WorkerStatus.WS_AVAILABLE
    load: float = 0.0
    job_count: int = 0
    outbox: asyncio.Queue[agent.ServerMessage] = field(default_factory=asyncio.Queue)
    pending: dict[str, asyncio.Future[agent.AvailabilityResponse]] = field(default_factory=dict)
    running: dict[str, agent.Job] = field(default_factory=dict)
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    frozen: bool = False
    """A ghost: nothing is delivered either way, the socket stays open and the worker listed."""
    held: list[agent.ServerMessage] = field(default_factory=list)
    """Frames sent while frozen, delivered on thaw (like a stopped process's socket buffer)."""
    answer_delay_s: float = 0.0
    """A slow worker: each availability answer is handled this many seconds late."""

    @property
    def key(self) -> WorkerKey:
        return (self.agent_name, self.namespace, self.job_type, self.deployment)

    def send(self, msg: agent.ServerMessage) -> None:
        """Queue a frame for the socket; held while frozen; `ConnectionError` once closed."""
        if self.closed.is_set():
            raise ConnectionError("worker closed")
        if self.frozen:
            self.held.append(msg)
        else:
            self.outbox.put_nowait(msg)

    def thaw(self) -> None:
        """End a freeze: deliver what was held, in order."""
        self.frozen = False
        for msg in self.held:
            self.outbox.put_nowait(msg)
        self.held.clear()


LinkFaultKind = Literal["cut", "hang"]
"""``cut``: the worker's socket is dropped and its reconnects refused; ``hang``: LiveKit's side of
its socket reads nothing and sends nothing, the TCP connection kept open (a hung server)."""


@dataclass(eq=False, kw_only=True)
class LinkFault:
    """A fault of one agent name's link to the stand-in, until ``lifted`` is set."""

    agent_name: str
    kind: LinkFaultKind
    lifted: asyncio.Event = field(default_factory=asyncio.Event)
    timer: asyncio.TimerHandle | None = None
    """The lift at the end of the fault's seconds."""


class WorkerRegistry:
    """Workers by id and by key, in registration order."""

    def __init__(self) -> None:
        self._by_id: dict[str, WorkerRecord] = {}

    def add(self, worker: WorkerRecord) -> None:
        self._by_id[worker.id] = worker

    def remove(self, worker: WorkerRecord) -> None:
        self._by_id.pop(worker.id, None)

    def get(self, worker_id: str) -> WorkerRecord | None:
        return self._by_id.get(worker_id)

    def all(self) -> list[WorkerRecord]:
        return list(self._by_id.values())

    def for_key(self, key: WorkerKey) -> list[WorkerRecord]:
        return [w for w in self._by_id.values() if w.key == key]

    def agent_names(self, job_type: int) -> set[str]:
        """Registered agent names of `job_type`: LiveKit's `CheckEnabled` answer."""
        return {w.agent_name for w in self._by_id.values() if w.job_type == job_type}

    @staticmethod
    def new_id() -> str:
        return ids.new_id(ids.WORKER)
