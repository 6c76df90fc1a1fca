"""``create_app``: the reaper's Litestar app (``/healthz``, ``/readyz``, ``/metrics``, OpenAPI);
its lifespan runs the reap loop. Granian serves it as a factory.

Ready once a reap has read every LiveKit and call-log without a failure, and while the last one
did (and NATS answers); a reap that could not read is tried again next minute. Its replicas
answer ``$SRV.PING.<ns>-reaper`` (nats.micro), which is how ``doctor`` finds one up.
"""

from __future__ import annotations

from litestar import Litestar
from litestar.datastructures import State

from pinecall_clients.bucket import BucketAccess
from pinecall_clients.calllog import CallLogClient
from pinecall_clients.roster import RosterClient
from pinecall_reaper.domain import Rules
from pinecall_reaper.fleets import Fleets
from pinecall_reaper.metrics import registry_for
from pinecall_reaper.reaper import Reaper
from pinecall_reaper.settings import ReaperSettings
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.http import service_app
from pinecall_servicekit.lifespan import Held, Opened, service_lifespan

VERSION = "0.1.0"


def create_app(settings: ReaperSettings | None = None) -> Litestar:
    """The reaper's app; the loop starts in its lifespan and is cancelled when it ends."""
    settings = (settings or ReaperSettings.from_env()).check()
    held: Held[Reaper] = Held()
    connected: Held[Bus] = Held()

    async def start(app: Litestar, opened: Opened) -> None:
        rules = Rules(
            quiet_s=settings.quiet_s,
            max_call_seconds=settings.max_call_seconds,
            chat_quiet_s=settings.chat_quiet_s,
            whatsapp_quiet_s=settings.whatsapp_quiet_s,
        )
        bus = opened.bus
        # it serves no verb: its nats.micro service is how doctor finds it up ($SRV.PING)
        await bus.add_service(
            bus.subjects.reaper_service, version=VERSION, description="the calls nobody runs"
        )
        opened.hold(connected, bus)
        key = settings.service_key
        log = await opened.enter(CallLogClient(settings.call_log_url, key or ""))
        fleets = Fleets(settings, RosterClient(key, bus=bus))
        reaper = Reaper(
            log,
            fleets.livekits,
            rules,
            every_s=settings.reap_every_s,
            recordings=BucketAccess.of(settings),
        )
        opened.on_close(reaper.aclose)
        opened.run(reaper.run(), name="reaper-loop")
        app.state.reaper = opened.hold(held, reaper)

    async def readiness(app_state: State) -> dict[str, bool]:
        reaper, bus = held.now, connected.now
        last = reaper.last if reaper else None
        return {"swept": last is not None and not last.failed, "nats": bool(bus and bus.connected)}

    return service_app(
        service="reaper",
        version=VERSION,
        route_handlers=[],
        lifespan=[service_lifespan("reaper", settings, start)],
        registry=registry_for(lambda: held.now),
        readiness=readiness,
    )
