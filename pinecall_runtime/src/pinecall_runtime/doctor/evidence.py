"""Asking the platform what ``doctor`` needs, every question bounded and none fatal.

Over NATS, at once: the roster's ``fleet.list``, the dispatcher's ``dispatch.offers``,
call-log's ``calls.recordings-failed`` (the last hour's), ``$SRV.PING`` of call-log,
webhook-ingest and the reaper (webhook-ingest has nothing ``doctor`` reads but must be up),
and webhook-ingest's drops stream (counts per ``<environment>.<reason>``, the newest drop's
detail). From Postgres: each installed service's version table against its scripts (the entry
points ``pinecall_runtime.migrations``). A service that does not answer within ``timeout_s``,
or answers with an error, is an :class:`Unanswered`; so are NATS and Postgres. Only the operator
key being refused stops ``doctor`` (after every question is done): every verb would refuse it the
same. The services' migrations are loaded before any question is asked, so importing them never
holds the loop while an answer is timed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from importlib.metadata import entry_points
from typing import TypeVar

from pinecall_contracts.base import Contract
from pinecall_contracts.dispatch import OffersRequest, OffersSnapshot
from pinecall_contracts.fleet import FleetListRequest, RosterSnapshot
from pinecall_contracts.livekit import WebhookDropped
from pinecall_contracts.recordings import RecordingsFailedCount, RecordingsFailedRequest
from pinecall_contracts.subjects import unescape_token
from pinecall_runtime.doctor.findings import Drop, Evidence, Unanswered
from pinecall_runtime.doctor.recordings import WINDOW_MIN
from pinecall_servicekit import db, dburl
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.errors import (
    BusUnavailable,
    Forbidden,
    PinecallError,
    StoreUnavailable,
    Unauthorized,
)
from pinecall_servicekit.migrations import Migrations, MigrationStatus
from pinecall_servicekit.natsauth import redact
from pinecall_servicekit.operator import OperatorSettings, where_from

T = TypeVar("T")
R = TypeVar("R", bound=Contract)

SERVICES = ("roster", "dispatcher", "call-log", "webhook-ingest", "reaper")
DROPS_CAP = 10_000
"""webhook-ingest keeps at most this many drops a subject: a count at it means "at least"."""


def _serve(service: str) -> str:
    return (
        f"start {service} (pinecall-runtime {service} serve), or find why it does not reach "
        "NATS: its logs, its /readyz"
    )


JETSTREAM = "check that NATS runs JetStream (nats-server -js)"


def installed() -> dict[str, Migrations | str]:
    """Each installed service's migrations (entry points ``pinecall_runtime.migrations``), or
    why they cannot say where a database stands."""
    out: dict[str, Migrations | str] = {}
    for ep in entry_points(group="pinecall_runtime.migrations"):
        try:
            found = ep.load()
        except ImportError as exc:
            out[ep.name] = f"not told: {ep.value} does not load ({exc})"
            continue
        if isinstance(found, Migrations):
            out[ep.name] = found
        else:
            out[ep.name] = f"not told: {ep.value} is no Migrations (an older release)"
    return out


class Asking:
    """One ``doctor`` run's questions and the unanswered ones."""

    def __init__(self, settings: OperatorSettings, timeout_s: float) -> None:
        self.settings = settings
        self.timeout_s = timeout_s
        self.unanswered: list[Unanswered] = []
        self.refused: PinecallError | None = None
        """The operator key's refusal, raised once every question is done."""

    def _missing(self, service: str, asked: str, problem: str, todo: str = "") -> None:
        self.unanswered.append(
            Unanswered(service=service, asked=asked, problem=problem, todo=todo or _serve(service))
        )

    async def _answer(
        self, service: str, asked: str, question: Awaitable[T], todo: str = ""
    ) -> T | None:
        """The answer of ``question``, or None with ``service`` marked unanswered."""
        try:
            return await question
        except (Unauthorized, Forbidden) as exc:
            self.refused = exc
        except BusUnavailable:
            self._missing(
                service, asked, f"no replica answered {asked} in {self.timeout_s:g} s", todo
            )
        except PinecallError as exc:
            self._missing(service, asked, f"answered {asked} with {exc.code}: {exc.detail}", todo)
        return None

    async def _verb(
        self, bus: Bus, service: str, subject: str, request: Contract, reply: type[R]
    ) -> R | None:
        headers = {"Authorization": f"Bearer {self.settings.operator_key}"}
        question = bus.request(subject, request, reply, headers=headers, timeout=self.timeout_s)
        return await self._answer(service, subject, question)

    async def _ping(self, bus: Bus, service: str, name: str) -> None:
        await self._answer(service, bus.subjects.ping(name), bus.ping(name, timeout=self.timeout_s))

    async def drops(self, bus: Bus) -> list[Drop] | None:
        """Webhooks dropped in the last ten minutes, by environment and reason; None when the
        drops stream does not exist (no webhook-ingest of this release ever started here)."""
        stream = bus.subjects.webhook_drops_stream
        counts = await self._answer(
            "nats", stream, bus.counts(stream, bus.subjects.webhooks_dropped), JETSTREAM
        )
        if counts is None:
            return None
        prefix = bus.subjects.webhooks_dropped.removesuffix(">")
        out = []
        for subject, count in sorted(counts.items()):
            environment, reason = map(unescape_token, subject.removeprefix(prefix).split("."))
            last = None
            if reason != "duplicate":
                last = await self._answer(
                    "nats", stream, bus.last(stream, subject, WebhookDropped), JETSTREAM
                )
            out.append(
                Drop(
                    environment=environment,
                    reason=reason,
                    count=count,
                    detail=last.detail if last else "",
                    at_least=count >= DROPS_CAP,
                )
            )
        return out

    async def over_nats(
        self,
    ) -> tuple[
        RosterSnapshot | None,
        OffersSnapshot | None,
        list[Drop] | None,
        RecordingsFailedCount | None,
    ]:
        """The roster's fleets, the dispatcher's offers, the drops and the failed recordings,
        asked at once."""
        s = self.settings
        try:
            bus = await Bus.connect(
                s.nats_url, s.nats_namespace, name="doctor", connect_timeout_s=self.timeout_s
            )
        except BusUnavailable as exc:
            self._missing(
                "nats",
                redact(s.nats_url),
                f"no connection: {exc.detail}",
                f"check NATS, and {where_from('nats_url', settings=s) or 'PINECALL_NATS_URL'}",
            )
            return None, None, None, None
        try:
            failed_recordings = self._verb(
                bus,
                "call-log",
                bus.subjects.ops_recordings_failed,
                RecordingsFailedRequest(minutes=WINDOW_MIN),
                RecordingsFailedCount,
            )
            the_rest = asyncio.gather(
                self._verb(
                    bus, "roster", bus.subjects.ops_fleet_list, FleetListRequest(), RosterSnapshot
                ),
                self._verb(
                    bus,
                    "dispatcher",
                    bus.subjects.ops_dispatch_offers,
                    OffersRequest(),
                    OffersSnapshot,
                ),
                self._ping(bus, "call-log", bus.subjects.call_log_service),
                self._ping(bus, "webhook-ingest", bus.subjects.ingest_service),
                self._ping(bus, "reaper", bus.subjects.reaper_service),
                self.drops(bus),
            )
            (roster, offers, _, _, _, drops), failed = await asyncio.gather(
                the_rest, failed_recordings
            )
        finally:
            await bus.close()
        return roster, offers, drops, failed

    async def migrations(
        self, services: dict[str, Migrations | str]
    ) -> dict[str, MigrationStatus | str] | None:
        """Each service's standing; None (and Postgres unanswered) when the database does not
        answer within ``timeout_s``."""
        engine = db.create_engine(self.settings.database_url, pool_size=1)
        where = dburl.describe(self.settings.database_url)
        out: dict[str, MigrationStatus | str] = {}
        try:
            async with asyncio.timeout(self.timeout_s):
                for name, found in services.items():
                    out[name] = found if isinstance(found, str) else await found.status(engine)
        except (StoreUnavailable, TimeoutError) as exc:
            problem = (
                f"{exc.detail} at {where}"
                if isinstance(exc, StoreUnavailable)
                else f"{where} did not answer in {self.timeout_s:g} s"
            )
            said = where_from("database_url", settings=self.settings) or "PINECALL_DATABASE_URL"
            self._missing("postgres", where, problem, f"check Postgres, and {said}")
            return None
        finally:
            await engine.dispose()
        return out


async def gather(settings: OperatorSettings, timeout_s: float = 5.0) -> Evidence:
    """What the platform says now; each source bounded by ``timeout_s`` seconds.

    Raises ``Unauthorized``/``Forbidden`` when the operator key is refused (or not set).
    """
    if not settings.operator_key:
        raise Unauthorized("no operator key: set PINECALL_OPERATOR_KEY")
    services = installed()
    asking = Asking(settings, timeout_s)
    (roster, offers, drops, failed), schemas = await asyncio.gather(
        asking.over_nats(), asking.migrations(services)
    )
    if asking.refused is not None:
        raise asking.refused
    order = [*SERVICES, "nats", "postgres"]
    return Evidence(
        services=list(SERVICES),
        unanswered=sorted(asking.unanswered, key=lambda u: (order.index(u.service), u.asked)),
        roster=roster,
        offers=offers,
        drops=drops,
        migrations=schemas,
        recordings_failed=failed,
    )
