"""The seeds' capacity and ghost experiments, side by side: LiveKit choosing and the runtime
choosing (seed 000, "Capacity is counted in calls", "A machine that vanishes is worse"; issue 7,
acceptance 1, 2 and 9).

- **capacity**: two workers of 8 seats, 18 calls one after another. LiveKit choosing, the workers
  report ``calls ÷ seats`` (the seed's before): LiveKit's 0.7 load threshold stops each at 6 of 8,
  and the rest are silent. The runtime choosing, real workers reporting LiveKit's scale: 8 of 8
  each, and the two calls past the fleet's seats go to the overflow.
- **ghost**: two workers of 16 seats, 16 calls a second apart, the second worker's machine gone at
  the 8th (LiveKit keeps its socket; the roster hears nothing). LiveKit choosing keeps drawing the
  ghost: each call offered to it is lost. The runtime choosing offers the ghost nothing once it is
  unheard 12 s, and the rooms it was offered before are offered again at 12 s to the other.

Each mode is a row of the seeds' table: calls placed, answered by an agent, answered by the
overflow, silent, seats used (of the fleet's seats), and the seats used over the mode's run
(:class:`SeatsOverTime`), which ``lab run … --plot`` draws (:mod:`pinecall_loadlab.plots`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import msgspec
from livekit import api

from pinecall_contracts.ids import is_overflow
from pinecall_dispatcher.settings import DispatcherSettings
from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.labagents import LabWorkers, LoadReport
from pinecall_loadlab.scenarios import livekit_choosing, runtime_choosing
from pinecall_loadlab.scenarios.chain import ChainConfig, runtime_chain

AGENT = 4  # ParticipantInfo.Kind.AGENT

if TYPE_CHECKING:
    from pinecall_loadlab.scenarios.death import DeathExperiment


class Mode(msgspec.Struct, kw_only=True):
    """One mode's row of the table."""

    mode: str
    placed: int
    answered_by_agent: int
    answered_by_overflow: int
    silent: int
    seats_used: int
    seats: int
    detail: dict[str, int] = msgspec.field(default_factory=dict)
    seats_over_time: list[tuple[float, int]] = msgspec.field(default_factory=list)
    """Seats used as the mode ran: (seconds since it began, seats used) at each change
    (:class:`SeatsOverTime`); ``lab run … --plot`` draws it."""


class SeatsOverTime:
    """Seats used over a mode's run, read from the stand-in's events as they happen: an agent
    joining a room takes a seat, unless the room's last CreateDispatch was to an overflow (which
    takes none), and gives it back when it leaves. One per experiment (it listens from its
    making on); :meth:`start` and :meth:`stop` bound each mode."""

    def __init__(self, lk: StandIn) -> None:
        self.points: list[tuple[float, int]] = []
        self._t0: float | None = None
        self._to: dict[str, str] = {}
        self._seated: set[tuple[str, str]] = set()
        lk.events.listen(self._heard)

    def start(self) -> None:
        self._t0, self.points, self._seated = time.time(), [(0.0, 0)], set()

    def stop(self) -> list[tuple[float, int]]:
        """The mode's points, the last at its end (the seats it held then)."""
        if self._t0 is not None:
            self.points.append((round(time.time() - self._t0, 3), len(self._seated)))
        self._t0 = None
        return self.points

    def _heard(self, event: object) -> None:
        if isinstance(event, ev.DispatchCreated):
            self._to[event.room] = event.agent_name
        if self._t0 is None:
            return
        if isinstance(event, ev.ParticipantJoined) and event.kind == AGENT:
            if not is_overflow(self._to.get(event.room, "")):
                self._seated.add((event.room, event.identity))
        elif isinstance(event, ev.ParticipantLeft) and event.kind == AGENT:
            self._seated.discard((event.room, event.identity))
        else:
            return
        if len(self._seated) != self.points[-1][1]:
            self.points.append((round(time.time() - self._t0, 3), len(self._seated)))


class Experiment(msgspec.Struct, kw_only=True):
    experiment: str
    modes: list[Mode]


@dataclass(kw_only=True)
class Setup:
    """What an experiment runs on, and how fast (``interval_s`` 1 is the seeds' second apart)."""

    lk: StandIn
    config: ChainConfig
    interval_s: float = 1.0
    settle_s: float = 90.0
    dispatcher: dict[str, float] = field(default_factory=dict)
    quiet_s: float = 10.0
    """death: how long a caller who hears nothing after its agent's loss is listened to before
    it counts as silent, where nothing is coming (LiveKit choosing)."""


def _runtime_row(
    answered: list[runtime_choosing.Answered], seats: int, detail: dict[str, int] | None = None
) -> Mode:
    overflow = sum(a.by is not None and is_overflow(a.by) for a in answered)
    by_agent = sum(a.by is not None for a in answered) - overflow
    return Mode(
        mode="runtime_choosing",
        placed=len(answered),
        answered_by_agent=by_agent,
        answered_by_overflow=overflow,
        silent=sum(a.by is None for a in answered),
        seats_used=by_agent,
        seats=seats,
        detail=detail or {},
    )


def _livekit_row(
    calls: list[livekit_choosing.Call], seats: int, detail: dict[str, int] | None = None
) -> Mode:
    answered = sum(c.answered for c in calls)
    return Mode(
        mode="livekit_choosing",
        placed=len(calls),
        answered_by_agent=answered,
        answered_by_overflow=0,
        silent=len(calls) - answered,
        seats_used=answered,
        seats=seats,
        detail=detail or {},
    )


@contextlib.asynccontextmanager
async def _livekit_choosing(setup: Setup) -> AsyncIterator[tuple[LabWorkers, api.LiveKitAPI]]:
    """Lab workers on the stand-in and livekit-api, for the mode where LiveKit chooses."""
    lab = LabWorkers(setup.lk, setup.config.api_key, setup.config.api_secret)
    lkapi = api.LiveKitAPI(setup.lk.url, setup.config.api_key, setup.config.api_secret)
    try:
        yield lab, lkapi
    finally:
        await lab.aclose()
        await lkapi.aclose()


async def capacity(
    setup: Setup, *, workers: int = 2, seats: int = 8, calls: int = 18
) -> Experiment:
    lk = setup.lk
    seated = SeatsOverTime(lk)
    async with _livekit_choosing(setup) as (lab, lkapi):
        for _ in range(workers):
            await lab.start(
                agent_name="capacity-lk", seats=seats, report=LoadReport.CALLS_OVER_SEATS
            )
        seated.start()
        placed = await livekit_choosing.place_calls(
            lk, lkapi, agent_name="capacity-lk", calls=calls, interval_s=setup.interval_s
        )
        took = Counter(c.offered_to[-1] for c in placed if c.answered)
        livekit = _livekit_row(
            placed, workers * seats, {f"worker_{i + 1}": n for i, n in enumerate(took.values())}
        )
        livekit.seats_over_time = seated.stop()
    async with runtime_chain(lk, _with(setup.config, setup.dispatcher)) as chain:
        for i in range(workers):
            await chain.worker(f"cap-{i}", seats=seats)
        await chain.overflow()
        seated.start()
        answered, callers = await runtime_choosing.place_calls(
            chain,
            prefix="capacity",
            calls=calls,
            settle_each=True,
            interval_s=setup.interval_s,
            settle_s=setup.settle_s,
        )
        took = Counter(a.by for a in answered if a.by and not is_overflow(a.by))
        runtime = _runtime_row(
            answered, workers * seats, {f"worker_{i + 1}": n for i, n in enumerate(took.values())}
        )
        runtime.seats_over_time = seated.stop()
        for c in callers:
            await c.leave()
    return Experiment(experiment="capacity", modes=[runtime, livekit])


async def ghost(
    setup: Setup, *, seats: int = 16, calls: int = 16, vanish_at: int = 8
) -> Experiment:
    lk = setup.lk
    ghosts: set[str] = set()
    seated = SeatsOverTime(lk)
    async with _livekit_choosing(setup) as (lab, lkapi):
        await lab.start(agent_name="ghost-lk", seats=seats)
        frozen = await lab.start(agent_name="ghost-lk", seats=seats)
        seated.start()

        async def freeze(i: int) -> None:
            if i == vanish_at - 1:
                lk.freeze(frozen)
                ghosts.add(frozen)

        placed = await livekit_choosing.place_calls(
            lk,
            lkapi,
            agent_name="ghost-lk",
            calls=calls,
            interval_s=setup.interval_s,
            ghosts=ghosts,
            before_call=freeze,
        )
        livekit = _livekit_row(
            placed,
            2 * seats,
            {
                "offered_to_ghost_once_gone": sum(
                    frozen in c.offered_to for c in placed[vanish_at - 1 :]
                ),
                "lost_to_ghost": sum(frozen in c.offered_to and not c.answered for c in placed),
            },
        )
        livekit.seats_over_time = seated.stop()
        lk.thaw(frozen)
    async with runtime_chain(lk, _with(setup.config, setup.dispatcher)) as chain:
        await chain.worker("ghost-a", seats=seats)
        b = await chain.worker("ghost-b", seats=seats)
        await chain.overflow()
        vanished_at = [0.0]
        seated.start()

        async def vanish(i: int) -> None:
            if i == vanish_at - 1:
                b.vanish()
                vanished_at[0] = time.time()

        answered, callers = await runtime_choosing.place_calls(
            chain,
            prefix="ghost",
            calls=calls,
            interval_s=setup.interval_s,
            settle_s=setup.settle_s,
            before_call=vanish,
        )
        detail = _ghost_detail(chain.lk, b.name, vanished_at[0], chain.service.settings)
        runtime = _runtime_row(answered, 2 * seats, detail)
        runtime.seats_over_time = seated.stop()
        for c in callers:
            await c.leave()
    return Experiment(experiment="ghost", modes=[runtime, livekit])


def _ghost_detail(
    lk: StandIn, ghost: str, vanished_at: float, rules: DispatcherSettings
) -> dict[str, int]:
    """Offers to the ghost once its machine was gone; the rooms of those offered again to
    another, and how many of those sooner than the re-offer time after the ghost's offer; offers
    to the ghost made once it was unheard ``heard_s`` (the rules say none of either)."""
    created = lk.events.of(ev.DispatchCreated, lambda e: e.room.startswith("ghost-"))
    to_ghost = {d.room: d for d in created if d.agent_name == ghost and d.at >= vanished_at}
    again = {d.room: d for d in created if d.room in to_ghost and d.agent_name != ghost}
    return {
        "offered_to_ghost_once_gone": len(to_ghost),
        "reoffered_to_the_other": len(again),
        "reoffered_sooner": sum(
            d.at - to_ghost[room].at < rules.reoffer_s for room, d in again.items()
        ),
        "offered_to_ghost_once_unheard": sum(
            d.at > vanished_at + rules.heard_s for d in to_ghost.values()
        ),
    }


def _with(config: ChainConfig, dispatcher: dict[str, float]) -> ChainConfig:
    return ChainConfig(**{**config.__dict__, "dispatcher": {**config.dispatcher, **dispatcher}})


async def run(name: str, setup: Setup) -> Experiment | DeathExperiment:
    """Run the experiment ``name`` (``capacity``, ``ghost`` or ``death``, :mod:`.death`)."""
    from pinecall_loadlab.scenarios.death import death

    experiments: dict[str, Callable[[Setup], Awaitable[Experiment | DeathExperiment]]] = {
        "capacity": capacity,
        "ghost": ghost,
        "death": death,
    }
    experiment = experiments[name]
    async with asyncio.timeout(600):
        return await experiment(setup)
