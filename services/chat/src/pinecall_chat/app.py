"""``create_app``: the chat service's Litestar app (``WS /v1/chat``, ``POST /v1/chat/tokens``,
``/healthz``, ``/readyz``, ``/metrics``, OpenAPI). Granian serves it as a factory.

Ready while NATS answers. Its replicas answer ``$SRV.PING.<ns>-chat`` (nats.micro), which is how
``doctor`` finds one up.
"""

from __future__ import annotations

from litestar import Litestar
from litestar.datastructures import State
from prometheus_client import CollectorRegistry

from pinecall_chat.settings import ChatSettings
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.http import service_app
from pinecall_servicekit.lifespan import Held, Opened, service_lifespan

VERSION = "0.1.0"


def create_app(settings: ChatSettings | None = None) -> Litestar:
    """The chat service's app; its clients are opened in its lifespan."""
    settings = (settings or ChatSettings.from_env()).check()
    registry = CollectorRegistry()
    connected: Held[Bus] = Held()

    async def start(app: Litestar, opened: Opened) -> None:
        bus = opened.bus
        micro = await bus.add_service(
            bus.subjects.chat_service, version=VERSION, description="written calls"
        )
        opened.on_close(micro.stop)
        opened.hold(connected, bus)

    async def readiness(app_state: State) -> dict[str, bool]:
        bus = connected.now
        return {"nats": bool(bus and bus.connected)}

    return service_app(
        service="chat",
        version=VERSION,
        route_handlers=[],
        lifespan=[service_lifespan("chat", settings, start)],
        registry=registry,
        readiness=readiness,
    )
