"""A worker that dies, the runtime choosing and LiveKit choosing (seed 000, "A worker that dies";
issue 8, acceptance 3): ``pinecall-runtime lab run death``.

Both modes run real worker processes (``pinecall-runtime worker start``: the PROCESS executor, lab
rooms, the real ``answer`` job on the vendor fakes, the real ``sentence`` job) on the chain
(:mod:`.chain`). Each caller is a SIP caller that asks one question and hears the answer, so the
worker's log of the call has entries to follow on from; then the worker is SIGKILLed. Its job
processes find their parent gone and exit; their room connections end without a goodbye, and
LiveKit says each agent left with CONNECTION_TIMEOUT ``connection_timeout_s`` later.

- **runtime choosing**: two workers, ``a`` of 4 seats and ``b`` of 8 (the dispatcher offers ``b``
  every call: the most seats free). ``b`` is killed; the dispatcher ends each call drained, calls
  the caller back, and offers the sentence to ``a``, which says it, deletes the room and seals.
- **LiveKit choosing**: the calls are dispatched by LiveKit straight to ``a``'s name (the
  dispatcher never places them); ``a`` is killed. LiveKit has no death handler and nothing in the
  runtime knows those rooms: each caller hears nothing for ``quiet_s`` (and would until they hang
  up, their calls open on the log until the reaper's five quiet minutes).

Each mode reports calls placed, answered by an agent, sentenced (heard the sentence after the
loss), silent, logs with a gap, and the seconds from each agent's ``participant_left`` webhook to
the first audio of the sentence the caller heard, with every call's detail (:class:`LostCall`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec

from pinecall_contracts.base import decode
from pinecall_contracts.dispatch import JobOffer
from pinecall_labroom import LabRoom
from pinecall_loadlab.callers import LINES, Say, Step, WaitForAgent, play
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.callers import sip_call
from pinecall_loadlab.scenarios import runtime_choosing
from pinecall_loadlab.scenarios.callers_lost import (
    AGENT,
    Ears,
    LostCall,
    agent_of,
    logged,
    lost_call,
)
from pinecall_loadlab.scenarios.chain import Chain, ChainConfig, chain_call_log, runtime_chain
from pinecall_loadlab.scenarios.labworkers import ProcessWorker, start_process
from pinecall_loadlab.vendors import Reply, VendorFakes, VendorsConfig
from pinecall_servicekit.bus import Bus
from pinecall_worker.offer import derived_call_id

if TYPE_CHECKING:
    from pinecall_loadlab.scenarios.experiments import Setup

ANSWER = "Your order arrives on Thursday."
TURN: list[Step] = [Say(line="question"), WaitForAgent(until_quiet_s=0.5, timeout_s=60)]


class DeathMode(msgspec.Struct, kw_only=True):
    """One mode's row."""

    mode: str
    placed: int
    answered_by_agent: int
    lost: int
    """Calls in flight on the worker that was killed."""
    sentenced: int
    silent: int
    gaps: int
    webhook_to_sentence_s: list[float]
    calls: list[LostCall]


class DeathExperiment(msgspec.Struct, kw_only=True):
    experiment: str
    modes: list[DeathMode]


@dataclass(kw_only=True)
class Answered:
    """A call answered and talked to, before its worker is lost."""

    room: str
    call: str
    caller: LabRoom
    identity: str
    """Its agent's participant identity."""
    by: str
    written: int


def in_room(room: str) -> Callable[[ev.DispatchCreated], bool]:
    return lambda e: e.room == room


def assigned(room: str) -> Callable[[ev.JobRequestEnded], bool]:
    return lambda e: e.room == room and e.outcome == "assigned"


def agent_in(room: str) -> Callable[[ev.ParticipantJoined], bool]:
    return lambda e: e.room == room and e.kind == AGENT


def row(mode: str, placed: int, answered: int, lost: list[LostCall]) -> DeathMode:
    """The mode's row: ``placed`` calls, ``answered`` by an agent, then ``lost`` with it."""
    heard = [c.webhook_to_sentence_s for c in lost if c.webhook_to_sentence_s is not None]
    return DeathMode(
        mode=mode,
        placed=placed,
        answered_by_agent=answered,
        lost=len(lost),
        sentenced=len(heard),
        silent=sum(c.webhook_to_sentence_s is None for c in lost),
        gaps=sum(c.gap for c in lost),
        webhook_to_sentence_s=sorted(heard),
        calls=lost,
    )


def placed_calls(
    chain: Chain, answered: list[runtime_choosing.Answered], callers: list[LabRoom]
) -> list[tuple[str, str, LabRoom]]:
    """``(room, call, caller)`` of calls the dispatcher placed (its first JobOffer's call)."""
    placed = []
    for call, caller in zip(answered, callers, strict=True):
        created = chain.lk.events.of(ev.DispatchCreated, in_room(call.room))
        placed.append((call.room, decode(created[0].metadata, JobOffer).call, caller))
    return placed


async def talked(chain: Chain, bus: Bus, calls: list[tuple[str, str, LabRoom]]) -> list[Answered]:
    """Each ``(room, call, caller)`` says its question and hears the answer, until the answer is
    on the call's log; who answered and the count its writer reached."""
    await asyncio.gather(*(play(caller, TURN) for _, _, caller in calls))
    out = []
    for room, call, caller in calls:
        log = await logged(chain, bus, call, "turn.agent")
        identity, by = await agent_of(chain, room)
        written = sum(e.counted is not None for e in log.entries)
        out.append(
            Answered(room=room, call=call, caller=caller, identity=identity, by=by, written=written)
        )
    return out


async def lose(
    chain: Chain,
    bus: Bus,
    worker: ProcessWorker,
    calls: list[Answered],
    settle_s: float,
    quiet_s: float,
) -> list[LostCall]:
    """SIGKILL ``worker`` with ``calls`` in flight; what became of each."""
    ears = [Ears(a.caller, a.identity) for a in calls]
    worker.kill()
    killed_at = time.time()
    try:
        return list(
            await asyncio.gather(
                *(
                    lost_call(
                        chain,
                        bus,
                        room=a.room,
                        call=a.call,
                        identity=a.identity,
                        answered_by=a.by,
                        written=a.written,
                        ears=e,
                        lost_at=killed_at,
                        settle_s=settle_s,
                        quiet_s=quiet_s,
                    )
                    for a, e in zip(calls, ears, strict=True)
                )
            )
        )
    finally:
        for e in ears:
            await e.aclose()


async def runtime_mode(
    chain: Chain, bus: Bus, fakes: VendorFakes, b: ProcessWorker, *, settle_s: float
) -> DeathMode:
    """Four calls placed by the dispatcher and talked to: by its rules (the most seats free,
    ties by name) three go to ``b`` (8 seats) and one to ``a`` (6), so the survivor holds a call
    of its own as a fleet's workers do (an idle worker accepts at most its warm processes in one
    instant: livekit-agents' guess of a call's weight, seed 000 "Capacity is counted in calls").
    ``b`` is killed."""
    fakes.deepgram.script(*[LINES["question"]] * 4)
    fakes.anthropic.script(*[Reply(text=ANSWER)] * 4)
    answered, callers = await runtime_choosing.place_calls(
        chain, prefix="death", calls=4, settle_each=True, settle_s=settle_s
    )
    talking = await talked(chain, bus, placed_calls(chain, answered, callers))
    lost = await lose(chain, bus, b, [t for t in talking if t.by == b.name], settle_s, settle_s)
    for caller in callers:
        await caller.leave()
    return row("runtime_choosing", len(answered), sum(c.by is not None for c in answered), lost)


async def livekit_mode(
    chain: Chain,
    bus: Bus,
    fakes: VendorFakes,
    a: ProcessWorker,
    *,
    calls: int,
    settle_s: float,
    quiet_s: float,
) -> DeathMode:
    """``calls`` calls dispatched by LiveKit straight to ``a``'s name, talked to; ``a``
    killed."""
    fakes.deepgram.script(*[LINES["question"]] * calls)
    fakes.anthropic.script(*[Reply(text=ANSWER)] * calls)
    placed = []
    for i in range(calls):
        room = f"death-lk-{i + 1}"
        caller = await sip_call(
            chain.livekit,
            chain.lk.url,
            chain.config.api_key,
            chain.config.api_secret,
            room=room,
            fleet=a.name,
            phone=f"+1666{i:06d}",
        )
        async with asyncio.timeout(settle_s):
            [job] = await chain.lk.events.wait_for(ev.JobRequestEnded, assigned(room))
            await chain.lk.events.wait_for(ev.ParticipantJoined, agent_in(room))
        placed.append((room, derived_call_id(job.job_id), caller))
    talking = await talked(chain, bus, placed)
    lost = await lose(chain, bus, a, talking, settle_s, quiet_s=quiet_s)
    for _, _, caller in placed:
        await caller.leave()
    return row("livekit_choosing", calls, len(talking), lost)


async def death(setup: Setup, *, livekit: bool = True) -> DeathExperiment:
    """Run both modes on ``setup`` (the runtime's first, then LiveKit's on the worker that
    survived). A caller who hears nothing after the loss is listened to ``setup.quiet_s`` in
    LiveKit's mode, where nothing comes, and up to ``setup.settle_s`` in the runtime's."""
    quiet_s = setup.quiet_s
    config = ChainConfig(
        **{**setup.config.__dict__, "dispatcher": {**setup.config.dispatcher, **setup.dispatcher}}
    )
    async with (
        VendorFakes(VendorsConfig(port=0)) as fakes,
        chain_call_log(config) as call_log,
        runtime_chain(setup.lk, config, call_log=call_log) as chain,
        contextlib.AsyncExitStack() as stack,
    ):
        bus = await Bus.connect(config.nats_url, config.namespace, name="lab-death")
        stack.push_async_callback(bus.close)
        a, b = await asyncio.gather(
            start_process(chain, stack, host="death-a", seats=6, vendors=fakes),
            start_process(chain, stack, host="death-b", seats=8, vendors=fakes),
        )
        modes = [await runtime_mode(chain, bus, fakes, b, settle_s=setup.settle_s)]
        if livekit:
            modes.append(
                await livekit_mode(
                    chain, bus, fakes, a, calls=3, settle_s=setup.settle_s, quiet_s=quiet_s
                )
            )
    return DeathExperiment(experiment="death", modes=modes)


def death_table(result: DeathExperiment) -> str:
    """The experiment as the CLI prints it: a row per mode, then the seconds of each sentence."""
    from pinecall_servicekit.operator import table

    lines = [
        f"{result.experiment}:",
        table(
            ("mode", "placed", "answered", "lost", "sentenced", "silent", "gaps in logs"),
            [
                (m.mode, m.placed, m.answered_by_agent, m.lost, m.sentenced, m.silent, m.gaps)
                for m in result.modes
            ],
        ),
    ]
    for m in result.modes:
        said = ", ".join(f"{s:.2f}" for s in m.webhook_to_sentence_s) or "none"
        lines.append(f"{m.mode}: webhook to the sentence's first audio (s): {said}")
    return "\n".join(lines)
