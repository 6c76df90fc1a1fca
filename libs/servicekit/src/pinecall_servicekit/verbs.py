"""A service's ops verbs over NATS: one ``nats.micro`` service, each verb an endpoint that asks for
a key (NATS ADR-32; issue 15, item 6).

A verb's request carries the key in its ``Authorization: Bearer <key>`` header, as on HTTP. Each
request is decoded first (400 for one that is not the verb's request), then its key verified
(401) and checked by the one policy for the verb's permission (:data:`.registry.VERBS`; 403
saying what is missing), then answered; an error travels as ``Nats-Service-Error-Code`` with the problem detail
(:meth:`Bus.add_endpoint <pinecall_servicekit.bus.Bus.add_endpoint>`). Replicas share a queue
group, so one answers each request, and ``$SRV.PING.<name>`` finds them all.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from nats.micro.service import Service

from pinecall_contracts.base import Contract
from pinecall_contracts.keys import KeyInfo
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.keys import KeyRing, bearer
from pinecall_servicekit.policy import Target, check
from pinecall_servicekit.registry import VERBS

C = TypeVar("C", bound=Contract)


@dataclass(frozen=True)
class Verb(Generic[C]):
    """One verb: the endpoint ``name`` on ``subject``, whose requests are ``kind``; ``answer``
    gets the request and the key that asked. A service's verbs read as a table, one a line:
    ``Verb("fleet-list", subjects.ops_fleet_list, FleetListRequest, fleet_list)``."""

    name: str
    subject: str
    kind: type[C]
    answer: Callable[[C, KeyInfo], Awaitable[Contract]]


async def serve_verbs(
    bus: Bus,
    keyring: KeyRing,
    *,
    name: str,
    version: str,
    description: str,
    verbs: Iterable[Verb[Any]],
) -> Service:
    """Serve ``verbs`` as the ``nats.micro`` service ``name``; stop the returned service when the
    service stops (``Opened.on_close``)."""
    micro = await bus.add_service(name, version=version, description=description)
    for verb in verbs:
        await bus.add_endpoint(
            micro,
            name=verb.name,
            subject=verb.subject,
            kind=verb.kind,
            handler=_asking_for_a_key(verb, keyring),
        )
    return micro


def _asking_for_a_key(
    verb: Verb[C], keyring: KeyRing
) -> Callable[[C, dict[str, str]], Awaitable[Contract]]:
    permission = VERBS[verb.name]  # a verb with no line in the registry never starts

    async def handler(request: C, headers: dict[str, str]) -> Contract:
        holder = await keyring.holder(bearer(headers.get("Authorization")))
        check(holder, permission, Target(environment=_environment(request)))
        return await verb.answer(request, holder.key)

    return handler


def _environment(request: Contract) -> str | None:
    """The environment a verb's request names, if it names one (its ``environment`` field)."""
    environment = getattr(request, "environment", None)
    return environment if isinstance(environment, str) else None
