"""The roster's ops verbs over NATS: a ``nats.micro`` service on every replica (NATS ADR-32).

``<ns>.ops.fleet.list`` (FleetListRequest → RosterSnapshot) and ``<ns>.ops.fleet.records``
(FleetListRequest → FleetRecords: the fleets rows), each with a service or an operator key in
the ``Authorization`` header (the dispatcher and the reaper read them with their service key,
through :class:`pinecall_clients.roster.RosterClient`), and ``<ns>.ops.fleet.cordon``
(CordonRequest → CordonSetting) with an operator key only (a service key: 403), so
``pinecall-runtime fleet …`` works from any machine that reaches NATS. Replicas share a queue
group: one answers each request. ``$SRV.PING.<ns>-roster`` finds them all.
"""

from __future__ import annotations

from nats.micro.service import Service

from pinecall_contracts.fleet import (
    CordonRequest,
    CordonSetting,
    FleetListRequest,
    FleetRecords,
    RosterSnapshot,
)
from pinecall_contracts.ids import WorkerNameError
from pinecall_contracts.keys import KeyInfo
from pinecall_roster.people import people_verbs
from pinecall_roster.service import RosterService
from pinecall_servicekit.errors import BadRequest
from pinecall_servicekit.verbs import Verb, serve_verbs

VERSION = "0.1.0"


async def start_ops(service: RosterService) -> Service:
    """Serve the ops verbs of ``service``; stop the returned service on shutdown."""
    bus = service.bus

    async def fleet_list(request: FleetListRequest, key: KeyInfo) -> RosterSnapshot:
        return service.snapshot(request.fleet)

    async def fleet_records(request: FleetListRequest, key: KeyInfo) -> FleetRecords:
        await service.reload_fleets()
        return FleetRecords(
            fleets=[r for n, r in service.fleets.items() if request.fleet in (None, n)]
        )

    async def fleet_cordon(request: CordonRequest, key: KeyInfo) -> CordonSetting:
        if request.worker is None:
            raise BadRequest("name the worker: <fleet>/<worker>")
        try:
            return await service.cordon(
                request.named or request.worker,
                request.cordoned,
                key.name,
                request.reason,
                force=request.force,
            )
        except WorkerNameError as exc:
            raise BadRequest(str(exc)) from exc

    subjects = bus.subjects
    return await serve_verbs(
        bus,
        service.keyring,
        name=subjects.ops_service,
        version=VERSION,
        description="the roster's fleet verbs",
        verbs=[
            Verb("fleet-list", subjects.ops_fleet_list, FleetListRequest, fleet_list),
            Verb("fleet-records", subjects.ops_fleet_records, FleetListRequest, fleet_records),
            Verb("fleet-cordon", subjects.ops_fleet_cordon, CordonRequest, fleet_cordon),
            *people_verbs(service),
        ],
    )
