"""A caller's script, played into a lab room in real time.

    script = [Say("greeting"), Pause(1.0), Say("question"), WaitForAgent(), Pause(0.5),
              Say("yes"), HangUp()]
    log = await play(room, script)

Steps are tagged msgspec Structs, so a scenario can keep scripts in JSON:

- `Say`: speak one of `lines.LINES` (its committed WAV), 20 ms frames at the real-time pace;
- `Pause`: stay on the line, silent, sending silent frames as a phone line does;
- `WaitForAgent`: silent until the agent's audio is heard (bounded by `timeout_s`), then, with
  `until_quiet_s`, until the agent has been quiet that long;
- `Interrupt`: wait until the agent speaks, then say a line over it;
- `HangUp`: leave with a goodbye (CLIENT_INITIATED), or drop the line (``abort=True``).

The player reuses the lab room client (`pinecall_labroom.LabRoom`) for the transport and keeps a
`CallerLog` of when each line started and ended and when the agent was heard (loop seconds).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import msgspec

from pinecall_labroom import LabRoom

from .speech import frames, line_pcm, silence

FRAME_S = 0.02


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


Step = Say | Pause | WaitForAgent | Interrupt | HangUp


@dataclass
class CallerLog:
    """What happened, in the event loop's seconds."""

    said: list[tuple[str, float, float]] = field(default_factory=list)
    """(line, started, ended) for each line spoken."""
    agent_heard: list[float] = field(default_factory=list)
    """When each burst of the agent's audio began (after ≥ 0.3 s of nothing from it)."""
    hung_up: float | None = None


class _Ears:
    """Drains the room's incoming audio and notes when the agent starts and stops speaking."""

    def __init__(self, room: LabRoom, log: CallerLog) -> None:
        self.room, self.log = room, log
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
            self.last_heard = now

    def quiet_for(self, now: float) -> float:
        return float("inf") if self.last_heard is None else now - self.last_heard


async def _send(room: LabRoom, pcm_frames: list[bytes], clock: list[float]) -> None:
    loop = asyncio.get_running_loop()
    for pcm in pcm_frames:
        clock[0] = max(clock[0], loop.time() - 0.1)  # never burst to catch up more than 100 ms
        await room.send(pcm)
        clock[0] += FRAME_S
        await asyncio.sleep(max(0.0, clock[0] - loop.time()))


async def play(room: LabRoom, script: Sequence[Step]) -> CallerLog:
    """Play `script` into `room` in real time; returns the log. `TimeoutError` if an agent never
    speaks within a step's `timeout_s`."""
    loop = asyncio.get_running_loop()
    log = CallerLog()
    ears = _Ears(room, log)
    clock = [loop.time()]
    try:
        for step in script:
            if isinstance(step, Say | Interrupt):
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
    finally:
        ears.task.cancel()
        await asyncio.gather(ears.task, return_exceptions=True)
    return log


async def _silent_until(
    room: LabRoom, clock: list[float], event: asyncio.Event, timeout_s: float
) -> None:
    async with asyncio.timeout(timeout_s):
        while not event.is_set():
            await _send(room, silence(FRAME_S), clock)
