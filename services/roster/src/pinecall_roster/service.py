"""One roster replica: its roster, cordons, keys and fleets, and how they meet NATS.

A heartbeat received over HTTP is recorded here at once (so its answer is exact) and told to the
other replicas on ``<ns>.fleet.heartbeat.<fleet>.<worker>``; every replica, this one included, records
what it hears there. Totals for a heartbeat's ``fleet_full`` are cached one second per fleet
(seed 000: "a heartbeat's full is answered from totals at most a second old").
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time

from pinecall_contracts.fleet import (
    CordonSetting,
    FleetRecord,
    FleetTotals,
    FleetView,
    HeartbeatReply,
    RosterSnapshot,
    Wanted,
    WorkerHeartbeat,
)
from pinecall_contracts.ids import WorkerKey, fleet_of, parse_worker_name, worker_key
from pinecall_contracts.keys import KeyInfo, KeyRevoked
from pinecall_roster import domain
from pinecall_roster.cordons import CordonBook
from pinecall_roster.roster import Roster
from pinecall_roster.settings import RosterSettings
from pinecall_roster.store import Store
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.changes import Changes
from pinecall_servicekit.errors import Conflict, Forbidden, NotFound, Unprocessable
from pinecall_servicekit.keys import KeyRing

_log = logging.getLogger(__name__)
TOTALS_TTL_S = 1.0
PRUNE_EVERY_S = 60.0


class RosterService:
    """The roster of one replica. Start with :meth:`start`, stop with :meth:`stop`."""

    def __init__(
        self,
        settings: RosterSettings,
        bus: Bus,
        store: Store,
        keyring: KeyRing,
        cordons: CordonBook,
    ) -> None:
        self.settings = settings
        self.bus = bus
        self.store = store
        self.keyring = keyring
        self.cordons = cordons
        self.roster = Roster(silent_s=settings.silent_s, forgotten_s=settings.forgotten_s)
        self.fleets: dict[str, FleetRecord] = {}
        self._totals: dict[str, tuple[float, FleetTotals]] = {}
        self._pruner: asyncio.Task[None] | None = None
        self.changes = Changes()
        """Notified after each heartbeat this replica records."""
        self.scaled: dict[str, tuple[int, int]] = {}
        """Per fleet, ``(wanted, running)`` scaled workers as KEDA last asked this replica
        (``pinecall_scaled_workers``); running: heard, not silent."""

    async def start(self) -> None:
        await self.store.ensure_fleets(self.settings.fleet_records())
        await self.reload_fleets()
        await self.keyring.start()
        await self.cordons.start()
        await self.bus.subscribe(self.bus.subjects.heartbeats, WorkerHeartbeat, self._heard)
        self._pruner = asyncio.create_task(self._prune(), name="roster-prune")

    async def stop(self) -> None:
        if self._pruner:
            self._pruner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pruner
        await self.cordons.stop()

    async def reload_fleets(self) -> None:
        self.fleets = {f.name: f for f in await self.store.fleets()}

    async def _heard(self, heartbeat: WorkerHeartbeat) -> None:
        # Our own heartbeats come back here too: recording one twice changes nothing.
        # The fleet's totals are not recomputed here: at hundreds of heartbeats a second that
        # would cost a pass over the fleet each; they are at most TOTALS_TTL_S old by design.
        if self.roster.hear(heartbeat, time.time()):
            await self.changes.notify()

    async def _prune(self) -> None:
        while True:
            await asyncio.sleep(PRUNE_EVERY_S)
            self.roster.forget_silent(time.time())

    def environment_of(self, fleet: str) -> str:
        """The environment a fleet serves; ``Unprocessable`` for a fleet with no row."""
        record = self.fleets.get(fleet)
        if record is None:
            raise Unprocessable(f"unknown fleet {fleet!r}: no fleets row names it")
        return record.environment

    def fleet_of_key(self, key: KeyInfo) -> str:
        """The fleet a fleet key acts for: its environment's (one fleet per environment)."""
        for record in self.fleets.values():
            if record.environment == key.environment:
                return record.name
        raise Forbidden(f"no fleet serves {key.environment}")

    async def heartbeat(self, heartbeat: WorkerHeartbeat, key: KeyInfo) -> HeartbeatReply:
        """Record a worker's heartbeat, tell the other replicas, answer cordoned and full.

        Raises ``Unprocessable`` when the name's fleet is not the heartbeat's, or ``agent_name``
        is not the worker's name; ``Forbidden`` when the key's environment is not the fleet's.
        """
        parsed = parse_worker_name(heartbeat.worker)
        if parsed.fleet != heartbeat.fleet:
            raise Unprocessable(f"worker {heartbeat.worker} is not of fleet {heartbeat.fleet}")
        if heartbeat.agent_name is not None and heartbeat.agent_name != heartbeat.worker:
            raise Unprocessable("agent_name must be the worker's name, once LiveKit registered it")
        environment = self.environment_of(heartbeat.fleet)
        if key.environment != environment:
            raise Forbidden(f"a key of {key.environment} cannot beat for {heartbeat.fleet}")
        problems = domain.heartbeat_problems(heartbeat, time.time())
        if problems:
            raise Unprocessable("; ".join(problems))
        if not self.roster.hear(heartbeat, time.time()):
            raise Conflict(f"a newer registration of {parsed.key} is heard: this one is superseded")
        await self.changes.notify()
        await self.bus.publish(self.bus.subjects.heartbeat(heartbeat.worker), heartbeat)
        # and on the older release's subject, for its replicas during a rolling deploy
        await self.bus.publish(self.bus.subjects.heartbeat_before(heartbeat.worker), heartbeat)
        return HeartbeatReply(
            cordoned=self.cordons.is_cordoned(parsed.key),
            fleet_full=domain.fleet_is_full(self.totals(heartbeat.fleet)),
        )

    def totals(self, fleet: str) -> FleetTotals:
        now = time.monotonic()
        cached = self._totals.get(fleet)
        if cached and now - cached[0] < TOTALS_TTL_S:
            return cached[1]
        totals = domain.totals(self.roster.standing(fleet, time.time(), self.cordons.is_cordoned))
        self._totals[fleet] = (now, totals)
        return totals

    def view(self, fleet: str) -> FleetView:
        return self.roster.view(
            fleet,
            time.time(),
            self.cordons.is_cordoned,
            {name: r.environment for name, r in self.fleets.items()},
        )

    def snapshot(self, fleet: str | None = None) -> RosterSnapshot:
        """Every fleet stored or heard (or only ``fleet``), with its workers and totals."""
        names = sorted(set(self.fleets) | self.roster.fleets())
        if fleet is not None:
            names = [fleet] if fleet in names else []
        return RosterSnapshot(fleets=[self.view(n) for n in names], at=dt.datetime.now(dt.UTC))

    async def cordon(
        self, worker: str, cordoned: bool, by: str, reason: str | None, *, force: bool = False
    ) -> CordonSetting:
        """Set or lift a worker's cordon (by name, with or without its start).

        ``NotFound`` for a worker no replica heard in the last hour and no cordon was stored
        for (a typo would otherwise stand as a cordon of nobody, and the worker meant goes on
        taking calls), or for a start other than the one its worker is heard as (a start that
        never ran names nobody either), unless ``force`` (a worker not started yet); and for a
        fleet no fleets row names (``fleet list --fleet`` says the same). ``WorkerNameError``
        for what is not a worker's name."""
        key: WorkerKey = worker_key(worker)
        fleet = fleet_of(key)
        if fleet not in self.fleets:
            raise NotFound(f"no fleet {fleet!r}: fleet list names the fleets")
        heard_as = self.roster.heard_as(key)
        if not force and worker != key and heard_as is not None and heard_as != worker:
            raise NotFound(
                f"no worker {worker} was heard in the last hour: {key} is heard as {heard_as} "
                f"(name that, or {key} for whichever start runs)"
            )
        if not (force or self.roster.knows(key) or self.cordons.holds(key)):
            raise NotFound(
                f"no worker {key} was heard in the last hour and none was ever cordoned: "
                "fleet list names the workers"
                + (" (a worker not started yet: fleet cordon --force)" if cordoned else "")
            )
        setting = CordonSetting(
            worker=key, cordoned=cordoned, by=by, at=dt.datetime.now(dt.UTC), reason=reason
        )
        await self.cordons.put(setting)
        self._totals.pop(fleet, None)
        _log.info("cordon %s: %s by %s", key, "set" if cordoned else "lifted", by)
        return setting

    def wanted(self, fleet: str, prefix: str, seats: int, most: int | None) -> Wanted:
        placed = self.roster.standing(fleet, time.time(), self.cordons.is_cordoned)
        wanted, calls, seats_heard = domain.wanted_workers(
            placed, prefix=prefix, seats=seats, most=most, target=self.settings.wanted_target
        )
        running = sum(
            p.state != "silent" and domain.is_scaled(p.heard.heartbeat.worker, prefix)
            for p in placed
        )
        self.scaled[fleet] = (wanted, running)
        return Wanted(fleet=fleet, wanted=wanted, active=calls, seats=seats_heard)

    async def revoke_key(self, key_id: str) -> KeyInfo:
        """Revoke a key and tell every replica to forget it now."""
        info = await self.store.revoke_key(key_id)
        self.keyring.forget(key_id)
        await self.bus.publish(
            self.bus.subjects.key_revoked, KeyRevoked(id=key_id, at=dt.datetime.now(dt.UTC))
        )
        return info
