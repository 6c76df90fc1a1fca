"""``call.command`` (``say``, ``end``), once per app-minted id (issue 16, "The app socket").

A command is sent on the socket the app has and awaits its ``call.command.ack``. The id makes a
second send harmless (the server acknowledges it as a duplicate and writes nothing), so a command
whose socket went before its acknowledgement is sent again, with the same id, once its call is
attached to this app again; one the server could not take (``unavailable``) likewise. Any other
``error`` is :class:`~pinecall.errors.CommandRefused`; no acknowledgement within ``timeout_s``,
:class:`~pinecall.errors.CommandTimeout`.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import TYPE_CHECKING, Any, Literal

import msgspec
import stamina

from pinecall.errors import CommandRefused, CommandTimeout
from pinecall_contracts.appsocket import CallCommand, CallCommandAck, ErrorFrame

if TYPE_CHECKING:
    from pinecall.app import App

MAX_TEXT = 2000
"""A command's text, at most this many characters (``pinecall_contracts.calls.Text``)."""
LOST_KEPT_S = 300.0
"""A call lost with its socket is waited for (to be attached again) while this young, seconds."""
Heard = CallCommandAck | ErrorFrame | None
"""What answers a command sent: its acknowledgement, an error, or None (the socket went)."""


class _Again(Exception):
    """Send the command again: the socket went, or the server was ``unavailable``."""


class Commands:
    """The commands of one app on their way."""

    def __init__(self, app: App) -> None:
        self._app = app
        self._sent: dict[str, tuple[str, asyncio.Future[Heard]]] = {}
        """Commands sent and not answered yet: id → (call, its answer)."""
        self._lost: dict[str, float] = {}
        """Calls lost with a socket (monotonic s): their commands wait to be attached again."""

    async def send(
        self,
        call: str,
        kind: Literal["say", "end"],
        text: str | None,
        *,
        id: str | None,
        timeout_s: float,
    ) -> CallCommandAck:
        if kind == "say" and not text:
            raise ValueError("say needs its text")
        if text is not None and len(text) > MAX_TEXT:
            raise ValueError(f"a command's text is at most {MAX_TEXT} characters")
        frame = CallCommand(call=call, id=id or f"cmd_{uuid.uuid4().hex}", kind=kind, text=text)
        try:  # the contract's grammar of a call's and a command's id
            msgspec.convert(msgspec.to_builtins(frame), CallCommand)
        except msgspec.ValidationError as exc:
            raise ValueError(f"not a command: {exc}") from None
        try:
            async with asyncio.timeout(timeout_s):
                async for attempt in stamina.retry_context(
                    on=_Again,
                    attempts=None,
                    timeout=None,
                    wait_initial=0.05,
                    wait_max=1.0,
                    wait_jitter=0.1,
                ):
                    with attempt:
                        return await self._once(frame)
        except TimeoutError:
            raise CommandTimeout(
                f"{kind} on {call} was not acknowledged in {timeout_s} s (id {frame.id})"
            ) from None
        raise AssertionError("stamina stops retrying only by raising")

    async def _once(self, frame: CallCommand) -> CallCommandAck:
        app = self._app
        # A call lost with the socket waits to be attached again; any other is sent once the
        # app is connected (the server says not_held for a call this app does not serve).
        await app.wait_for(
            lambda: app.holds(frame.call) or (app.connected and frame.call not in self._lost)
        )
        future: asyncio.Future[Heard] = asyncio.get_running_loop().create_future()
        self._sent[frame.id] = (frame.call, future)
        try:
            if not await app.send(frame):
                raise _Again
            heard = await future
        finally:
            self._sent.pop(frame.id, None)
        if isinstance(heard, CallCommandAck):
            return heard
        if heard is None or heard.code == "unavailable":
            raise _Again
        raise CommandRefused(heard.code, heard.message)

    def acked(self, frame: CallCommandAck) -> None:
        if frame.id in self._sent:
            _answer(self._sent[frame.id][1], frame)

    def refused(self, frame: ErrorFrame) -> bool:
        """An ``error`` about a command on its way; False when it is about none."""
        if frame.re is not None and frame.re in self._sent:
            _answer(self._sent[frame.re][1], frame)
            return True
        if frame.code == "not_held" and frame.re is not None:
            # the server names the call, not the command, when it holds no such call: every
            # command of it on its way is refused alike
            about = [future for call, future in self._sent.values() if call == frame.re]
            for future in about:
                _answer(future, frame)
            return bool(about)
        return False

    def attached(self, call: str) -> None:
        self._lost.pop(call, None)

    def lost(self, calls: list[str]) -> None:
        """The socket went with ``calls``: no answer comes for what was sent on it."""
        for _, future in self._sent.values():
            _answer(future, None)
        now = time.monotonic()
        self._lost = {c: t for c, t in self._lost.items() if now - t < LOST_KEPT_S}
        self._lost.update(dict.fromkeys(calls, now))


def _answer(future: asyncio.Future[Heard], frame: Any) -> None:
    if not future.done():
        future.set_result(frame)
