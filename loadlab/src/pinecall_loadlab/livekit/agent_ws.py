"""The `/agent` WebSocket: workers register, report load, answer offers and report jobs.

Follows `LK:pkg/service/agentservice.go:L66-329` and `LK:pkg/agent/worker.go`:

- not an upgrade → 404; a missing or bad JWT → 401 plain text; no ``video.agent`` → 401
  "permissions denied";
- binary frames, one protobuf each: `WorkerMessage` in, `ServerMessage` out;
- the first frame must be ``register`` within `register_timeout_s`, answered first by
  `RegisterWorkerResponse`; then no read deadline, WebSocket pings every `ping_interval_s` with
  no pong check; the worker is deregistered only when a read fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from aiohttp import WSMsgType, web
from livekit.protocol import agent, models

from . import ids
from .dispatcher import Dispatcher
from .tokens import AuthError, request_token
from .workers import WorkerRecord

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
        try:
            worker = await self._register(ws, api_key)
            if worker is not None:
                await self._serve(ws, worker)
        finally:
            self.sockets.discard(ws)
            await ws.close()
        return ws

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
        await ws.send_bytes(reply.SerializeToString())
        self.dispatcher.worker_registered(worker)
        return worker

    async def _serve(self, ws: web.WebSocketResponse, worker: WorkerRecord) -> None:
        writer = asyncio.create_task(self._write(ws, worker))
        pinger = asyncio.create_task(self._ping(ws))
        try:
            async for frame in ws:
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
            await ws.send_bytes(msg.SerializeToString())

    async def _ping(self, ws: web.WebSocketResponse) -> None:
        # The server never checks pongs and stops pinging after a failed write.
        with contextlib.suppress(ConnectionError, RuntimeError):
            while True:
                await asyncio.sleep(self.dispatcher.config.ping_interval_s)
                await ws.ping()


def new_node_id() -> str:
    """The stand-in's single node id (``ND_…``)."""
    return ids.new_id(ids.NODE)
