"""Every number the simulator models around the production rules, each with its source.

The rules themselves (who is offered a room, when it is offered again or overflows, which worker is
failing or silent, how many scaled workers are wanted, what load a worker tells LiveKit) are not
here: they are imported from the services' ``domain`` modules. What is here is the world around
them — callers, calls, workers, nodes, KEDA, LiveKit's own dispatch, faults — each field a
measured or documented number (its docstring says which), or, where nothing was measured, a
stated default marked *assumed* so the README's sensitivity runs can vary it.
"""

from __future__ import annotations

import msgspec

from pinecall_contracts.agents import MAX_CALL_SECONDS


class Fault(msgspec.Struct, frozen=True, kw_only=True):
    """A fault at ``at_s`` seconds into the day.

    ``kind``: ``node_lost`` (a scaled worker's machine, drawn at random, vanishes: its calls are lost,
    LiveKit keeps it as a ghost), ``kill`` (worker ``worker``'s process dies: its calls are lost,
    LiveKit forgets it at once), ``vanish`` (worker ``worker``'s machine vanishes), ``release``
    (every worker Deployment rolled), ``burst`` (``calls_per_min`` more callers a minute for
    ``minutes`` minutes).
    """

    kind: str
    at_s: float
    worker: str | None = None
    calls_per_min: float = 0.0
    minutes: float = 0.0


class Params(msgspec.Struct, frozen=True, kw_only=True):
    """The modelled world. Defaults are the seeds' production cell (chart values, seed 000)."""

    # --- calls ---------------------------------------------------------------------------------
    call_mean_s: float = 240.0
    """Mean call length: seed 000, "The shape of the numbers" (4 min a call)."""
    call_sigma: float = 1.0
    """Log-normal shape of call lengths (*assumed*: a long tail, median 2.4 min at mean 4)."""
    call_max_s: float = float(MAX_CALL_SECONDS)
    """The ceiling: ``MAX_CALL_SECONDS`` (30 min, seed 003), which the reaper enforces."""
    sentence_s: float = 8.0
    """How long the sentence job holds a seat (say one sentence, delete the room; *assumed*)."""

    # --- workers -------------------------------------------------------------------------------
    fleet: str = "pinecall"
    core_workers: int = 2
    """Core workers on the core node: chart ``workers.core.production.replicas`` (2)."""
    core_seats: int = 2
    """Their seats: chart ``workers.core.production.seats`` (2)."""
    scaled_seats: int = 32
    """A scaled worker's seats: chart ``workers.scaled.production.seats`` (32, vCPU × 4)."""
    most: int = 35
    """The scaled workers' ceiling: chart ``workers.scaled.production.most`` (35)."""
    least: int = 0
    """The scaled workers kept however few calls there are (KEDA's ``minReplicaCount``; the
    chart's 0: the pool empties at night)."""
    heartbeat_s: float = 5.0
    """A worker's heartbeat period (DESIGN.md, "heartbeat")."""
    job_start_s: float = 2.0
    """From an offer accepted to the call open: seed 000 ("a live one opens a call in about 2 s")."""
    register_s: float = 5.0
    """From a worker's process start to LiveKit holding it: plugins imported before it is ready
    (seed 000, "A new gateway imports every vendor's plugin before it listens (5 s)"; the job
    processes preloaded, bench/README.md ``worker_calls.py``: 0.34 s)."""
    pod_start_s: float = 10.0
    """A pod on a node that is up, to its worker's process start (image cached; *assumed*)."""
    drain_s: float = 600.0
    """A draining worker's wait for its calls before it seals what is left (DESIGN.md, "drain")."""
    agent_lost_s: float = 20.5
    """From a worker's death to LiveKit's participant_left for its agents: seed 000, "A worker
    that dies" (measured 20.5 s from SIGKILL to call.ended)."""

    # --- LiveKit -------------------------------------------------------------------------------
    offer_deadline_s: float = 10.0
    """LiveKit's offer deadline: 10 s measured in the seed (~3 s by the server's source,
    ``shared/reference/livekit-protocol.md`` §2.4); an offer past it is dropped, no retry."""
    status_s: float = 2.5
    """How often livekit-agents tells LiveKit its load (bench/README.md: "LiveKit's status every
    2.5 s")."""
    ghost_min_s: float = 900.0
    ghost_max_s: float = 1200.0
    """A vanished machine's worker stays listed by LiveKit this long, uniform between the two:
    seed 000, "A machine that vanishes is worse" (15–20 minutes measured on 2026-10-03)."""
    livekit_report: str = "calls"
    """LiveKit choosing: the load the workers report. ``calls``: ``calls ÷ seats``, the seeds'
    before (``lab run capacity``'s LiveKit mode), so LiveKit's 0.7 line stops each worker at 70 %;
    ``counting``: ``0.7 × calls ÷ seats`` (``pinecall_worker.domain.livekit_load``)."""

    # --- KEDA, the HPA, the cluster autoscaler -------------------------------------------------
    keda_poll_s: float = 15.0
    """KEDA asks ``/v1/fleet/wanted`` every 15 s (seed 000, "The burst")."""
    hpa_tolerance: float = 0.1
    """The HPA skips a change within 10 % (platform notes, "KEDA")."""
    down_window_s: float = 600.0
    """Scale-down stabilization: the most wanted over the last 10 min (seed 000, "never sooner
    than ten minutes after the last change"; chart ``stabilizationWindowSeconds``)."""
    down_period_s: float = 300.0
    """Down one pod per 5 min (chart ``policies: [{type: Pods, value: 1, periodSeconds: 300}]``)."""
    node_median_s: float = 190.0
    node_sigma: float = 0.28
    """A new node's delay, from a pending pod to the node up: log-normal, median 190 s and
    5 %–95 % of about 120–300 s (*assumed* from GKE's "2–5 minutes from pending pod to running";
    nothing measured here). The README varies it."""
    node_idle_s: float = 600.0
    """The cluster autoscaler removes a node empty this long (its ``scale-down-unneeded-time``
    default, 10 min; seed 000 saw 12 min)."""
    pod_eviction_s: float = 340.0
    """A lost node's pod is replaced after Kubernetes' defaults: 40 s node-monitor grace, then
    300 s of the not-ready/unreachable tolerations."""

    # --- the runtime's dispatcher --------------------------------------------------------------
    sweep_s: float = 3.0
    """Any dispatcher replica sweeps the rooms every 3 s (DESIGN.md, "sweep")."""

    faults: tuple[Fault, ...] = ()


SEED = Params()
