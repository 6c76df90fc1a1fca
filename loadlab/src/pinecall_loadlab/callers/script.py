"""A caller's script, played into a lab room in real time.

    script = [Say("greeting"), Pause(1.0), Say("question"), WaitForAgent(), Pause(0.5),
              Say("yes"), HangUp()]
    log = await play(room, script)

Steps are tagged msgspec Structs, so a scenario can keep scripts in JSON:

- `WaitForAnswer`: silent until an agent is in the room (a phone rings until someone picks up;
  its ``lk.agent_name`` says who: a worker, or ``<fleet>/overflow``), bounded by `timeout_s`;
- `Say`: speak one of `lines.LINES` (its committed WAV), 20 ms frames at the real-time pace;
- `Pause`: stay in the call, silent, sending silent frames as a phone does;
- `WaitForAgent`: silent until the agent's audio is heard (bounded by `timeout_s`), then, with
  `until_quiet_s`, until the agent has been quiet that long;
- `Interrupt`: wait until the agent speaks, then say a line over it;
- `HangUp`: leave with a goodbye (CLIENT_INITIATED), or drop the connection (``abort=True``).

The player reuses the lab room client (`pinecall_labroom.LabRoom`) for the transport and keeps a
`CallerLog` of when each line started and ended and when the agent was heard (loop seconds). A
room the far end closes (the overflow deletes it after its sentence) ends the script there:
`CallerLog.closed` says when, and no step raises for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from pinecall_labroom import LabRoom

from .speech import frames, line_pcm, silence

FRAME_S = 0.02
AGENT_NAME = "lk.agent_name"
"""The attribute LiveKit puts on an agent participant: its worker's agent name."""


class WaitForAnswer(msgspec.Struct, frozen=True, kw_only=True, tag="wait_for_answer"):
    timeout_s: float = 30.0


class Say(msgspec.Struct, frozen=True, kw_only=True, tag="say"):
    line: str


class Pause(msgspec.Struct, frozen=True, kw_only=True, tag="pause"):
    seconds: float


class WaitForAgent(msgspec.Struct, frozen=True, kw_only=True, tag="wait_for_agent"):
    timeout_s: float = 30.0
    until_quiet_s: float = 0.0


class Interrupt(msgspec.Struct, frozen=True, kw_only=True, tag="interrupt"):
    line: str
    timeout_s: float = 30.0


class HangUp(msgspec.Struct, frozen=True, kw_only=True, tag="hang_up"):
    abort: bool = False


Step = WaitForAnswer | Say | Pause | WaitForAgent | Interrupt | HangUp


@dataclass
class CallerLog:
    """What happened, in the event loop's seconds."""

    said: list[tuple[str, float, float]] = field(default_factory=list)
    """(line, started, ended) for each line spoken."""
    agent_heard: list[float] = field(default_factory=list)
    """When each burst of the agent's audio began (after ≥ 0.3 s of nothing from it)."""
    hung_up: float | None = None
    answered: float | None = None
    """When an agent was first seen in the room (`WaitForAnswer`)."""
    answered_by: str | None = None
    """That agent's ``lk.agent_name`` (``""`` when it carries none)."""
    closed: float | None = None
    """When the far end closed the room (deleted it, removed the caller), if it did."""

    def waits(self) -> list[float]:
        """For each line said, seconds from its end to the first agent audio heard after it
        (first audio as the caller hears it); a line never answered has none."""
        out = []
        for _line, _start, end in self.said:
            after = [h for h in self.agent_heard if h > end]
            if after:
                out.append(after[0] - end)
        return out


class _Closed(Exception):
    """The far end closed the room while the script played."""


Change = Literal["answered", "heard"]
"""What `play` tells its ``on_change``: an agent joined; the agent's voice was first heard."""


class _Ears:
    """Drains the room's incoming audio and notes when the agent starts and stops speaking."""

    def __init__(self, room: LabRoom, log: CallerLog, on_change: Callable[[Change], None]) -> None:
        self.room, self.log, self.on_change = room, log, on_change
        self.last_heard: float | None = None
        self.heard = asyncio.Event()
        self.task = asyncio.create_task(self._listen())

    async def _listen(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            chunk = await self.room.audio.get()
            if not any(chunk.pcm):
                continue
            now = loop.time()
            if self.last_heard is None or now - self.last_heard > 0.3:
                self.log.agent_heard.append(now)
                self.heard.set()
                if len(self.log.agent_heard) == 1:
                    self.on_change("heard")
            self.last_heard = now

    def quiet_for(self, now: float) -> float:
        return float("inf") if self.last_heard is None else now - self.last_heard


async def _send(room: LabRoom, pcm_frames: list[bytes], clock: list[float]) -> None:
    loop = asyncio.get_running_loop()
    for pcm in pcm_frames:
        clock[0] = max(clock[0], loop.time() - 0.1)  # never burst to catch up more than 100 ms
        if room.closed.is_set():
            raise _Closed
        try:
            await room.send(pcm)
        except ConnectionError as exc:  # the socket closed between the check and the send
            raise _Closed from exc
        clock[0] += FRAME_S
        await asyncio.sleep(max(0.0, clock[0] - loop.time()))


async def play(
    room: LabRoom,
    script: Sequence[Step],
    *,
    log: CallerLog | None = None,
    on_change: Callable[[Change], None] = lambda _change: None,
) -> CallerLog:
    """Play `script` into `room` in real time; returns the log (``log``, when given, is filled
    as the script goes, and ``on_change`` is told when an agent answers and when it is first
    heard). `TimeoutError` if an agent never answers or speaks within a step's `timeout_s`; a
    room closed by the far end ends the script (`CallerLog.closed`)."""
    loop = asyncio.get_running_loop()
    log = CallerLog() if log is None else log
    ears = _Ears(room, log, on_change)
    clock = [loop.time()]
    try:
        for step in script:
            if isinstance(step, WaitForAnswer):
                await _answered(room, clock, step.timeout_s, log, on_change)
            elif isinstance(step, Say | Interrupt):
                if isinstance(step, Interrupt):
                    ears.heard.clear()
                    await _silent_until(room, clock, ears.heard, step.timeout_s)
                start = loop.time()
                await _send(room, frames(line_pcm(step.line)), clock)
                log.said.append((step.line, start, loop.time()))
            elif isinstance(step, Pause):
                await _send(room, silence(step.seconds), clock)
            elif isinstance(step, WaitForAgent):
                await _silent_until(room, clock, ears.heard, step.timeout_s)
                while ears.quiet_for(loop.time()) < step.until_quiet_s:
                    await _send(room, silence(FRAME_S * 5), clock)
                ears.heard.clear()
            elif isinstance(step, HangUp):
                log.hung_up = loop.time()
                await (room.abort() if step.abort else room.leave())
                break
    except _Closed:
        log.closed = loop.time()
    finally:
        ears.task.cancel()
        await asyncio.gather(ears.task, return_exceptions=True)
    return log


async def _answered(
    room: LabRoom,
    clock: list[float],
    timeout_s: float,
    log: CallerLog,
    on_change: Callable[[Change], None],
) -> None:
    """Silent frames until an agent is in the room; the log says when and who at once (before
    any of its audio read after), and ``on_change`` is told."""
    loop = asyncio.get_running_loop()

    def seen(agent: asyncio.Future[dict[str, Any]]) -> None:
        if agent.cancelled():
            return
        log.answered = loop.time()
        log.answered_by = (agent.result().get("attributes") or {}).get(AGENT_NAME, "")
        on_change("answered")

    agent = asyncio.ensure_future(room.wait_for_participant(kind="AGENT"))
    agent.add_done_callback(seen)
    try:
        async with asyncio.timeout(timeout_s):
            while not agent.done():
                await _send(room, silence(FRAME_S), clock)
    finally:
        agent.cancel()


async def _silent_until(
    room: LabRoom, clock: list[float], event: asyncio.Event, timeout_s: float
) -> None:
    async with asyncio.timeout(timeout_s):
        while not event.is_set():
            await _send(room, silence(FRAME_S), clock)
