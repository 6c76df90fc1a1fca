"""The roster's wire: heartbeats, cordons, the fleet's rows and totals, wanted workers.

Source: seed 000, "The gateway hears every worker", "A worker that is up but bad",
"Deploys drain, cordons shrink", "The burst"; ``shared/DESIGN.md``, "Numbers the runtime lives by".
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal

import msgspec

from pinecall_contracts.base import Contract
from pinecall_contracts.ids import EnvironmentField, Fleet, Worker, WorkerRef

Count = Annotated[int, msgspec.Meta(ge=0, le=1_000_000)]
Ratio = Annotated[float, msgspec.Meta(ge=0.0, le=1_000.0)]
Seconds = Annotated[float, msgspec.Meta(ge=0.0, le=86_400.0)]
Text = Annotated[str, msgspec.Meta(max_length=500)]
"""A free-text field said by a person (a reason): bounded, so it fits a NATS message."""
Label = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]

WorkerState = Literal["accepting", "full", "failing", "draining", "cordoned", "silent"]
"""A worker as the roster counts it.

accepting: heard in the last 30 s with a seat free; full: every seat taken (``active >= max_jobs``
or ``load >= 1.0``); failing: its minute is failing while another worker of its fleet accepts;
draining: told to stop, finishing what it holds; cordoned: an operator's cordon stands; silent: not
heard for 30 s, no longer capacity (forgotten after an hour).
"""


class WorkerMinute(Contract, frozen=True, kw_only=True, tag="fleet.worker_minute.v1"):
    """What a worker's calls said over its last minute (seed 000, "A worker that is up but bad")."""

    ended: Count = 0
    """Calls that ended in the minute."""
    failed: Count = 0
    """Of those, calls that ended in an error."""
    errors: Count = 0
    """Error entries written in the minute."""
    turns: Count = 0
    """Turns whose first audio was measured."""
    first_audio_p95_s: Seconds | None = None
    """p95 of first audio (``e2e_latency``) over those turns, in seconds; None under five turns."""


class WorkerHeartbeat(Contract, frozen=True, kw_only=True, tag="fleet.worker_heartbeat.v1"):
    """``POST /v1/fleet/heartbeat``, every 5 s from a worker's start, with its fleet key.

    ``worker`` is the worker's LiveKit agent name ``<fleet>/<worker>.<start>``; ``agent_name`` is
    the same name, said only while LiveKit holds the worker: registered, its connection neither
    gone nor hung (until then, and whenever that ends, the worker is counted but offered no call;
    ``unregistered_s`` says for how long). ``load`` is ``active ÷ max_jobs`` on the roster's scale
    (full at 1.0), not LiveKit's ``0.7 ×`` scale.
    """

    fleet: Fleet
    worker: Worker
    agent_name: Worker | None = None
    active: Count
    """Calls the worker holds now."""
    max_jobs: Annotated[int, msgspec.Meta(ge=1, le=2**31 - 1)]
    """Its seats (``PINECALL_MAX_JOBS``): one at least."""
    load: Ratio
    """``active ÷ max_jobs``; full at 1.0."""
    draining: bool = False
    minute: WorkerMinute | None = None
    """The last minute; None from an older release (never failing)."""
    load_per_core: Ratio | None = None
    """The machine's load per core: context for ``fleet list``, never a decision (DESIGN.md)."""
    version: Label | None = None
    """The worker's release, for the operator."""
    unregistered_s: Seconds | None = None
    """Seconds since LiveKit last held the worker (since its start if it never has); None while
    LiveKit holds it (``agent_name`` said), or from an older release."""


class HeartbeatReply(Contract, frozen=True, kw_only=True, tag="fleet.heartbeat_reply.v1"):
    """The roster's answer to a heartbeat: a cordoned worker takes no new call and exits 3."""

    cordoned: bool
    fleet_full: bool
    """Every worker of the fleet that counts is at its last seat (from totals at most 1 s old)."""


class CordonSetting(Contract, frozen=True, kw_only=True, tag="fleet.cordon.v1"):
    """A worker's cordon, as stored in the cordons KV bucket (newest revision wins)."""

    worker: WorkerRef
    """``<fleet>/<worker>``: the name without its start, so it stands across restarts."""
    cordoned: bool
    by: Label = "operator"
    """Who set it: a key's name."""
    at: dt.datetime
    """When it was set (UTC), for the operator: the server's revision decides what is newest."""
    reason: Text | None = None


class CordonRequest(Contract, frozen=True, kw_only=True, tag="fleet.cordon_request.v1"):
    """``POST /v1/ops/fleet/{worker}/cordon`` (and the ops service over NATS)."""

    worker: WorkerRef | None = None
    """Given on NATS; on HTTP the path names the worker."""
    named: Worker | None = None
    """The worker's whole name with its start, when the operator gave one (``fleet cordon
    pinecall/worker-a.1791067258``): a start its worker is not heard as is refused."""
    cordoned: bool = True
    reason: Text | None = None
    force: bool = False
    """Cordon a worker nobody heard in the last hour (one not started yet); without it that is
    a 404, as a typo in its name would be."""


class WorkerRow(Contract, frozen=True, kw_only=True, tag="fleet.worker_row.v1"):
    """One worker in ``GET /v1/ops/fleet`` and ``fleet list``."""

    worker: Worker
    agent_name: Worker | None
    state: WorkerState
    seats: Count
    active: Count
    load: Ratio
    first_audio_p95_s: Seconds | None
    last_heard_s: Seconds
    """Seconds since the roster last heard it."""
    draining: bool = False
    cordoned: bool = False
    failing: bool = False
    """Its minute is failing (shown even while it is kept counted: no other worker accepts)."""
    load_per_core: Ratio | None = None
    version: str | None = None
    minute: WorkerMinute | None = None
    """The last minute its heartbeat said (why it is failing, for ``doctor`` and ``fleet list``);
    None from an older roster or worker."""
    unregistered_s: Seconds | None = None
    """Seconds since LiveKit last held it, as of now (its heartbeat's figure plus the time since);
    None while LiveKit holds it, or from an older roster or worker."""


class FleetTotals(Contract, frozen=True, kw_only=True, tag="fleet.totals.v1"):
    """A fleet's totals over the workers that count (heard in 30 s, not cordoned nor draining)."""

    accepting: Count = 0
    """Workers with a seat free."""
    full: Count = 0
    """Workers at their last seat."""
    seats: Count = 0
    seats_free: Count = 0
    calls: Count = 0
    """Calls held by every worker heard in the last 30 s."""


class FleetView(Contract, frozen=True, kw_only=True, tag="fleet.view.v1"):
    """A fleet, its workers and its totals."""

    fleet: Fleet
    environment: EnvironmentField | None = None
    workers: list[WorkerRow] = msgspec.field(default_factory=list)
    totals: FleetTotals = msgspec.field(default_factory=FleetTotals)


class RosterSnapshot(Contract, frozen=True, kw_only=True, tag="fleet.roster.v1"):
    """``GET /v1/ops/fleet``: every fleet the roster hears or stores."""

    fleets: list[FleetView]
    at: dt.datetime


class FleetRecord(Contract, frozen=True, kw_only=True, tag="fleet.record.v1"):
    """A fleets row: which environment a fleet serves, and the LiveKit it dispatches on."""

    name: Fleet
    environment: EnvironmentField
    livekit_url: str


class FleetRecords(Contract, frozen=True, kw_only=True, tag="fleet.records.v1"):
    """``GET /v1/ops/fleets``."""

    fleets: list[FleetRecord]


class Wanted(Contract, frozen=True, kw_only=True, tag="fleet.wanted.v1"):
    """``GET /v1/fleet/wanted``: the scaled workers a fleet should run (KEDA reads ``wanted``).

    The number is absolute: KEDA sets the Deployment to it (``metricType: AverageValue``,
    ``targetValue: "1"``), so a pod still booting is never asked for twice.
    """

    fleet: Fleet
    wanted: Count
    """Scaled workers to run: its calls at about 60 % of their seats, never more than ``most``."""
    active: Count
    """Calls the fleet's scaled workers hold now."""
    seats: Count
    """Seats of the scaled workers heard now."""


class FleetListRequest(Contract, frozen=True, kw_only=True, tag="fleet.list_request.v1"):
    """The ops service's ``fleet.list`` request over NATS."""

    fleet: Fleet | None = None
    """Only this fleet; every fleet when None."""
