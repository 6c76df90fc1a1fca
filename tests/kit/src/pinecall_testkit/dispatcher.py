"""A dispatcher for another service's tests (the chat service admits its written calls there):
its app on the test's database and NATS, reaching call-log over HTTP with the service key. No
LiveKit and no worker: what it admits needs neither. Used only by tests."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from litestar import Litestar


def dispatcher_app(
    database_url: str,
    nats_url: str,
    nats_namespace: str,
    *,
    call_log_url: str,
    service_key: str,
    **overrides: object,
) -> Litestar:
    """The dispatcher's app (serve it with :func:`pinecall_testkit.call_log.listening`);
    ``overrides``: its other settings (``agent_cache_s=0`` to see a definition at once)."""
    from pinecall_dispatcher.app import create_app
    from pinecall_dispatcher.settings import DispatcherSettings

    settings = DispatcherSettings.from_env(
        {},
        database_url=database_url,
        nats_url=nats_url,
        nats_namespace=nats_namespace,
        log_format="text",
        db_pool_size=2,
        call_log_url=call_log_url,
        service_key=service_key,
        # a LiveKit it never reaches (no fleet serves a written call)
        livekit_keys="production=lab-key:lab-secret-of-the-test,sandbox=lab-key:lab-secret-of-the-test",
        **overrides,
    )
    return create_app(settings)
