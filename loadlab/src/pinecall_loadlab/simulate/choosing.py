"""The two dispatchers, on the same callers: the runtime choosing and LiveKit choosing.

**The runtime choosing** runs the dispatcher's production rules: each ring is decided at once,
and every ``sweep_s`` the rooms in offers are swept, by :func:`pinecall_dispatcher.domain.sweep`
over the rows the roster's rules make of the heartbeats, the seats not counted yet by
:func:`~pinecall_dispatcher.domain.not_counted` (what the dispatcher offered and saw opened). An
offer is a dispatch to the worker's own name: LiveKit offers that worker alone, which accepts below
its load threshold (:func:`pinecall_worker.domain.effective_load`, the counting worker's scale),
declines at it, and never answers as a ghost; the room is offered again by the rules. A lost
worker's callers get the sentence (a ``sentence`` room, decided by the same rules).

**LiveKit choosing** runs LiveKit's own dispatch as the stand-in models it
(:mod:`pinecall_loadlab.livekit.policy`: the node gate at ``agents.target_load`` 0.7, one worker
drawn by ``1 − load`` from each worker's last status, a decline tries the next, the offer deadline
fails the job with no retry). Nobody places a caller no worker took (silent), and nobody tells a
lost worker's callers anything (silent after the loss).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Generator
from typing import Any

import msgspec
import numpy as np
import simpy
from livekit.protocol import agent

from pinecall_dispatcher import domain as dispatch
from pinecall_loadlab.livekit import policy
from pinecall_loadlab.livekit.config import StandInConfig
from pinecall_loadlab.simulate.cluster import Cluster
from pinecall_loadlab.simulate.params import Params
from pinecall_loadlab.simulate.report import Ledger
from pinecall_loadlab.simulate.workers import Worker
from pinecall_worker import domain as worker_rules

Proc = Generator[simpy.Event, Any, None]


class Choosing:
    """What both dispatchers share: calls opened, talked, ended, lost."""

    mode = ""

    def __init__(
        self, env: simpy.Environment, params: Params, lengths: np.ndarray, ledger: Ledger
    ) -> None:
        self.env, self.p, self.lengths, self.ledger = env, params, lengths, ledger
        self.threshold = worker_rules.load_threshold()
        self.cluster: Cluster

    def ring(self, idx: int) -> None:
        raise NotImplementedError

    def lost(self, w: Worker, calls: list[int], why: str) -> None:
        raise NotImplementedError

    def waiting(self) -> int:
        """Rings waiting for a worker now."""
        raise NotImplementedError

    def livekit_status(self, w: Worker) -> tuple[float, int]:
        """The load and status ``w``'s livekit-agents tells LiveKit: full at the threshold."""
        load = self._load(w.active, 0, w.seats)
        full = w.draining or load >= self.threshold
        return load, agent.WorkerStatus.WS_FULL if full else agent.WorkerStatus.WS_AVAILABLE

    def _load(self, active: int, opening: int, seats: int) -> float:
        return worker_rules.effective_load(active, opening, seats, self.threshold)

    def accepts(self, w: Worker) -> bool:
        """livekit-agents' answer to an offer: registered, not draining, under its threshold."""
        return (
            w.registered
            and not w.draining
            and self._load(w.active, w.opening, w.seats) < self.threshold
        )

    def open(self, w: Worker, idx: int) -> None:
        w.active += 1
        w.calls.add(idx)
        self.ledger.fate(idx, "agent", self.env.now)
        self.env.process(self._talk(w, idx))

    def _talk(self, w: Worker, idx: int) -> Proc:
        yield self.env.timeout(float(self.lengths[idx]))
        if idx in w.calls:
            w.calls.discard(idx)
            w.active -= 1
            self.ended(w, idx)
            self.cluster.ended(w)

    def ended(self, w: Worker, idx: int) -> None:
        """A call of ``w`` ended as its caller hung up."""


class RuntimeChoosing(Choosing):
    mode = "runtime_choosing"

    def __init__(
        self,
        env: simpy.Environment,
        params: Params,
        lengths: np.ndarray,
        ledger: Ledger,
        rules: dispatch.Rules | None = None,
    ) -> None:
        super().__init__(env, params, lengths, ledger)
        self.rules = rules if rules is not None else dispatch.SEED  # read now: a test may swap it
        self.rooms: dict[int, dispatch.Room] = {}
        self.offered: dict[int, str] = {}
        """Each room's last offer not opened: the worker offered."""
        self.held: Counter[str] = Counter()
        env.process(self._sweeper())

    def ring(self, idx: int) -> None:
        self.rooms[idx] = dispatch.Room(name=str(idx), arrived_at=self.env.now)
        self._decide([self.rooms[idx]])

    def waiting(self) -> int:
        return len(self.rooms)

    def _sweeper(self) -> Proc:
        while True:
            yield self.env.timeout(self.p.sweep_s)
            if self.rooms:
                self._decide(list(self.rooms.values()))

    def _decide(self, rooms: list[dispatch.Room]) -> None:
        now = self.env.now
        rows = self.cluster.roster.rows(now)
        pending = dispatch.not_counted(rows, Counter(self.offered.values()), self.held)
        for room, decision in dispatch.sweep(rooms, rows, pending, now, self.rules):
            if isinstance(decision, dispatch.Offer):
                self._offer(room, decision)
            elif isinstance(decision, dispatch.Overflow):
                idx = int(room.name)
                del self.rooms[idx]
                self.offered.pop(idx, None)
                fate = "sentenced" if room.job == "sentence" else "overflow"
                self.ledger.fate(idx, fate, now)

    def _offer(self, room: dispatch.Room, offer: dispatch.Offer) -> None:
        now, idx = self.env.now, int(room.name)
        self.rooms[idx] = msgspec.structs.replace(
            room, tried=(*room.tried, offer.worker), offered_at=now, unheld=False
        )
        self.offered[idx] = offer.worker
        if offer.attempt > 1 and room.job == "answer":
            self.ledger.count("reoffers", now)
        w = self.cluster.by_name.get(offer.worker)
        # A dispatch to a name LiveKit does not list makes no job; a ghost never answers; a
        # worker that declines ends the job: each room is offered again by the rules, later.
        if w is None or w.gone or not self.accepts(w):
            return
        w.opening += 1
        self.env.process(self._opening(w, idx, room.job))

    def _opening(self, w: Worker, idx: int, job: str) -> Proc:
        yield self.env.timeout(self.p.job_start_s)
        if w.gone:
            return
        w.opening -= 1
        if self.offered.get(idx) != w.name:
            self.cluster.ended(w)
            return
        del self.rooms[idx], self.offered[idx]
        if job == "sentence":
            self.ledger.fate(idx, "sentenced", self.env.now)
            w.active += 1
            self.env.process(self._sentence(w))
            return
        self.held[w.name] += 1
        self.open(w, idx)

    def _sentence(self, w: Worker) -> Proc:
        yield self.env.timeout(self.p.sentence_s)
        if not w.gone:
            w.active -= 1
            self.cluster.ended(w)

    def ended(self, w: Worker, idx: int) -> None:
        self.held[w.name] -= 1

    def lost(self, w: Worker, calls: list[int], why: str) -> None:
        self.held[w.name] -= len(calls)
        for idx in calls:
            self.ledger.fate(idx, why, self.env.now)
        if why == "lost":
            self.env.process(self._death(w, calls))

    def _death(self, w: Worker, calls: list[int]) -> Proc:
        """LiveKit says each agent left, lost; the death handler keeps its room as a sentence."""
        yield self.env.timeout(self.p.agent_lost_s)
        now = self.env.now
        rooms = []
        for idx in calls:
            room = dispatch.Room(name=str(idx), arrived_at=now, tried=(w.name,), job="sentence")
            self.rooms[idx] = room
            rooms.append(room)
        if rooms:
            self._decide(rooms)


class LivekitChoosing(Choosing):
    mode = "livekit_choosing"

    def __init__(
        self, env: simpy.Environment, params: Params, lengths: np.ndarray, ledger: Ledger, seed: int
    ) -> None:
        super().__init__(env, params, lengths, ledger)
        self.draw = random.Random(seed)
        self.target_load = StandInConfig().target_load
        self.jobs = 0

    def _load(self, active: int, opening: int, seats: int) -> float:
        if self.p.livekit_report == "calls":
            return worker_rules.roster_load(active + opening, seats)
        return worker_rules.effective_load(active, opening, seats, self.threshold)

    def waiting(self) -> int:
        return self.jobs

    def ring(self, idx: int) -> None:
        self.env.process(self._job(idx))

    def _job(self, idx: int) -> Proc:
        now = self.env.now
        listed = [w for w in self.cluster.live() if w.listed(now)]
        gate = policy.node_affinity(listed, policy.AffinityFormula.TARGET_LOAD, self.target_load)
        if gate <= 0:
            self.ledger.fate(idx, "silent", now)
            return
        tried: set[Worker] = set()
        while (w := policy.select_worker(listed, tried, self.draw)) is not None:
            tried.add(w)
            if w.gone:  # a ghost: the offer waits out the deadline, then the job fails
                self.jobs += 1
                yield self.env.timeout(self.p.offer_deadline_s)
                self.jobs -= 1
                self.ledger.count("to_ghost", self.env.now)
                break
            if not self.accepts(w):
                continue
            w.opening += 1
            self.jobs += 1
            yield self.env.timeout(self.p.job_start_s)
            self.jobs -= 1
            if w.gone:
                break
            w.opening -= 1
            self.open(w, idx)
            return
        self.ledger.fate(idx, "silent", self.env.now)

    def lost(self, w: Worker, calls: list[int], why: str) -> None:
        for idx in calls:
            self.ledger.fate(idx, "lost_silent" if why == "lost" else why, self.env.now)
