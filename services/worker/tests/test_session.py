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
