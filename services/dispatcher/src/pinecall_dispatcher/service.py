"""One dispatcher replica: the LiveKit stream's consumer, call-log's events, the sweep.

- The LiveKit stream (``<ns>_livekit``) is read with the durable consumer ``dispatcher``: one
  replica handles each event, a replica that restarts misses nothing, and events of one room are
  handled one after another on a replica.
- ``call.opened`` and ``call.ended`` arrive on core NATS in the queue group ``dispatcher`` (one
  replica each); one lost costs a room one re-offer check or a seat until the room ends.
- Every ``sweep_s`` (3 s) the replica sweeps the fleets with rooms waiting, and reads the rooms
  waiting per fleet for ``/metrics``; once in a while it prunes what is a week old.
- Every ``followup_every_s`` (5 s) its dialler takes call-log's call backs and dials the
  follow-ups due (:mod:`pinecall_dispatcher.followups.dialler`); a ``call.ended`` of a try's call
  gives the try its outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import platform
import re
import time
from collections.abc import Callable

from pinecall_clients.calllog import CallLogClient
from pinecall_clients.errors import CallLogError, LiveKitError
from pinecall_clients.roster import RosterClient
from pinecall_contracts.calls import CallEvent
from pinecall_contracts.dispatch import OffersSnapshot
from pinecall_contracts.ids import E164_PATTERN
from pinecall_contracts.livekit import LiveKitEvent
from pinecall_contracts.outbound import OutboundRequest
from pinecall_dispatcher import domain
from pinecall_dispatcher.admission import Admission
from pinecall_dispatcher.agents import Agents
from pinecall_dispatcher.deaths import Deaths
from pinecall_dispatcher.evals import VoiceEvals
from pinecall_dispatcher.followups.dialler import Dial, Dialler, DialOrder, LineNow, NotDialable
from pinecall_dispatcher.followups.views import WINDOW_S, with_followups
from pinecall_dispatcher.livekit import LiveKits
from pinecall_dispatcher.metrics import Metrics
from pinecall_dispatcher.numbers import Numbers
from pinecall_dispatcher.offering import Offering
from pinecall_dispatcher.outbound import Outbound, place_outbound
from pinecall_dispatcher.placing import Placing
from pinecall_dispatcher.roster import RosterView
from pinecall_dispatcher.settings import DispatcherSettings
from pinecall_dispatcher.store import Store
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.db import utcnow
from pinecall_servicekit.errors import PinecallError
from pinecall_servicekit.keys import KeyRing
from pinecall_servicekit.stream import consume

_log = logging.getLogger(__name__)
PRUNE_EVERY_S = 600.0


class DispatcherService:
    """The dispatcher of one replica. Start with :meth:`start`, stop with :meth:`stop`."""

    def __init__(
        self,
        settings: DispatcherSettings,
        bus: Bus,
        store: Store,
        keyring: KeyRing,
        metrics: Metrics | None = None,
        *,
        calls: CallLogClient,
        dial: Dial | None = None,
        clock: Callable[[], dt.datetime] = utcnow,
    ) -> None:
        """``calls`` is call-log with the service key: the agents rung for, admission's
        ``fleet.full``, the death handler's reads, ends and call backs, the call backs the
        dialler takes and its tries on the agents' logs. The roster is read over ``bus`` with the
        same key. ``dial`` places a follow-up's try (:class:`followups.dialler.Dial`; by default
        an outbound call, :meth:`place_followup`); ``clock`` is the dialler's (a test moves it)."""
        self.settings = settings
        self.bus = bus
        self.store = store
        self.keyring = keyring
        self.metrics = metrics or Metrics()
        self.livekits_keys = settings.keys()
        self.livekits = LiveKits(self.livekits_keys)
        self.roster = RosterView(
            RosterClient(settings.service_key, bus=bus), max_age_s=settings.roster_max_age_s
        )
        self.offering = Offering(settings, store, self.livekits, self.roster, self.metrics)
        self.deaths = Deaths(store, self.offering, calls)
        self.agents = Agents(calls, cache_s=settings.agent_cache_s)
        """Which agents exist (call-log's answers, remembered): the token endpoint's and the
        rings'."""
        self.placing = Placing(
            store,
            self.livekits,
            self.roster,
            self.offering,
            self.deaths,
            self.agents,
            self.metrics,
        )
        self.admission = Admission(settings, store, self.roster, calls, self.metrics, self.agents)
        self.numbers = Numbers(store, self.livekits, self.roster, self.agents)
        """An org's phone numbers, their trunks and rules on each environment's LiveKit."""
        self.evals = VoiceEvals(settings, self.admission, bus, calls)
        """The simulated callers of ``POST /v1/evals/voice``."""
        self.outbound = Outbound(
            settings, store, self.admission, self.livekits, self.offering, self.metrics
        )
        """Outbound calls (``place_outbound``): the endpoint's and the follow-ups'."""
        self.dialler = Dialler(
            store.followups,
            calls,
            self.line,
            dial or self.place_followup,
            replica=f"{platform.node()}.{os.getpid()}.{id(self):x}",
            rules=settings.followup_rules(),
            clock=clock,
        )
        self.consuming = asyncio.Event()
        """Set once the LiveKit stream's consumer is bound."""
        self._tasks: list[asyncio.Task[None]] = []
        self._soon: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        subjects = self.bus.subjects
        await self.keyring.start()
        self.roster.on_unheld = self._sweep_soon
        await self.roster.follow(self.bus)
        stream = subjects.livekit_stream_settings  # as webhook-ingest makes it too
        await self.bus.ensure_stream(
            stream.name,
            list(stream.subjects),
            duplicate_window_s=stream.duplicate_window_s,
            max_age_s=stream.max_age_s,
        )
        for what in ("opened", "ended"):
            await self.bus.subscribe(
                subjects.call_events(what),
                CallEvent,
                self._call_event,
                queue="dispatcher",
            )
        self._tasks = [
            asyncio.create_task(
                consume(
                    self.bus,
                    stream=subjects.livekit_stream,
                    subject=subjects.livekit_events,
                    durable=subjects.livekit_consumer,
                    kind=LiveKitEvent,
                    handler=self.placing.livekit_event,
                    key=lambda e: f"{e.environment}/{e.room}",
                    ready=self.consuming,
                ),
                name="dispatcher-consumer",
            ),
            asyncio.create_task(self._sweeping(), name="dispatcher-sweep"),
            asyncio.create_task(self._following(), name="dispatcher-followups"),
        ]
        async with asyncio.timeout(10):
            await self.consuming.wait()

    async def stop(self) -> None:
        for task in [*self._tasks, *self._soon]:
            task.cancel()
        for task in [*self._tasks, *self._soon]:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.evals.aclose()
        await self.offering.aclose()
        await self.livekits.aclose()

    async def _call_event(self, event: CallEvent) -> None:
        try:
            await self.placing.call_event(event)
            if event.what == "ended":
                await self.dialler.ended(event.call, event.outcome)
        except PinecallError as exc:
            _log.warning("call %s %s not applied: %s", event.call, event.what, exc)

    async def place_followup(self, order: DialOrder) -> str:
        """A follow-up's try placed as an outbound call (:func:`outbound.place_outbound`), its
        try key the request's id: a try dialled again is the same call. A number that is not
        E.164 is ``NotDialable`` (given up)."""
        if not re.match(E164_PATTERN, order.to):
            raise NotDialable(
                f"{order.to!r} is not an E.164 number: a + then 7 to 15 digits, no leading 0 (+15550100)"
            )
        request = OutboundRequest(
            agent=order.agent, to=order.to, org=order.org, context=order.context, id=order.key
        )
        placed = await place_outbound(self.outbound, request, environment=order.environment)
        return placed.call

    async def line(self, environment: str) -> LineNow:
        """The environment's line for a follow-up, as admission reads it (seed 003): its fleet
        unheard in ``not_ready_s`` (or none) is ``not_ready``; no seat free is ``full``."""
        record = await self.roster.fleet_of(environment)
        if record is None or environment not in self.livekits_keys:
            return LineNow("not_ready")
        rows = await self.roster.rows(record.name)
        offered, held = await self.store.offers.promised(
            record.name, utcnow(), self.settings.max_call_seconds
        )
        pending = domain.not_counted(rows, offered, held)
        rules = self.settings.rules()
        verdict = domain.admission(rows, pending, rules)
        if verdict == "not_ready":
            return LineNow("not_ready")
        free = sum(
            domain.seats_free(r, pending) for r in domain.candidates(rows, pending, rules=rules)
        )
        return LineNow("seats", free) if free > 0 else LineNow("full")

    async def offers(self, fleet: str | None = None) -> OffersSnapshot:
        """Each fleet's rooms waiting, refusals and follow-ups; the rooms kept past ``kept_s``."""
        now = utcnow()
        kept = await self.store.views.kept(now, self.settings.kept_s)
        fleets = await self.store.views.fleets(now, self.settings.reoffer_s, fleet)
        counts = await self.store.followups.counts(now, WINDOW_S)
        return OffersSnapshot(
            fleets=await with_followups(fleets, counts, self.roster, fleet),
            kept=[k for k in kept if fleet in (None, k.fleet)],
            at=now,
        )

    async def sweep(self) -> None:
        """One sweep: every fleet with a room waiting, then the rooms waiting for /metrics."""
        for fleet in await self.store.offers.fleets_waiting():
            await self.offering.sweep(fleet)
        self.metrics.waiting(await self.store.views.fleets(utcnow(), self.settings.reoffer_s))

    def _sweep_soon(self, fleet: str) -> None:
        """Sweep ``fleet`` now, not at the next tick: a worker LiveKit dropped was offered rooms
        whose jobs will never come (:attr:`domain.Room.unheld`)."""

        async def sweep() -> None:
            try:
                await self.offering.sweep(fleet)
            except (PinecallError, LiveKitError) as exc:
                _log.warning("sweep of %s: %s", fleet, exc)

        task = asyncio.create_task(sweep(), name=f"sweep-{fleet}")
        self._soon.add(task)
        task.add_done_callback(self._soon.discard)

    async def _sweeping(self) -> None:
        pruned = time.monotonic()
        while True:
            try:
                await self.sweep()
                if time.monotonic() - pruned > PRUNE_EVERY_S:
                    await self.store.prune(utcnow())
                    pruned = time.monotonic()
            except (PinecallError, LiveKitError) as exc:
                _log.warning("sweep: %s", exc)
            except Exception:  # a sweep that fails must not stop the next one
                _log.exception("sweep failed")
            await asyncio.sleep(self.settings.sweep_s)  # the sweep's own cadence

    async def _following(self) -> None:
        while True:
            # a round after the first wait: the roster is heard before any seat is counted
            await asyncio.sleep(self.settings.followup_every_s)  # the dialler's own cadence
            try:
                await self.dialler.tick()
                self.metrics.followups(await self.store.followups.counts(utcnow(), WINDOW_S))
            except (PinecallError, LiveKitError, CallLogError) as exc:
                _log.warning("follow-ups: %s", exc)
            except Exception:  # a round that fails must not stop the next one
                _log.exception("follow-ups failed")
