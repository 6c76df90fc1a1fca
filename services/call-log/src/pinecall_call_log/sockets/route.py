"""``WS /v1/apps/socket``: the handshake, then the app's frames one at a time.

The handshake is refused with a close code after the accept (a browser or a client library can
read a close code, not a refused upgrade's reason): a subprotocol other than
``pinecall.app.v1`` closes 4002, a key that is not a good app key 4001, anything but ``hello``
first 4000, no common version 4002. After ``welcome`` a frame that cannot be read gets an
``error`` frame and the socket goes on; a frame over the limit closes 1009, silence for two
heartbeats 4010 (``pinecall_contracts.appsocket.Close`` has every code). Each frame is handled
before the next is read, so one socket's frames take effect in the order sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import msgspec
from litestar import WebSocket, websocket

from pinecall_call_log import domain
from pinecall_call_log.service import CallLogService
from pinecall_call_log.sockets.hub import AppSocket
from pinecall_call_log.sockets.rules import common_version
from pinecall_contracts.appsocket import (
    SUBPROTOCOL,
    VERSIONS,
    AgentDrain,
    AgentRegister,
    CallCommand,
    CallCommandAck,
    CallReady,
    CallSetup,
    Close,
    ErrorCode,
    ErrorFrame,
    FromApp,
    Hello,
    Limits,
    Ping,
    Pong,
    ToolResultAck,
    ToolResultFrame,
    Welcome,
)
from pinecall_servicekit.errors import (
    BadRequest,
    Conflict,
    NotFound,
    PinecallError,
    Unavailable,
    Unprocessable,
)
from pinecall_servicekit.http import request_key

log = logging.getLogger("pinecall.call_log.sockets")

AnySocket = WebSocket[Any, Any, Any]


class _Envelope(msgspec.Struct):
    type: Any = None


APP_TAGS = {kind.__struct_config__.tag for kind in FromApp.__args__}


class Refused(Exception):
    """A frame refused: an ``error`` frame, nothing written."""

    def __init__(self, code: ErrorCode, message: str, re: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.re = code, message, re


@websocket("/v1/apps/socket")
async def app_socket(socket: AnySocket) -> None:
    """An app process's socket (issue 16, "The app socket"); see the module docstring."""
    service: CallLogService = socket.app.state.call_log
    if SUBPROTOCOL not in socket.scope.get("subprotocols", []):
        await socket.accept()
        await socket.close(Close.NO_COMMON_VERSION, f"the subprotocol is {SUBPROTOCOL}")
        return
    await socket.accept(subprotocols=SUBPROTOCOL)
    try:
        key = await request_key(socket, service.keyring)
    except PinecallError as exc:
        code = Close.BAD_KEY if exc.status in (401, 403) else 1011
        await socket.close(code, exc.detail[:120])
        return
    assert key.environment is not None  # an app key is one environment's
    await Session(service, socket, key.environment).run()


class Session:
    """One socket from its ``hello`` to its close."""

    def __init__(self, service: CallLogService, socket: AnySocket, environment: str) -> None:
        self.service = service
        self.hub = service.hub
        self.socket = socket
        self.environment = environment
        self.settings = service.settings
        self._handling: set[asyncio.Future[None]] = set()
        """The frame being handled (at most one): shielded from the socket's end."""

    async def _receive(self) -> str | None:
        """The next text frame; None when the app left or the socket must close (``close``
        says why)."""
        try:
            async with asyncio.timeout(2 * self.settings.app_heartbeat_s):
                message = await self.socket.receive()
        except TimeoutError:
            raise _Closing(Close.MISSED_HEARTBEAT, "nothing heard for two heartbeats") from None
        if message["type"] == "websocket.disconnect":
            return None
        text = message.get("text")
        if not isinstance(text, str):
            raise _Closing(Close.PROTOCOL, "frames are JSON text")
        if len(text) > self.settings.app_max_frame_bytes or (
            len(text.encode()) > self.settings.app_max_frame_bytes
        ):
            raise _Closing(
                Close.TOO_BIG, f"a frame is at most {self.settings.app_max_frame_bytes} bytes"
            )
        return text

    async def _hello(self) -> Hello | None:
        text = await self._receive()
        if text is None:
            return None
        try:
            hello = msgspec.json.decode(text, type=Hello)
        except msgspec.MsgspecError as exc:
            raise _Closing(Close.PROTOCOL, f"the first frame is hello: {exc}"[:120]) from None
        if common_version(VERSIONS, hello.versions) is None:
            raise _Closing(Close.NO_COMMON_VERSION, f"this server speaks {list(VERSIONS)}")
        return hello

    async def run(self) -> None:
        try:
            hello = await self._hello()
        except _Closing as closing:
            await self._close(closing.code, closing.reason)
            return
        if hello is None:
            return
        app = AppSocket(
            (self.environment, hello.org), hello.instance, self.settings.app_queue_frames
        )
        app.send(
            Welcome(
                version=common_version(VERSIONS, hello.versions) or VERSIONS[0],
                instance=hello.instance,
                environment=self.environment,
                replica=self.hub.replica,
                heartbeat_s=self.settings.app_heartbeat_s,
                limits=Limits(
                    max_frame_bytes=self.settings.app_max_frame_bytes,
                    queue_frames=self.settings.app_queue_frames,
                ),
            )
        )
        await self.hub.join(app)
        tasks = [
            asyncio.create_task(self._read(app), name="app-socket-read"),
            asyncio.create_task(self._write(app), name="app-socket-write"),
            asyncio.create_task(app.closed.wait(), name="app-socket-closed"),
        ]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            # a frame the app sent before it went (its last tool.result) is written before its
            # calls are handed: cancelled mid-write, it rolled back and the next holder ran the
            # tool again
            await asyncio.gather(*self._handling, return_exceptions=True)
            try:
                await self.hub.leave(app)
            except Exception:  # Postgres or NATS gone (the replica stopping): its holds stay,
                # and another replica takes them back once this one is no longer heard
                log.warning("socket %s left without handing its calls", app.instance, exc_info=True)
        if app.closing is not None:
            if app.closing[0] != Close.SLOW_CONSUMER:
                await self._flush(app)
            await self._close(*app.closing)

    async def _close(self, code: int, reason: str) -> None:
        with contextlib.suppress(Exception):  # the app may be gone already: nothing to tell
            await self.socket.close(code, reason[:120])

    async def _flush(self, app: AppSocket) -> None:
        """Send what was queued before the close (a fatal error frame), a second at most."""
        with contextlib.suppress(Exception):
            async with asyncio.timeout(1.0):
                while not app.outbox.empty():
                    await self.socket.send_text(app.outbox.get_nowait().decode())

    async def _write(self, app: AppSocket) -> None:
        while True:
            frame = await app.outbox.get()
            await self.socket.send_text(frame.decode())

    async def _read(self, app: AppSocket) -> None:
        try:
            while (text := await self._receive()) is not None:
                handling = asyncio.ensure_future(self._frame(app, text))
                self._handling.add(handling)
                handling.add_done_callback(self._handling.discard)
                try:
                    await asyncio.shield(handling)  # the socket's end waits for it in run()
                except Refused as refused:
                    app.send(ErrorFrame(code=refused.code, message=refused.message, re=refused.re))
        except _Closing as closing:
            app.close(closing.code, closing.reason)
        except Exception:  # a defect of ours: said, and the app told to reconnect
            log.exception("socket %s: a frame failed", app.instance)
            app.close(Close.INTERNAL, "the server failed on a frame: reconnect")

    async def _frame(self, app: AppSocket, text: str) -> None:
        frame = _decode(text)
        try:
            await self._handle(app, frame)
        except NotFound as exc:
            raise Refused("unknown", exc.detail, _re(frame)) from None
        except Conflict as exc:
            code: ErrorCode = "past_deadline" if exc.code == "past_deadline" else "conflict"
            raise Refused(code, exc.detail, _re(frame)) from None
        except Unavailable as exc:
            raise Refused("unavailable", exc.detail, _re(frame)) from None
        except (BadRequest, Unprocessable) as exc:  # a NUL Postgres keeps none, an entry too big
            raise Refused("invalid", exc.detail, _re(frame)) from None

    async def _handle(self, app: AppSocket, frame: Any) -> None:
        match frame:
            case Ping(t=t):
                app.send(Pong(t=t))
            case Hello():
                raise _Closing(Close.PROTOCOL, "a second hello")
            case AgentRegister(agent=agent, takes_unclaimed=takes):
                if (
                    await self.service.store.definitions.get(app.org, app.environment, agent)
                    is None
                ):
                    app.send(
                        ErrorFrame(
                            code="invalid",
                            message=f"{app.org} defines no agent {agent} in {app.environment}",
                            re=agent,
                            fatal=True,
                        )
                    )
                    raise _Closing(Close.AGENT_OUT_OF_SCOPE, f"no agent {agent} of the org here")
                await self.hub.register(app, agent, takes)
            case ToolResultFrame():
                await self._result(app, frame)
            case CallSetup():
                self._held(app, frame.call)
                record = await self.service.identity(frame.call)
                digest = domain.prompt_hash(frame.prompt)
                now = await self.service.store.calls.record(frame.call)
                app.send(
                    CallReady(
                        call=frame.call,
                        seq=now.last_seq if now else record.last_seq,
                        prompt_hash=digest,
                        matches=record.prompt_hash in (digest, f"sha256:{digest}"),
                    )
                )
            case CallCommand():
                self._held(app, frame.call)
                if frame.kind == "say" and not frame.text:
                    raise Refused("invalid", "say needs its text", frame.id)
                seq, wrote = await self.service.command(
                    frame.call, {"id": frame.id, "kind": frame.kind, "text": frame.text}
                )
                app.send(CallCommandAck(call=frame.call, id=frame.id, seq=seq, duplicate=not wrote))
            case AgentDrain(agent=agent):
                if agent is not None and agent not in app.agents:
                    raise Refused("invalid", f"this socket does not hold {agent}", agent)
                if not app.agents:
                    raise Refused("invalid", "this socket holds no agent to drain")
                for each in [agent] if agent is not None else list(app.agents):
                    # shielded: a socket gone mid-drain still has its calls handed and its
                    # running tools kept or let go as a whole (its leave waits for the drain)
                    app.send(await asyncio.shield(self.hub.drain(app, each)))

    def _held(self, app: AppSocket, call: str) -> None:
        if self.hub.holder.get(call) is not app:
            raise Refused("not_held", f"this socket does not hold call {call}", call)

    async def _result(self, app: AppSocket, frame: ToolResultFrame) -> None:
        """Written once per id through the tool endpoint's own path; a socket answers the tool
        calls it was sent (a drained one still may) or those of calls it holds."""
        if (frame.call, frame.id) not in app.sent and self.hub.holder.get(frame.call) is not app:
            raise Refused("not_held", f"this socket does not hold call {frame.call}", frame.call)
        result, wrote = await self.service.tools.answer(
            frame.call, frame.id, frame.result, frame.error, in_time=True
        )
        await self.hub.answered(app, frame.call, frame.id)
        app.send(
            ToolResultAck(
                call=frame.call,
                id=frame.id,
                seq=result.seq,
                duplicate=not wrote,
                result=result.result,
                error=result.error,
            )
        )


class _Closing(Exception):
    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code, self.reason = code, reason


def _decode(text: str) -> Any:
    """A frame of :data:`FromApp`; ``Refused`` naming what is wrong with any other text."""
    try:
        return msgspec.json.decode(text, type=FromApp)
    except msgspec.ValidationError as exc:  # a DecodeError too: caught first
        try:
            kind = msgspec.json.decode(text, type=_Envelope).type
        except (msgspec.MsgspecError, RecursionError):
            raise Refused("malformed", f"not a frame: {exc}") from None
        if not isinstance(kind, str):
            raise Refused("malformed", 'a frame names its type, a string ("type")') from None
        if kind not in APP_TAGS:
            shown = kind if len(kind) <= 64 else f"{kind[:64]}…"
            raise Refused("unknown_type", f"no frame of type {shown!r} in this version") from None
        raise Refused("malformed", f"{kind}: {exc}") from None
    except msgspec.DecodeError as exc:
        raise Refused("malformed", f"not JSON: {exc}") from None
    except RecursionError:  # msgspec's decoder recurses per level of nesting
        raise Refused("malformed", "nested too deeply to decode") from None


def _re(frame: Any) -> str | None:
    for field in ("id", "call", "agent"):
        if isinstance(value := getattr(frame, field, None), str):
            return value
    return None


ROUTES = [app_socket]
