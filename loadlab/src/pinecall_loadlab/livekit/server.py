"""The stand-in as one object: its HTTP server, its parts, and the Python calls for faults.

    async with StandIn(StandInConfig(port=0)) as lk:
        lk.url            # "http://127.0.0.1:<port>" for LIVEKIT_URL and LiveKitAPI
        lk.events         # EventLog of everything it did
        lk.freeze(worker_id)  # a ghost
        lk.cut_link(agent_name, for_s=45)  # its socket dropped, its reconnects refused

Routes: ``/agent`` (workers), ``/twirp/…`` (livekit-api, SIP included: `sip.service`),
``/lab/rtc`` (lab-room participants), ``/lab/control/…`` (faults over HTTP; the phone network's
side of SIP: `sip.control`). One node; everything in one event loop.
"""

from __future__ import annotations

import logging
from types import TracebackType

from aiohttp import web

from pinecall_loadlab import serving

from . import agent_ws, control, labrtc
from .config import StandInConfig
from .dispatcher import Dispatcher
from .events import EventLog
from .rooms import Reason, RoomManager
from .sip import control as sip_control
from .sip.service import SipService
from .tokens import KeyRing
from .twirp import Twirp
from .webhooks import WebhookNotifier
from .workers import WorkerRecord

log = logging.getLogger(__name__)


class StandIn:
    """A LiveKit stand-in serving on `config.host`:`config.port` while open."""

    def __init__(self, config: StandInConfig | None = None) -> None:
        self.config = config or StandInConfig()
        self.keys = KeyRing(self.config.keys)
        self.events = EventLog()
        self.node_id = agent_ws.new_node_id()
        self.dispatcher = Dispatcher(self.config, self.keys, self.events)
        self.webhooks = WebhookNotifier(self.config, self.keys, self.events)
        self.rooms = RoomManager(self.dispatcher, self.webhooks)
        self.agent_socket = agent_ws.AgentSocket(self.dispatcher, self.node_id)
        self.twirp = Twirp(self.rooms, self.keys)
        self.sip = SipService(self.config, self.rooms, self.keys)
        self.twirp.routes.update(self.sip.routes())
        self.lab = labrtc.LabTransport(self.rooms, self.keys)
        self.app = web.Application()
        self.app.router.add_get("/agent", self.agent_socket.handle)
        self.app.router.add_route("*", "/twirp/{service}/{method}", self.twirp.handle)
        self.app.router.add_get("/lab/rtc", self.lab.handle)
        control.add_routes(self.app, self)
        sip_control.add_routes(self.app, self)
        self._runner: web.AppRunner | None = None
        self.port = self.config.port

    @property
    def url(self) -> str:
        """The HTTP base URL (livekit-agents rewrites it to ws:// itself)."""
        return f"http://{self.config.host}:{self.port}"

    async def start(self) -> None:
        """Listen; with port 0 the chosen port is in `port`."""
        await self.webhooks.start()
        self._runner = web.AppRunner(self.app, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.config.host, self.config.port)
        await site.start()
        self.port = self._runner.addresses[0][1]
        log.info("LiveKit stand-in listening on %s", self.url)

    async def aclose(self) -> None:
        """Close every socket and stop; queued webhooks are abandoned."""
        for agent_name in list(self.agent_socket.faults):
            self.agent_socket.lift(agent_name)  # a held register or hung socket ends with us
        for ws in list(self.agent_socket.sockets) + list(self.lab.sockets):
            await ws.close()
        await self.sip.aclose()
        await self.rooms.aclose()
        if self._runner is not None:
            await serving.stop(self._runner)
        await self.webhooks.aclose()

    async def __aenter__(self) -> StandIn:
        await self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- faults, as Python calls ---------------------------------------------------------------

    def worker(self, worker_id: str) -> WorkerRecord:
        """The registered worker `worker_id`; `KeyError` if none."""
        w = self.dispatcher.registry.get(worker_id)
        if w is None:
            raise KeyError(worker_id)
        return w

    def freeze(self, worker_id: str) -> None:
        """Make a ghost: the worker stays listed with its last status and load and keeps being
        offered jobs, but nothing reaches it and nothing it sends is read."""
        self.worker(worker_id).frozen = True

    def thaw(self, worker_id: str) -> None:
        """End a freeze; held frames are delivered (the worker then answers stale offers)."""
        self.worker(worker_id).thaw()

    def slow(self, worker_id: str, delay_s: float) -> None:
        """Handle each of the worker's availability answers `delay_s` seconds late."""
        self.worker(worker_id).answer_delay_s = delay_s

    def cut_link(self, agent_name: str, for_s: float) -> None:
        """Drop the agent socket of the worker registered as `agent_name` (no close frame) and
        turn away its reconnects for `for_s` seconds, as when it cannot reach LiveKit. `KeyError`
        if no worker of that name is registered; `ValueError` for `for_s` not > 0."""
        self.agent_socket.fault(agent_name, "cut", for_s)

    def hang_link(self, agent_name: str, for_s: float) -> None:
        """Hang LiveKit's side of `agent_name`'s agent socket for `for_s` seconds: nothing read,
        nothing sent (no pong, no ping, no offer), the TCP connection open; its reconnects are
        held unanswered too. Errors as `cut_link`."""
        self.agent_socket.fault(agent_name, "hang", for_s)

    def mend_link(self, agent_name: str) -> None:
        """End the cut or hang of `agent_name`'s link now; `KeyError` if none stands."""
        self.agent_socket.lift(agent_name)

    def cut(self, room: str, identity: str) -> None:
        """Cut a lab participant's connection without a goodbye (CONNECTION_TIMEOUT follows)."""
        self.lab.cut(room, identity)

    def remove_participant(self, room: str, identity: str, reason: int) -> None:
        """Remove a participant as the server would, with `reason` (a `DisconnectReason`)."""
        r = self.rooms.rooms[room]
        self.rooms.remove(r, r.participants[identity], reason)


__all__ = ["Reason", "StandIn", "StandInConfig"]
