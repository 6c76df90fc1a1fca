"""The simulated caller in its room: it rings, says its lines, listens, and hangs up.

It talks over a :class:`Room`: the lab room (``pinecall_labroom.LabRoom``, under the stand-in)
or LiveKit's WebRTC (:mod:`.rtc`), both carrying s16le mono at 48 kHz in 20 ms frames.

- **The mouth** sends one 20 ms frame every 20 ms for as long as the caller is in the room: its
  line's audio while it speaks, silence otherwise, as a phone does (a listener's clock, the
  agent's voice activity and speech to text, runs on the audio it is sent).
- **The ears** take the agent's audio as it arrives, note when each burst starts (first audio:
  the first frame that is not silence after the caller's line ended) and ends, and feed it to the
  speech to text, padded with silence while the agent is quiet (the same reason); each final
  transcript goes to the turn being heard.

A turn ends when the agent, having spoken, is quiet ``quiet_s``, and its last words are
transcribed (or ``settle_s`` passed). The script: hear the greeting out when the agent greets,
then each line in turn; the agent's silence after a line (``speak_within_s``) ends it
``silent``. ``call.ended`` (``ended``) or the room going away stops it at once, and the caller
hangs up: the seed's simulated caller leaves on ``call.ended``, before the sentence of a worker
gone (seed 000, "A worker that dies").
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from livekit import rtc
from livekit.agents import APIError, stt

from pinecall_contracts.evals import EvalOutcome, EvalTurn
from pinecall_contracts.ids import is_overflow

FRAME_S = 0.02
FRAME_BYTES = 960 * 2
"""One 20 ms frame of s16le mono at 48 kHz."""
SILENCE = b"\0" * FRAME_BYTES
AGENT_NAME = "lk.agent_name"
ENDED_WITHIN_S = 5.0
"""How long a room gone waits for its call's ``call.ended`` to say why (seconds)."""
T = TypeVar("T")


class Chunk(Protocol):
    sender: str
    pcm: bytes


class Room(Protocol):
    """What the caller needs of its room (``pinecall_labroom.LabRoom`` is one as it is)."""

    @property
    def audio(self) -> asyncio.Queue[Any]:
        """The other participants' frames (:class:`Chunk`); read only, so a queue of a subclass
        (the lab room's ``AudioQueue``) is one."""
        ...

    closed: asyncio.Event

    async def send(self, pcm: bytes) -> None: ...

    async def wait_for_participant(
        self, *, kind: str | None = None, identity: str | None = None
    ) -> dict[str, Any]: ...

    async def leave(self) -> None: ...


class Stopped(Exception):
    """The call ended or the room went while the caller was in it."""


@dataclass(kw_only=True)
class Timing:
    """The caller's patience, in seconds (``DispatcherSettings.eval_*``)."""

    answer_within_s: float = 30.0
    speak_within_s: float = 20.0
    quiet_s: float = 1.5
    settle_s: float = 2.0
    """How long the last words of a turn may take to be transcribed after the agent is quiet."""


@dataclass
class Heard:
    """What the ears have heard (monotonic seconds)."""

    bursts: list[float] = field(default_factory=list)
    """When each burst of the agent's audio began (after ``quiet_s`` of nothing)."""
    last: float | None = None
    """When the agent's audio was last heard."""
    words: list[str] = field(default_factory=list)
    """Final transcripts since :meth:`Caller.listen_anew`."""
    last_words: float = 0.0
    changed: asyncio.Event = field(default_factory=asyncio.Event)


class Caller:
    """One simulated caller in ``room``, speaking with ``say`` (a line → its PCM) and hearing
    with ``ears`` (a speech-to-text stream); stopped by ``stop`` (``call.ended``)."""

    def __init__(
        self,
        room: Room,
        ears: stt.RecognizeStream,
        stop: asyncio.Event,
        timing: Timing,
    ) -> None:
        self.room, self.ears, self.stop, self.timing = room, ears, stop, timing
        self.heard = Heard()
        self.answered_by: str | None = None
        self.turns: list[EvalTurn] = []
        self._speech: asyncio.Queue[bytes] = asyncio.Queue()
        self._said = asyncio.Event()
        self._tasks = [
            asyncio.create_task(self._mouth(), name="eval-mouth"),
            asyncio.create_task(self._listen(), name="eval-ears"),
            asyncio.create_task(self._transcripts(), name="eval-transcripts"),
        ]

    async def run(self, lines: list[str], speak: Any, *, greets: bool) -> EvalOutcome:
        """Ring, then say ``lines`` (``speak``: a line → its PCM, awaited), each after the
        agent answered the one before; the outcome (the module docstring). Never raises but
        ``CancelledError``; the caller is still in the room when it returns."""
        try:
            return await self._run(lines, speak, greets=greets)
        except Stopped:
            with contextlib.suppress(TimeoutError):  # an agent that hangs up deletes the room,
                async with asyncio.timeout(ENDED_WITHIN_S):  # and its call.ended follows
                    await self.stop.wait()
            return "ended" if self.stop.is_set() else "room_gone"

    async def _run(self, lines: list[str], speak: Any, *, greets: bool) -> EvalOutcome:
        try:
            agent = await self._until(
                self.room.wait_for_participant(kind="AGENT"), self.timing.answer_within_s
            )
        except TimeoutError:
            return "unanswered"
        joined = time.monotonic()
        self.answered_by = (agent.get("attributes") or {}).get(AGENT_NAME, "")
        if is_overflow(self.answered_by or ""):
            with contextlib.suppress(TimeoutError):  # its sentence heard out, or not
                await self._turn("", joined)
            return "overflow"
        if greets and not await self._turn("", joined):
            return "silent"
        for line in lines:
            try:
                pcm = await self._until(speak(line), self.timing.speak_within_s)
            except (TimeoutError, APIError):
                return "failed"
            self.listen_anew()
            await self._until(self._say(pcm), None)
            if not await self._turn(line, time.monotonic()):
                return "silent"
        return "completed"

    def listen_anew(self) -> None:
        self.heard.words = []

    async def _turn(self, line: str, since: float) -> bool:
        """Hear the agent's answer to ``line`` (said by ``since``): whether it spoke."""
        heard = self.heard
        try:
            await self._until(
                self._wait(lambda: heard.last is not None and heard.last >= since),
                self.timing.speak_within_s,
            )
        except TimeoutError:
            self.turns.append(EvalTurn(said=line, heard=" ".join(heard.words), first_audio_ms=None))
            return False
        first = next((b for b in heard.bursts if b >= since), heard.last or since)
        quiet = self.timing.quiet_s
        quieted = self._wait(
            lambda: heard.last is not None and time.monotonic() - heard.last >= quiet,
            poll_s=quiet / 5,
        )
        await self._until(quieted, None)
        with contextlib.suppress(TimeoutError):  # the words may never come (a tone, a cough)
            await self._until(
                self._wait(lambda: heard.last is not None and heard.last_words >= heard.last),
                self.timing.settle_s,
            )
        self.turns.append(
            EvalTurn(
                said=line,
                heard=" ".join(heard.words),
                first_audio_ms=round((first - since) * 1000),
            )
        )
        return True

    async def hang_up(self) -> None:
        """Leave with a goodbye (LiveKit's ``CLIENT_INITIATED``) and stop the mouth and ears."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.room.leave()
        await self.ears.aclose()

    async def _wait(self, holds: Any, *, poll_s: float | None = None) -> None:
        """Until ``holds()``: re-read when the ears hear something (or every ``poll_s``)."""
        while not holds():
            self.heard.changed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(poll_s):  # None: until the ears change
                    await self.heard.changed.wait()

    async def _until(self, what: Awaitable[T], within_s: float | None) -> T:
        """``what``, unless the call ends or the room goes first (:class:`Stopped`);
        ``TimeoutError`` past ``within_s``."""
        work = asyncio.ensure_future(what)
        stop = asyncio.ensure_future(self.stop.wait())
        gone = asyncio.ensure_future(self.room.closed.wait())
        try:
            done, _ = await asyncio.wait(
                {work, stop, gone}, timeout=within_s, return_when="FIRST_COMPLETED"
            )
        finally:
            for f in (stop, gone):
                f.cancel()
        if work in done:
            return work.result()
        work.cancel()
        await asyncio.gather(work, return_exceptions=True)
        if not done:
            raise TimeoutError
        raise Stopped

    async def _say(self, pcm: bytes) -> None:
        self._said.clear()
        pcm += b"\0" * (-len(pcm) % FRAME_BYTES)
        for i in range(0, len(pcm), FRAME_BYTES):
            self._speech.put_nowait(pcm[i : i + FRAME_BYTES])
        await self._said.wait()

    async def _mouth(self) -> None:
        """A frame every 20 ms: the line's while one is said, else silence."""
        loop = asyncio.get_running_loop()
        clock = loop.time()
        while True:
            try:
                frame = self._speech.get_nowait()
                last = self._speech.empty()
            except asyncio.QueueEmpty:
                frame, last = SILENCE, False
            with contextlib.suppress(ConnectionError, RuntimeError):
                await self.room.send(frame)
            if last:
                self._said.set()
            clock = max(clock + FRAME_S, loop.time() - 0.1)  # never a burst to catch up
            await asyncio.sleep(max(0.0, clock - loop.time()))  # the real-time pace

    async def _listen(self) -> None:
        """The agent's frames to the ears; silence to them while it is quiet."""
        heard, quiet = self.heard, self.timing.quiet_s
        while True:
            try:
                async with asyncio.timeout(FRAME_S):
                    pcm: bytes = (await self.room.audio.get()).pcm
            except TimeoutError:
                pcm = SILENCE
            else:
                if any(pcm):
                    now = time.monotonic()
                    if heard.last is None or now - heard.last > quiet:
                        heard.bursts.append(now)
                    heard.last = now
                    heard.changed.set()
            self.ears.push_frame(
                rtc.AudioFrame(
                    data=pcm, sample_rate=48000, num_channels=1, samples_per_channel=len(pcm) // 2
                )
            )

    async def _transcripts(self) -> None:
        async for event in self.ears:
            if event.type == stt.SpeechEventType.FINAL_TRANSCRIPT and event.alternatives:
                text = event.alternatives[0].text.strip()
                if text:
                    self.heard.words.append(text)
                self.heard.last_words = time.monotonic()
                self.heard.changed.set()
