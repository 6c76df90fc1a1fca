"""The call's model client: made on the call's event loop, so nothing heavy in it (issue 20)."""

from __future__ import annotations

from pinecall_clients.tls import TLS
from pinecall_worker.call.session import model_client
from pinecall_worker.settings import WorkerSettings


async def test_every_calls_model_client_reuses_the_process_tls_context() -> None:
    settings = WorkerSettings(anthropic_url="http://127.0.0.1:9", anthropic_api_key="k")
    clients = [model_client(settings), model_client(settings)]
    try:
        # httpx's pool holds the context its connections wrap sockets with (httpcore
        # AsyncConnectionPool._ssl_context); a fresh client would have made its own.
        contexts = [c._client._transport._pool._ssl_context for c in clients]  # type: ignore[attr-defined]
        assert contexts[0] is TLS
        assert contexts[1] is TLS
        assert all(c.max_retries == 0 for c in clients)
        assert all(c.timeout == 30.0 for c in clients)
    finally:
        for c in clients:
            await c.close()


def test_what_a_job_would_build_on_its_loop_is_built_at_import_in_the_forkserver() -> None:
    """The session module (preloaded by the forkserver) leaves the Anthropic SDK's stream-event
    schema cached and every pydantic default factory's answer kept, so a job process inherits
    them instead of building them on its call's loop."""
    from anthropic import _models
    from anthropic.types import RawMessageStreamEvent
    from livekit.agents import llm

    built = _models.TypeAdapter.cache_info()  # type: ignore[attr-defined]  # anthropic's lru_cache
    delta = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "text_delta", "text": "hi"},
    }
    event = _models.construct_type(type_=RawMessageStreamEvent, value=delta)
    assert type(event).__name__ == "RawContentBlockDeltaEvent"
    assert _models.TypeAdapter.cache_info().misses == built.misses  # type: ignore[attr-defined]

    tools = llm.AgentConfigUpdate.__private_attributes__["_tools"]
    assert tools._default_factory_takes_validated_data is False  # type: ignore[attr-defined]
