"""The cluster around the workers: Deployments, KEDA and the HPA, the cluster autoscaler, faults.

- **KEDA** asks the production wanted rule (:func:`pinecall_roster.domain.wanted_workers`, over
  the roster's standings) every ``keda_poll_s``; the **HPA** applies it with its tolerance, up at
  once, down one pod per ``down_period_s`` to the most wanted over ``down_window_s``
  (``stabilizationWindowSeconds``; Kubernetes' HPA behaviour, the chart's ScaledObject).
- A scaled pod needs a node of its own (32 seats on an e2-standard-8, seed 000): a free one, or a
  new one after the **cluster autoscaler**'s provisioning delay (log-normal, :mod:`.params`); an
  empty node goes after ``node_idle_s``.
- A pod starts its worker ``pod_start_s`` after it has a node; LiveKit holds the worker
  ``register_s`` later. A pod let go **drains**: no new call, gone when its calls end or at
  ``drain_s``, sealing what is left (those callers are cut).
- **Faults**: a node lost (the worker a ghost for LiveKit's 15–20 min, its pod replaced after
  ``pod_eviction_s``), a worker killed or vanished by name, a release (each Deployment rolled,
  ``maxSurge: 1, maxUnavailable: 0``: a new pod, once LiveKit holds it, then an old one drains).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Generator
from typing import Any

import numpy as np
import simpy
from livekit.protocol import agent

from pinecall_loadlab.simulate.params import Params
from pinecall_loadlab.simulate.workers import SCALED, Node, Roster, Worker, worker_name
from pinecall_roster import domain as roster

Lost = Callable[[Worker, list[int], str], None]
"""Told of a worker's calls that ended with it: ``(worker, calls, why)``, why ``lost`` or ``cut``."""
Proc = Generator[simpy.Event, Any, None]


class Cluster:
    """The workers of one fleet and the machinery that sizes them."""

    def __init__(
        self,
        env: simpy.Environment,
        params: Params,
        rng: np.random.Generator,
        *,
        core: list[tuple[str, int]],
        on_lost: Lost,
        livekit_status: Callable[[Worker], tuple[float, int]] | None = None,
    ) -> None:
        self.env, self.p, self.rng, self.on_lost = env, params, rng, on_lost
        self.livekit_status = livekit_status
        self.roster = Roster()
        self.workers: list[Worker] = []
        self.by_name: dict[str, Worker] = {}
        self.nodes: list[Node] = []
        self.pending: deque[Worker] = deque()
        self.replicas = 0
        self.wanted = 0
        self.version = 0
        self.surge = 0
        self._hosts = 0
        self._recs: deque[tuple[float, int]] = deque()
        self._last_down = -math.inf
        self.ready: dict[int, simpy.Event] = {}
        """Per worker (by ``id``): LiveKit holds it, or it went before."""
        self.idle: dict[int, simpy.Event] = {}
        """Per draining worker: its last call ended."""
        for host, seats in core:
            self._start(Worker(name=worker_name(params.fleet, host, 0), seats=seats, scaled=False))
        if params.most > 0:
            env.process(self._keda())
            env.process(self._autoscaler())

    # --- pods -------------------------------------------------------------------------------

    def live(self) -> list[Worker]:
        """Workers whose process has not ended, and ghosts LiveKit still lists."""
        now = self.env.now
        self.workers = [w for w in self.workers if not w.gone or w.ghost_until > now]
        return self.workers

    def scaled_pods(self) -> list[Worker]:
        """The scaled Deployment's pods that count: not told to stop, not evicted."""
        return [w for w in self.workers if w.scaled and not w.terminating and not w.evicted]

    def _start(self, w: Worker) -> None:
        self.workers.append(w)
        self.by_name[w.name] = w
        self.ready[id(w)] = self.env.event()
        self.env.process(self._pod(w, 0.0 if self.env.now == 0 and not w.scaled else None))

    def _new_pod(self, scaled: bool, seats: int) -> Worker:
        self._hosts += 1
        host = f"{SCALED}-{self._hosts}" if scaled else f"worker-core-r{self._hosts}"
        w = Worker(
            name=worker_name(self.p.fleet, host, self.env.now),
            seats=seats,
            scaled=scaled,
            version=self.version,
        )
        if not scaled:
            self._start(w)
            return w
        self.workers.append(w)
        self.by_name[w.name] = w
        self.ready[id(w)] = self.env.event()
        self.pending.append(w)
        self._place()
        return w

    def _place(self) -> None:
        """Bind pending pods to empty nodes; ask for a node for each pod left without one."""
        free = [n for n in self.nodes if n.state == "up" and n.worker is None]
        while self.pending and free:
            w, node = self.pending.popleft(), free.pop()
            node.worker, w.node = w, node
            self.env.process(self._pod(w, None))
        coming = sum(n.state == "provisioning" for n in self.nodes)
        for _ in range(len(self.pending) - coming):
            node = Node(ident=len(self.nodes))
            self.nodes.append(node)
            self.env.process(self._provision(node))

    def _provision(self, node: Node) -> Proc:
        delay = self.p.node_median_s * math.exp(self.p.node_sigma * self.rng.standard_normal())
        yield self.env.timeout(delay)
        node.state, node.empty_since = "up", self.env.now
        self._place()

    def _pod(self, w: Worker, start_s: float | None) -> Proc:
        """A pod's life: its worker's process starts, beats, registers; ready is signalled."""
        warm = start_s is not None  # the core workers, up before the run starts
        yield self.env.timeout(self.p.pod_start_s if start_s is None else start_s)
        if w.terminating:
            self._gone(w)
            return
        w.started, w.registered = True, warm
        self.env.process(self._beat(w))
        if self.livekit_status is not None:
            self.env.process(self._status(w))
        if not warm:
            yield self.env.timeout(self.p.register_s)
            w.registered = not (w.gone or w.terminating)
        self.ready[id(w)].succeed()

    def _beat(self, w: Worker) -> Proc:
        while not w.gone:
            self.roster.hear(w.heartbeat(self.p.fleet), self.env.now)
            yield self.env.timeout(self.p.heartbeat_s)

    def _status(self, w: Worker) -> Proc:
        assert self.livekit_status is not None
        yield self.env.timeout(float(self.rng.uniform(0, self.p.status_s)))
        while not w.gone:
            w.lk_load, w.lk_status = self.livekit_status(w)
            yield self.env.timeout(self.p.status_s)

    def terminate(self, w: Worker) -> None:
        """Tell a pod to stop: one not started goes; a started one drains."""
        if w.terminating or w.gone:
            return
        w.terminating = True
        if w in self.pending:
            self.pending.remove(w)
            w.gone = True
            self.ready[id(w)].succeed()
        elif w.started:
            w.draining = True
            w.lk_status = agent.WorkerStatus.WS_FULL
            self.env.process(self._drain(w))

    def _drain(self, w: Worker) -> Proc:
        idle = self.env.event()
        self.idle[id(w)] = idle
        if w.active + w.opening > 0:
            yield idle | self.env.timeout(self.p.drain_s)
        if w.calls:
            self.on_lost(w, sorted(w.calls), "cut")
            w.calls.clear()
            w.active = 0
        self._gone(w)

    def ended(self, w: Worker) -> None:
        """A call of ``w`` ended or an opening came to nothing: a draining worker may go."""
        idle = self.idle.get(id(w))
        if idle is not None and not idle.triggered and w.active + w.opening == 0:
            idle.succeed()

    def _gone(self, w: Worker) -> None:
        w.gone, w.registered = True, False
        if w.node is not None and w.node.state == "up":
            w.node.worker, w.node.empty_since = None, self.env.now
            self._place()
        if not self.ready[id(w)].triggered:
            self.ready[id(w)].succeed()

    # --- KEDA, the HPA, the cluster autoscaler ----------------------------------------------

    def _keda(self) -> Proc:
        while True:
            yield self.env.timeout(self.p.keda_poll_s)  # first once the roster heard the core
            self.wanted, _, _ = roster.wanted_workers(
                self.roster.standings(self.env.now),
                prefix=SCALED,
                seats=self.p.scaled_seats,
                most=self.p.most,
                target=roster.WANTED_TARGET,  # read now: a test may swap it
            )
            self._hpa(self.wanted)

    def _hpa(self, wanted: int) -> None:
        now, current = self.env.now, self.replicas
        within = current > 0 and abs(wanted / current - 1) <= self.p.hpa_tolerance
        rec = max(self.p.least, current if within else wanted)
        self._recs.append((now, rec))
        while self._recs[0][0] < now - self.p.down_window_s:
            self._recs.popleft()
        if rec > current:
            self.replicas = rec
        else:
            stable = max(r for _, r in self._recs)
            if stable < current and now - self._last_down >= self.p.down_period_s:
                self.replicas, self._last_down = max(stable, current - 1), now
        self.reconcile()

    def reconcile(self) -> None:
        """Make the scaled Deployment's pods what the HPA says (plus a release's surge)."""
        have = self.scaled_pods()
        target = self.replicas + self.surge
        for _ in range(target - len(have)):
            self._new_pod(True, self.p.scaled_seats)
        if len(have) > target:
            order = sorted(
                have, key=lambda w: (w.version, w.started, w.registered, w.active + w.opening)
            )
            for w in order[: len(have) - target]:
                self.terminate(w)

    def _autoscaler(self) -> Proc:
        while True:
            yield self.env.timeout(10.0)
            now = self.env.now
            for n in self.nodes:
                if (
                    n.state == "up"
                    and n.worker is None
                    and now - n.empty_since >= self.p.node_idle_s
                ):
                    n.state = "removed"
            self.nodes = [n for n in self.nodes if n.state in ("up", "provisioning")]

    # --- faults -----------------------------------------------------------------------------

    def vanish(self, w: Worker) -> None:
        """``w``'s machine gone whole: its calls lost, LiveKit keeps it listed 15–20 min."""
        now = self.env.now
        w.ghost_until = now + float(self.rng.uniform(self.p.ghost_min_s, self.p.ghost_max_s))
        self._lose(w)
        if w.node is not None:
            w.node.state = "lost"
            self.nodes = [n for n in self.nodes if n is not w.node]
        if w.scaled:
            self.env.process(self._evict(w))

    def kill(self, w: Worker) -> None:
        """``w``'s process killed: its calls lost, LiveKit forgets it at once."""
        self._lose(w)

    def _lose(self, w: Worker) -> None:
        calls = sorted(w.calls)
        w.calls.clear()
        w.active = w.opening = 0
        w.gone, w.registered = True, False
        self.on_lost(w, calls, "lost")

    def _evict(self, w: Worker) -> Proc:
        yield self.env.timeout(self.p.pod_eviction_s)
        w.evicted = True
        self.reconcile()

    def node_lost(self) -> bool:
        """A scaled worker's node is lost: one drawn at random among those LiveKit holds (the
        busiest would bias LiveKit choosing: at its 0.7 line LiveKit never draws it again).
        False when no scaled worker is up to lose (the core node is never lost)."""
        up = [w for w in self.workers if w.scaled and w.registered and not w.gone]
        if up:
            self.vanish(up[int(self.rng.integers(len(up)))])
        return bool(up)

    def release(self) -> None:
        """A new release: every Deployment rolled, ``maxSurge: 1, maxUnavailable: 0``."""
        self.version += 1
        self.env.process(self._roll(scaled=False))
        if self.p.most > 0:
            self.env.process(self._roll(scaled=True))

    def _roll(self, *, scaled: bool) -> Proc:
        while True:
            old = [
                w
                for w in self.workers
                if w.scaled == scaled
                and w.version < self.version
                and not (w.terminating or w.evicted or w.gone)
            ]
            if not old:
                return
            victim = min(old, key=lambda w: w.active + w.opening)
            if scaled:
                self.surge += 1
            new = self._new_pod(scaled, victim.seats)
            yield self.ready[id(new)]
            if scaled:
                self.surge -= 1
            self.terminate(victim)
