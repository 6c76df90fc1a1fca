"""The `/agent` WebSocket: workers register, report load, answer offers and report jobs.

Follows `LK:pkg/service/agentservice.go:L66-329` and `LK:pkg/agent/worker.go`:

- not an upgrade → 404; a missing or bad JWT → 401 plain text; no ``video.agent`` → 401
  "permissions denied";
- binary frames, one protobuf each: `WorkerMessage` in, `ServerMessage` out;
- the first frame must be ``register`` within `register_timeout_s`, answered first by
  `RegisterWorkerResponse`; then no read deadline, WebSocket pings every `ping_interval_s` with
  no pong check; the worker is deregistered only when a read fails.

Two faults of a worker's link, kept by agent name so they outlive its socket (the stand-in's own):

- **cut** (:meth:`AgentSocket.fault` ``"cut"``): the socket's TCP connection is dropped without a
  close frame, and each reconnect under that agent name is turned away for the fault's seconds:
  the stand-in knows whose socket it is only from its ``register``, so that frame is read and the
  socket closed `refuse_after_s` (1 s) later, unanswered, unless the fault lifts meanwhile (then
  it is registered at once). An instant refusal would have livekit-agents retry at once, in a
  loop: its retry count restarts at every upgrade that succeeds (``A:worker.py:L1125``);
- **hang** (``"hang"``): LiveKit's side of the socket reads nothing and sends nothing (no pong,
  no ping, no offer) and keeps the TCP connection open, like a hung server; what the worker sent
  meanwhile is read, and what was queued for it sent, when the fault lifts. A reconnect under that
  agent name is held the same way: its ``register`` read, never answered until the lift.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from aiohttp import WSMsgType, web
from livekit.protocol import agent, models

from . import events as ev
from . import ids
from .dispatcher import Dispatcher
from .tokens import AuthError, request_token
from .workers import LinkFault, LinkFaultKind, WorkerRecord

log = logging.getLogger(__name__)

PROTOCOL = 17
"""`types.CurrentProtocol` reported in `ServerInfo`."""
AGENT_PROTOCOL = 1


def plain_401(text: str) -> web.Response:
    """The auth middleware's refusal: HTTP 401 with a plain-text body (`LK:pkg/service/auth.go`)."""
    return web.Response(status=401, text=text, content_type="text/plain")


class AgentSocket:
    """aiohttp handler for ``GET /agent``."""

    def __init__(self, dispatcher: Dispatcher, node_id: str) -> None:
        self.dispatcher = dispatcher
        self.node_id = node_id
        self.sockets: set[web.WebSocketResponse] = set()
        self.faults: dict[str, LinkFault] = {}
        """The link faults standing, by agent name."""
        self._requests: dict[WorkerRecord, web.Request] = {}
        """Each registered worker's upgrade request (its transport is what a cut drops)."""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Authenticate, upgrade and serve one worker until its socket closes."""
        if request.headers.get("Upgrade", "").lower() != "websocket":
            return web.Response(status=404, text="404 page not found", content_type="text/plain")
        try:
            token = request_token(
                request.headers.get("Authorization"), request.query.get("access_token")
            )
            if token is None:
                return plain_401("permissions denied")
            api_key, claims = self.dispatcher.keys.verify(token)
        except AuthError as exc:
            return plain_401(str(exc))
        if not (claims.video and claims.video.agent):
            return plain_401("permissions denied")

        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self.sockets.add(ws)
        worker = None
        try:
            worker = await self._register(ws, api_key)
            if worker is not None:
                self._requests[worker] = request
                await self._serve(ws, worker)
        finally:
            self.sockets.discard(ws)
            if worker is not None:
                self._requests.pop(worker, None)
            await ws.close()
        return ws

    # -- link faults ---------------------------------------------------------------------------

    def fault(self, agent_name: str, kind: LinkFaultKind, for_s: float) -> None:
        """Start `kind` on `agent_name`'s link for `for_s` seconds (a fault given again replaces
        the kind and the seconds left). `KeyError` if no worker of that name is registered,
        `ValueError` if `for_s` is not a positive number of seconds."""
        if not 0 < for_s < float("inf"):
            raise ValueError(f"for_s must be a positive number of seconds, not {for_s!r}")
        held = [w for w in self.dispatcher.registry.all() if w.agent_name == agent_name]
        if not held:
            raise KeyError(agent_name)
        fault = self.faults.get(agent_name)
        if fault is None:
            fault = self.faults[agent_name] = LinkFault(agent_name=agent_name, kind=kind)
        else:
            fault.kind = kind
        if fault.timer is not None:
            fault.timer.cancel()
        fault.timer = asyncio.get_running_loop().call_later(for_s, self.lift, agent_name)
        self.dispatcher.events.append(
            ev.LinkFaulted(agent_name=agent_name, what="cut" if kind == "cut" else "hung")
        )
        if kind == "cut":
            for w in held:
                request = self._requests.get(w)
                if request is not None and request.transport is not None:
                    request.transport.abort()  # no close frame: the connection is gone

    def lift(self, agent_name: str) -> None:
        """End the fault of `agent_name`'s link (a held register is answered, a hung socket reads
        and sends again); `KeyError` if none stands."""
        fault = self.faults.pop(agent_name)
        if fault.timer is not None:
            fault.timer.cancel()
        fault.lifted.set()
        self.dispatcher.events.append(ev.LinkFaulted(agent_name=agent_name, what="lifted"))

    async def _admitted(self, agent_name: str) -> bool:
        """Whether a register of `agent_name` is answered: at once with no fault standing; under
        a cut only if it lifts within `refuse_after_s`; under a hang once it lifts."""
        fault = self.faults.get(agent_name)
        if fault is None:
            return True
        cut = fault.kind == "cut"
        if not cut:
            self.dispatcher.events.append(ev.LinkFaulted(agent_name=agent_name, what="held"))
        try:
            await asyncio.wait_for(
                fault.lifted.wait(), self.dispatcher.config.refuse_after_s if cut else None
            )
        except TimeoutError:
            self.dispatcher.events.append(ev.LinkFaulted(agent_name=agent_name, what="refused"))
            return False
        return True

    async def _unhung(self, worker: WorkerRecord) -> None:
        """Return at once, or once the hang of `worker`'s link lifts."""
        fault = self.faults.get(worker.agent_name)
        if fault is not None and fault.kind == "hang":
            await fault.lifted.wait()

    async def _register(self, ws: web.WebSocketResponse, api_key: str) -> WorkerRecord | None:
        cfg = self.dispatcher.config
        try:
            frame = await asyncio.wait_for(ws.receive(), cfg.register_timeout_s)
        except TimeoutError:
            log.info("worker did not register within %ss", cfg.register_timeout_s)
            return None
        if frame.type != WSMsgType.BINARY:
            return None
        msg = agent.WorkerMessage.FromString(frame.data)
        if msg.WhichOneof("message") != "register":
            log.warning("first worker message was %s, not register", msg.WhichOneof("message"))
            return None
        reg = msg.register
        if not await self._admitted(reg.agent_name):
            return None
        worker = WorkerRecord(
            id=self.dispatcher.registry.new_id(),
            agent_name=reg.agent_name,
            namespace=reg.namespace,
            job_type=reg.type,
            deployment=reg.deployment,
            version=reg.version,
            api_key=api_key,
            permissions=models.ParticipantPermission(),
        )
        worker.permissions.CopyFrom(reg.allowed_permissions)
        info = models.ServerInfo(
            edition=models.ServerInfo.Edition.Standard,
            version=cfg.version,
            protocol=PROTOCOL,
            agent_protocol=AGENT_PROTOCOL,
            region=cfg.region,
            node_id=self.node_id,
        )
        reply = agent.ServerMessage(
            register=agent.RegisterWorkerResponse(worker_id=worker.id, server_info=info)
        )
        try:
            await ws.send_bytes(reply.SerializeToString())
        except ConnectionError:  # it gave up while its register was held
            return None
        self.dispatcher.worker_registered(worker)
        return worker

    async def _serve(self, ws: web.WebSocketResponse, worker: WorkerRecord) -> None:
        writer = asyncio.create_task(self._write(ws, worker))
        pinger = asyncio.create_task(self._ping(ws, worker))
        try:
            while True:
                await self._unhung(worker)
                frame = await ws.receive()
                if frame.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED):
                    return
                await self._unhung(worker)  # a frame read as a hang began waits for its end
                if frame.type != WSMsgType.BINARY:
                    log.warning("worker %s sent a %s frame; closing", worker.id, frame.type.name)
                    return
                try:
                    msg = agent.WorkerMessage.FromString(frame.data)
                except Exception:
                    log.warning("worker %s sent a malformed frame; closing", worker.id)
                    return
                if worker.frozen:
                    continue  # a ghost: nothing it says reaches the server
                if not self._handle(worker, msg):
                    return
        finally:
            self.dispatcher.worker_closed(worker)
            for task in (writer, pinger):
                task.cancel()
            await asyncio.gather(writer, pinger, return_exceptions=True)

    def _handle(self, worker: WorkerRecord, msg: agent.WorkerMessage) -> bool:
        """Apply one worker message; False closes the socket (unknown message)."""
        which = msg.WhichOneof("message")
        d = self.dispatcher
        if which == "update_worker":
            d.handle_update_worker(worker, msg.update_worker)
        elif which == "availability":
            if worker.answer_delay_s > 0:
                asyncio.get_running_loop().call_later(
                    worker.answer_delay_s, d.handle_availability, worker, msg.availability
                )
            else:
                d.handle_availability(worker, msg.availability)
        elif which == "update_job":
            d.handle_update_job(worker, msg.update_job)
        elif which == "ping":
            pong = agent.WorkerPong(
                last_timestamp=msg.ping.timestamp, timestamp=int(time.time() * 1000)
            )
            worker.send(agent.ServerMessage(pong=pong))
        elif which in ("migrate_job", "simulate_job", "register"):
            log.info("ignoring %s from worker %s", which, worker.id)
        else:
            log.warning("unknown message %s from worker %s", which, worker.id)
            return False
        return True

    async def _write(self, ws: web.WebSocketResponse, worker: WorkerRecord) -> None:
        while True:
            msg = await worker.outbox.get()
            await self._unhung(worker)
            await ws.send_bytes(msg.SerializeToString())

    async def _ping(self, ws: web.WebSocketResponse, worker: WorkerRecord) -> None:
        # The server never checks pongs and stops pinging after a failed write.
        with contextlib.suppress(ConnectionError, RuntimeError):
            while True:
                await asyncio.sleep(self.dispatcher.config.ping_interval_s)
                await self._unhung(worker)
                await ws.ping()


def new_node_id() -> str:
    """The stand-in's single node id (``ND_…``)."""
    return ids.new_id(ids.NODE)
