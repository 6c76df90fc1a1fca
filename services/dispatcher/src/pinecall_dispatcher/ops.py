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
from pinecall_contracts.keys import KeyInfo
from pinecall_dispatcher.service import DispatcherService
from pinecall_servicekit.verbs import Verb, serve_verbs

VERSION = "0.1.0"


async def start_ops(service: DispatcherService) -> Service:
    """Serve the ops verbs of ``service``; stop the returned service on shutdown."""
    bus = service.bus

    async def offers(request: OffersRequest, key: KeyInfo) -> OffersSnapshot:
        return await service.offers(request.fleet)

    async def journal(request: JournalRequest, key: KeyInfo) -> Journal:
        return await service.store.views.journal(request.call)

    return await serve_verbs(
        bus,
        service.keyring,
        name=bus.subjects.dispatch_service,
        version=VERSION,
        description="the dispatcher's verbs",
        verbs=[
            Verb("dispatch-offers", bus.subjects.ops_dispatch_offers, OffersRequest, offers),
            Verb("dispatch-journal", bus.subjects.ops_dispatch_journal, JournalRequest, journal),
        ],
    )
