"""``create_app``: webhook-ingest's Litestar app; Granian serves it as a factory."""

from __future__ import annotations

from litestar import Litestar
from litestar.datastructures import State
from prometheus_client import CollectorRegistry

from pinecall_servicekit.http import service_app
from pinecall_servicekit.lifespan import Opened, service_lifespan
from pinecall_webhook_ingest import api
from pinecall_webhook_ingest.ingest import Ingest, ensure_drops_stream
from pinecall_webhook_ingest.settings import IngestSettings

VERSION = "0.1.0"


HANDLERS = api.ROUTES
"""Every route this service serves; the chart's ingress is tested against it
(``tests/deploy/test_numbers.py``)."""


def create_app(settings: IngestSettings | None = None) -> Litestar:
    """The app; the NATS connection and the stream are made in its lifespan."""
    settings = settings or IngestSettings.from_env()
    keys = settings.keys()
    registry = CollectorRegistry()

    async def start(app: Litestar, opened: Opened) -> None:
        bus = opened.bus
        stream = bus.subjects.livekit_stream_settings  # as the dispatcher makes it too
        await bus.ensure_stream(
            stream.name,
            list(stream.subjects),
            duplicate_window_s=stream.duplicate_window_s,
            max_age_s=stream.max_age_s,
        )
        await ensure_drops_stream(bus)
        # no verb: the nats.micro service says a replica is up ($SRV.PING, for doctor)
        micro = await bus.add_service(
            bus.subjects.ingest_service, version=VERSION, description="LiveKit's webhooks"
        )
        opened.on_close(micro.stop)
        app.state.ingest = Ingest(bus, keys, registry)

    async def readiness(state: State) -> dict[str, bool]:
        ingest: Ingest | None = state.get("ingest")
        return {"nats": bool(ingest and ingest.bus.connected)}

    return service_app(
        service="webhook-ingest",
        version=VERSION,
        route_handlers=HANDLERS,
        lifespan=[service_lifespan("webhook-ingest", settings, start)],
        registry=registry,
        readiness=readiness,
    )
