"""``chat serve``'s app: /healthz, /readyz (ready while NATS answers), /metrics, the nats.micro
service doctor finds it by, and problem details for what it does not serve."""

from __future__ import annotations

from pinecall_chat.app import create_app
from pinecall_chat.settings import ChatSettings
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.testing.apps import running
from pinecall_servicekit.testing.metrics import unregistered

PROBLEM = "application/problem+json"


async def test_ready_with_nats_its_metrics_and_problems(nats_url: str, nats_namespace: str) -> None:
    settings = ChatSettings.from_env(
        {},
        nats_url=nats_url,
        nats_namespace=nats_namespace,
        fleet_keys="production=pck_x",
        chat_token_secret="s",
        log_format="text",
    )
    async with running(create_app(settings)) as app:
        ready = await app.get("/readyz")
        assert (ready.status_code, ready.json()) == (200, {"ready": True, "checks": {"nats": True}})
        assert (await app.get("/healthz")).status_code == 200
        metrics = await app.get("/metrics")
        assert metrics.status_code == 200
        assert unregistered(metrics.text, "chat") == []
        bus = await Bus.connect(nats_url, nats_namespace, name="test")
        try:
            assert (await bus.ping(bus.subjects.chat_service)).name == bus.subjects.chat_service
        finally:
            await bus.close()
        for method, path, status in (("GET", "/v1/nothing", 404), ("POST", "/healthz", 405)):
            r = await app.request(method, path)
            assert (r.status_code, r.headers["content-type"]) == (status, PROBLEM)
