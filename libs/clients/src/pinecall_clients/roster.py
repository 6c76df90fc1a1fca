"""The roster's client: a worker's heartbeat, and the roster's rows and fleets rows, with one key.

One transport for each thing asked (``shared/DESIGN.md``, "The wire"):

=================  ======================================  =========  ============================
what               how                                     key        who asks
=================  ======================================  =========  ============================
:meth:`heartbeat`  ``POST /v1/fleet/heartbeat`` at the     fleet      a worker (it reaches the
                   roster's URL                                       roster's URL, not NATS)
:meth:`rows`       ``<ns>.ops.fleet.list`` over NATS       service    the dispatcher (each offer)
:meth:`fleets`     ``<ns>.ops.fleet.records`` over NATS    service    the dispatcher, the reaper
=================  ======================================  =========  ============================

The reads go over NATS: any roster replica answers (the ops service's queue group), with no URL
to know, as the operator's ``fleet list`` reads them. An operator key reads them too; a service key
is refused the operator's verbs (cordons), which this client does not ask.

Nothing here is retried: a heartbeat that gets no answer is followed by the next one, which says
everything again; a read that gets none leaves its caller with what it read last. Every failure is
a :class:`~pinecall_clients.errors.RosterError` (``RosterUnavailable``: nothing answered in time,
a 5xx, or an answer that is no reply; ``RosterRefused``: a 4xx, with its problem detail).
"""

from __future__ import annotations

from typing import TypeVar

import httpx
import msgspec

from pinecall_clients import http
from pinecall_clients.answers import read_answer
from pinecall_clients.errors import RosterRefused, RosterUnavailable
from pinecall_contracts.base import encode
from pinecall_contracts.fleet import (
    FleetListRequest,
    FleetRecords,
    HeartbeatReply,
    RosterSnapshot,
    WorkerHeartbeat,
)
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.errors import BusUnavailable, PinecallError

R = TypeVar("R", RosterSnapshot, FleetRecords)

READ_WITHIN_S = 2.0
"""A read of the roster over NATS waits this long for a replica's answer."""


class RosterClient:
    """The roster with one ``key``: over HTTP at ``base_url`` (``transport``, a test's in-process
    replica or a transport a test cuts, instead of the network) for the heartbeat, over ``bus`` for the reads.

    Give what the caller asks through: a worker gives ``base_url``, a service its ``bus``; asking
    through a transport not given is a ``TypeError``. Close with :meth:`aclose` (or ``async
    with``); the bus is the caller's, and stays open.
    """

    def __init__(
        self,
        key: str | None,
        *,
        base_url: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        bus: Bus | None = None,
    ) -> None:
        self.bus = bus
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.http = (
            http.client(base_url, transport=transport, headers=self._headers)
            if base_url is not None
            else None
        )

    async def __aenter__(self) -> RosterClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self.http is not None:
            await self.http.aclose()

    async def heartbeat(self, state: WorkerHeartbeat, *, timeout_s: float) -> HeartbeatReply:
        """Post one heartbeat; the roster's answer (whether the worker is cordoned, its fleet
        full). Raises ``RosterUnavailable`` (nothing answered within ``timeout_s``, a 5xx, an
        answer that is no ``HeartbeatReply``) or ``RosterRefused`` (a 4xx)."""
        if self.http is None:
            raise TypeError("this RosterClient has no roster URL: a heartbeat goes over HTTP")
        path = "/v1/fleet/heartbeat"
        sent = self.http.post(
            path,
            content=encode(state),
            headers={"content-type": "application/json"},
            timeout=timeout_s,
        )
        return await read_answer(
            sent,
            HeartbeatReply,
            who="the roster",
            path=path,
            unavailable=RosterUnavailable,
            refused=RosterRefused,
        )

    async def rows(self, fleet: str | None = None) -> RosterSnapshot:
        """Every fleet's workers and totals (or only ``fleet``'s), from any roster replica."""
        return await self._ask(self._bus().subjects.ops_fleet_list, fleet, RosterSnapshot)

    async def fleets(self, fleet: str | None = None) -> FleetRecords:
        """The fleets rows (each fleet's environment and LiveKit; or only ``fleet``'s)."""
        return await self._ask(self._bus().subjects.ops_fleet_records, fleet, FleetRecords)

    def _bus(self) -> Bus:
        if self.bus is None:
            raise TypeError("this RosterClient has no bus: the roster's rows are read over NATS")
        return self.bus

    async def _ask(self, subject: str, fleet: str | None, reply: type[R]) -> R:
        try:
            return await self._bus().request(
                subject,
                FleetListRequest(fleet=fleet),
                reply,
                headers=self._headers,
                timeout=READ_WITHIN_S,
            )
        except BusUnavailable as exc:
            raise RosterUnavailable(exc.detail) from exc
        except PinecallError as exc:
            if exc.status >= 500:
                raise RosterUnavailable(exc.detail, exc.status) from exc
            raise RosterRefused(exc.problem()) from exc
        except msgspec.MsgspecError as exc:
            raise RosterUnavailable(f"{subject} answered no {reply.__name__}: {exc}") from exc
