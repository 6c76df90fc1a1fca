"""``create_app``: the chat service's Litestar app (``WS /v1/chat``, ``POST /v1/chat/tokens``,
``/v1/whatsapp/webhook``, ``/healthz``, ``/readyz``, ``/metrics``, OpenAPI). Granian serves it as a factory.

Each new written call is admitted at the dispatcher (``PINECALL_DISPATCHER_URL``, with
``PINECALL_SERVICE_KEY``); with no service key none is (said at start: a development set-up).

Ready while NATS answers. Its replicas answer ``$SRV.PING.<ns>-chat`` (nats.micro), which is how
``doctor`` finds one up. Metrics: ``pinecall_chat_sockets`` (served now),
``pinecall_chat_calls_total{what}`` (``opened``, ``taken_up``, ``answered``, ``replayed``),
``pinecall_chat_refused_total`` (dials and frames refused with a close code).
"""

from __future__ import annotations

import logging
import platform
from collections.abc import Iterator

from litestar import Litestar
from litestar.datastructures import State
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pinecall_chat import api, socket, whatsapp
from pinecall_chat.conversation import Conversations, Model
from pinecall_chat.model import AnthropicModel
from pinecall_chat.service import ChatService
from pinecall_chat.settings import ChatSettings
from pinecall_clients.calllog import CallLogClient
from pinecall_clients.dispatcher import DispatcherClient
from pinecall_servicekit import db
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.http import service_app
from pinecall_servicekit.lifespan import Held, Opened, service_lifespan

VERSION = "0.1.0"
_log = logging.getLogger(__name__)


class _Collector(Collector):
    def __init__(self, held: Held[ChatService]) -> None:
        self.held = held

    def collect(self) -> Iterator[Metric]:
        service = self.held.now
        if service is None:
            return
        c = service.conversations
        yield GaugeMetricFamily("pinecall_chat_sockets", "chat sockets served", service.sockets)
        calls = CounterMetricFamily("pinecall_chat_calls", "written calls", labels=["what"])
        for what, n in (
            ("opened", c.opened),
            ("taken_up", c.taken_up),
            ("answered", c.answered),
            ("replayed", c.replayed),
        ):
            calls.add_metric([what], n)
        yield calls
        yield CounterMetricFamily(
            "pinecall_chat_refused", "dials and frames refused", value=service.refused
        )


HANDLERS = [*api.ROUTES, *socket.ROUTES, *whatsapp.ROUTES]
"""Every route this service serves; the chart's ingress is tested against it
(``tests/deploy/test_numbers.py``)."""


def create_app(settings: ChatSettings | None = None, *, model: Model | None = None) -> Litestar:
    """The chat service's app; its clients are opened in its lifespan. ``model`` is for tests
    (default: livekit-agents' Anthropic plugin at ``PINECALL_ANTHROPIC_URL``)."""
    settings = (settings or ChatSettings.from_env()).check()
    connected: Held[Bus] = Held()
    held: Held[ChatService] = Held()
    registry = CollectorRegistry()
    registry.register(_Collector(held))

    async def start(app: Litestar, opened: Opened) -> None:
        bus = opened.bus
        micro = await bus.add_service(
            bus.subjects.chat_service, version=VERSION, description="written calls"
        )
        opened.on_close(micro.stop)
        opened.hold(connected, bus)
        keyring = opened.keyring(cache_s=settings.key_cache_s)
        await keyring.start()
        logs = {
            env: await opened.enter(CallLogClient(settings.call_log_url, key))
            for env, key in settings.keys().items()
        }
        admit = None
        if settings.service_key:
            dispatcher = await opened.enter(
                DispatcherClient(settings.dispatcher_url, settings.service_key)
            )
            admit = dispatcher.admit_written
        else:
            _log.warning(
                "no PINECALL_SERVICE_KEY: written calls are opened unadmitted (no quota, no "
                "unknown_agent): a development set-up without a dispatcher"
            )
        used = model
        if used is None:
            anthropic = AnthropicModel(
                base_url=settings.anthropic_url, api_key=settings.anthropic_api_key
            )
            opened.on_close(anthropic.aclose)
            used = anthropic
        conversations = Conversations(
            logs,
            used,
            replica=f"{platform.node()}.{id(app):x}",
            default_model=settings.model,
            admit=admit,
        )
        app.state.chat = opened.hold(held, ChatService(settings, keyring, conversations))
        app.state.whatsapp = await whatsapp.start(opened, settings, conversations)

    async def readiness(app_state: State) -> dict[str, bool]:
        bus = connected.now
        return {"nats": bool(bus and bus.connected)}

    return service_app(
        service="chat",
        version=VERSION,
        route_handlers=HANDLERS,
        lifespan=[service_lifespan("chat", settings, start, engine=db.create_engine)],
        registry=registry,
        readiness=readiness,
    )
