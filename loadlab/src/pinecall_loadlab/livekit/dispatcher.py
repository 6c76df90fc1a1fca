"""LiveKit's agent dispatcher: from a dispatch to a job on one worker, or to nothing.

`request_job` is psrpc's `JobRequest` as one node serves it (`LK:pkg/agent/client.go:L132-190`,
`LK:pkg/service/agentservice.go:L396-465`, `LK:pkg/agent/worker.go:L333-436`):

1. an agent name no worker of the type holds → no job, ever (the dispatch stays pending);
2. the node gate (`policy.node_affinity`) ≤ 0 → "no servers available", no offer;
3. draw one untried available worker by ``1 − load``; offer; wait for its answer, the per-offer
   `AssignJobTimeout` or the request's deadline, whichever is first;
4. decline or closed socket → next worker; terminate → job ends JS_SUCCESS, no agent; accept →
   agent token, `JobAssignment` (no url), job running; timeout → no retry, no job.

Load is never adjusted on assignment; several jobs may be offered to one worker at once.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time

from livekit.protocol import agent, agent_dispatch, models

from . import events as ev
from . import ids
from .config import StandInConfig
from .policy import node_affinity, select_worker
from .tokens import KeyRing
from .workers import WorkerRecord, WorkerRegistry

log = logging.getLogger(__name__)

AGENT_LEFT_ROOM = "agent worker left the room"
_ENDED = (agent.JobStatus.JS_SUCCESS, agent.JobStatus.JS_FAILED)


class Dispatcher:
    """Offers jobs to registered workers and keeps the jobs' server-side state."""

    def __init__(self, config: StandInConfig, keys: KeyRing, log_: ev.EventLog) -> None:
        self.config = config
        self.keys = keys
        self.events = log_
        self.registry = WorkerRegistry()
        self.rng = random.Random(config.seed)
        self._job_worker: dict[str, WorkerRecord] = {}
        self.jobs: dict[str, agent.Job] = {}
        """Every job a worker took (or answered terminate for), by id, with its live state."""

    # -- worker socket callbacks -------------------------------------------------------------

    def worker_registered(self, worker: WorkerRecord) -> None:
        self.registry.add(worker)
        self.events.append(ev.WorkerRegistered(worker_id=worker.id, agent_name=worker.agent_name))

    def worker_closed(self, worker: WorkerRecord) -> None:
        """The socket's read failed: deregister and fail its outstanding offers (retryable)."""
        worker.closed.set()
        for fut in worker.pending.values():
            if not fut.done():
                fut.set_exception(ConnectionError("worker closed"))
        self.registry.remove(worker)
        for job_id in list(worker.running):
            self._job_worker.pop(job_id, None)
        self.events.append(ev.WorkerDeregistered(worker_id=worker.id, agent_name=worker.agent_name))

    def handle_update_worker(self, worker: WorkerRecord, update: agent.UpdateWorkerStatus) -> None:
        """Status only when present; load always, missing = 0 (`LK:pkg/agent/worker.go:L580`)."""
        if update.HasField("status"):
            worker.status = update.status
        worker.load = update.load
        worker.job_count = update.job_count
        self.events.append(
            ev.WorkerStatusReported(
                worker_id=worker.id,
                status=worker.status,
                load=worker.load,
                job_count=worker.job_count,
            )
        )

    def handle_availability(self, worker: WorkerRecord, resp: agent.AvailabilityResponse) -> None:
        """Route an answer to its offer; answers for unknown jobs are logged and ignored."""
        fut = worker.pending.get(resp.job_id)
        if fut is None or fut.done():
            log.warning("received availability response for unknown job %s", resp.job_id)
            return
        fut.set_result(resp)

    def handle_update_job(self, worker: WorkerRecord, update: agent.UpdateJobStatus) -> None:
        """Record a job's status; an ended job leaves its worker (`LK:pkg/agent/worker.go:L525`)."""
        job = worker.running.get(update.job_id)
        if job is None:
            log.debug("received job update for unknown job %s", update.job_id)
            return
        self._set_status(worker, job, update.status, update.error)

    # -- the JobRequest ------------------------------------------------------------------------

    async def request_job(
        self, room: models.Room, dispatch: agent_dispatch.AgentDispatch
    ) -> agent.Job | None:
        """Run one JT_ROOM JobRequest for `dispatch` in `room`; the job if a worker took it (or
        answered terminate), else None. Never raises for a lost job: outcomes go to the log."""
        job = agent.Job(
            id=ids.new_id(ids.JOB),
            dispatch_id=dispatch.id,
            type=agent.JobType.JT_ROOM,
            agent_name=dispatch.agent_name,
            metadata=dispatch.metadata,
            deployment=dispatch.deployment,
        )
        job.room.CopyFrom(room)
        job.attributes.update(dispatch.attributes)

        def ended(outcome: str, worker_id: str = "") -> None:
            self.events.append(
                ev.JobRequestEnded(
                    job_id=job.id,
                    room=room.name,
                    dispatch_id=dispatch.id,
                    agent_name=dispatch.agent_name,
                    outcome=outcome,
                    worker_id=worker_id,
                )
            )

        if dispatch.agent_name not in self.registry.agent_names(agent.JobType.JT_ROOM):
            log.info("not dispatching agent job since no worker is available (%s)", room.name)
            ended("no_worker")
            return None
        key = (dispatch.agent_name, "", agent.JobType.JT_ROOM, dispatch.deployment)
        if (
            node_affinity(self.registry.for_key(key), self.config.affinity, self.config.target_load)
            <= 0
        ):
            ended("no_servers")
            return None
        deadline = asyncio.get_running_loop().time() + self.config.offer_deadline_s
        attempted: set[WorkerRecord] = set()
        while True:
            worker = select_worker(self.registry.for_key(key), attempted, self.rng)
            if worker is None:
                ended("exhausted")
                return None
            attempted.add(worker)
            answer = await self._assign(worker, job, deadline)
            if answer in ("accepted", "terminated"):
                self.jobs[job.id] = job
                ended("assigned" if answer == "accepted" else "terminated", worker.id)
                return job
            if answer not in ("declined", "worker_closed"):
                ended(answer, worker.id)
                return None

    async def _assign(self, worker: WorkerRecord, job: agent.Job, deadline: float) -> str:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[agent.AvailabilityResponse] = loop.create_future()
        worker.pending[job.id] = fut
        now = time.time_ns()
        job.state.CopyFrom(
            agent.JobState(
                status=agent.JobStatus.JS_RUNNING,
                worker_id=worker.id,
                started_at=now,
                updated_at=now,
            )
        )
        try:
            worker.send(agent.ServerMessage(availability=agent.AvailabilityRequest(job=job)))
            self.events.append(
                ev.JobOffered(job_id=job.id, room=job.room.name, worker_id=worker.id)
            )
            wait = max(0.0, min(self.config.assign_timeout_s, deadline - loop.time()))
            resp = await asyncio.wait_for(fut, wait)
        except ConnectionError:
            return self._answered(job, worker, "worker_closed")
        except TimeoutError:
            return self._answered(job, worker, "timeout")
        finally:
            worker.pending.pop(job.id, None)
        if resp.terminate:
            job.state.status = agent.JobStatus.JS_SUCCESS
            job.state.ended_at = now
            return self._answered(job, worker, "terminated")
        if not resp.available:
            return self._answered(job, worker, "declined")
        job.state.participant_identity = resp.participant_identity
        token = self.keys.mint_agent_token(
            worker.api_key,
            room=job.room.name,
            identity=resp.participant_identity,
            name=resp.participant_name,
            metadata=resp.participant_metadata,
            attributes=resp.participant_attributes,
            permissions=worker.permissions,
            agent_name=worker.agent_name,
        )
        try:
            worker.send(agent.ServerMessage(assignment=agent.JobAssignment(job=job, token=token)))
        except ConnectionError:
            return self._answered(job, worker, "send_failed")
        worker.running[job.id] = job
        self._job_worker[job.id] = worker
        return self._answered(job, worker, "accepted")

    def _answered(self, job: agent.Job, worker: WorkerRecord, answer: str) -> str:
        self.events.append(ev.OfferAnswered(job_id=job.id, worker_id=worker.id, answer=answer))
        return answer

    # -- termination ---------------------------------------------------------------------------

    def terminate_job(self, job_id: str, *, agent_left: bool) -> agent.JobState | None:
        """Send `JobTermination` to the job's worker and end the job: JS_SUCCESS when requested
        (DeleteDispatch), JS_FAILED "agent worker left the room" when its agent left
        (`LK:pkg/agent/worker.go:L438-466`). None if the job is not running."""
        worker = self._job_worker.get(job_id)
        if worker is None or job_id not in worker.running:
            return None
        job = worker.running[job_id]
        try:
            worker.send(agent.ServerMessage(termination=agent.JobTermination(job_id=job_id)))
        except ConnectionError:
            log.info("termination of %s not sent: worker closed", job_id)
        if agent_left:
            self._set_status(worker, job, agent.JobStatus.JS_FAILED, AGENT_LEFT_ROOM)
        else:
            self._set_status(worker, job, agent.JobStatus.JS_SUCCESS, "")
        return job.state

    def _set_status(self, worker: WorkerRecord, job: agent.Job, status: int, error: str) -> None:
        now = time.time_ns()
        job.state.updated_at = now
        job.state.status = status  # type: ignore[assignment]
        job.state.error = error
        if status in _ENDED:
            job.state.ended_at = now
            worker.running.pop(job.id, None)
            self._job_worker.pop(job.id, None)
        self.events.append(
            ev.JobStatusChanged(job_id=job.id, worker_id=worker.id, status=status, error=error)
        )
