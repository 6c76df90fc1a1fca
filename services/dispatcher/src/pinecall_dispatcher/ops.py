"""The dispatcher's ops verbs over NATS: a ``nats.micro`` service on every replica (NATS ADR-32).

``<ns>.ops.dispatch.offers`` (OffersRequest → OffersSnapshot: each fleet's rooms waiting in the
last ten minutes, refusals at admission, rooms kept in offers past a minute; what ``fleet list``
and ``doctor`` read) and ``<ns>.ops.dispatch.journal`` (JournalRequest → Journal: what
``logs <call>`` shows of the offers), each with an operator key in ``Authorization``. Replicas share
a queue group: one answers each request. ``$SRV.PING.<ns>-dispatcher`` finds them all.
"""

from __future__ import annotations

from nats.micro.service import Service

from pinecall_contracts.dispatch import Journal, JournalRequest, OffersRequest, OffersSnapshot
from pinecall_dispatcher.service import DispatcherService
from pinecall_servicekit.keys import OPERATOR, bearer

VERSION = "0.1.0"


async def start_ops(service: DispatcherService) -> Service:
    """Serve the ops verbs of ``service``; stop the returned service on shutdown."""
    bus = service.bus

    async def operator(headers: dict[str, str]) -> None:
        await service.keyring.verify(bearer(headers.get("Authorization")), kinds=OPERATOR)

    async def offers(request: OffersRequest, headers: dict[str, str]) -> OffersSnapshot:
        await operator(headers)
        return await service.offers(request.fleet)

    async def journal(request: JournalRequest, headers: dict[str, str]) -> Journal:
        await operator(headers)
        return await service.store.views.journal(request.call)

    micro = await bus.add_service(
        bus.subjects.dispatch_service, version=VERSION, description="the dispatcher's verbs"
    )
    await bus.add_endpoint(
        micro,
        name="dispatch-offers",
        subject=bus.subjects.ops_dispatch_offers,
        kind=OffersRequest,
        handler=offers,
    )
    await bus.add_endpoint(
        micro,
        name="dispatch-journal",
        subject=bus.subjects.ops_dispatch_journal,
        kind=JournalRequest,
        handler=journal,
    )
    return micro
