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
from pinecall_roster.service import RosterService
from pinecall_servicekit.errors import BadRequest
from pinecall_servicekit.keys import OPERATOR, SERVICE_OR_OPERATOR, bearer

VERSION = "0.1.0"


async def start_ops(service: RosterService) -> Service:
    """Serve the ops verbs of ``service``; stop the returned service on shutdown."""
    bus = service.bus

    async def operator(headers: dict[str, str]) -> str:
        info = await service.keyring.verify(bearer(headers.get("Authorization")), kinds=OPERATOR)
        return info.name

    async def reader(headers: dict[str, str]) -> None:
        await service.keyring.verify(
            bearer(headers.get("Authorization")), kinds=SERVICE_OR_OPERATOR
        )

    async def fleet_list(request: FleetListRequest, headers: dict[str, str]) -> RosterSnapshot:
        await reader(headers)
        return service.snapshot(request.fleet)

    async def fleet_records(request: FleetListRequest, headers: dict[str, str]) -> FleetRecords:
        await reader(headers)
        await service.reload_fleets()
        return FleetRecords(
            fleets=[r for n, r in service.fleets.items() if request.fleet in (None, n)]
        )

    async def fleet_cordon(request: CordonRequest, headers: dict[str, str]) -> CordonSetting:
        by = await operator(headers)
        if request.worker is None:
            raise BadRequest("name the worker: <fleet>/<worker>")
        try:
            return await service.cordon(
                request.named or request.worker,
                request.cordoned,
                by,
                request.reason,
                force=request.force,
            )
        except WorkerNameError as exc:
            raise BadRequest(str(exc)) from exc

    micro = await bus.add_service(
        bus.subjects.ops_service, version=VERSION, description="the roster's fleet verbs"
    )
    await bus.add_endpoint(
        micro,
        name="fleet-list",
        subject=bus.subjects.ops_fleet_list,
        kind=FleetListRequest,
        handler=fleet_list,
    )
    await bus.add_endpoint(
        micro,
        name="fleet-records",
        subject=bus.subjects.ops_fleet_records,
        kind=FleetListRequest,
        handler=fleet_records,
    )
    await bus.add_endpoint(
        micro,
        name="fleet-cordon",
        subject=bus.subjects.ops_fleet_cordon,
        kind=CordonRequest,
        handler=fleet_cordon,
    )
    return micro
