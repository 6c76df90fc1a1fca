"""``POST /v1/livekit/webhook?world=<environment>``: LiveKit's webhook endpoint.

``world`` names the environment (LiveKit's ``webhook.urls`` name it:
``…/v1/livekit/webhook?world=sandbox``); a URL with none is refused (400, dropped as
``no_environment``): counting it as production's would pass another LiveKit's events on as
production's callers. 200 once stored (or already stored); 401 refused; 400 signed but not a
webhook, or no ``world``; 404 an environment with no LiveKit; 503 JetStream did not store it.
"""

from __future__ import annotations

from typing import Annotated

from litestar import Request, post
from litestar.datastructures import State
from litestar.params import QueryParameter

from pinecall_servicekit.http import problems
from pinecall_webhook_ingest.ingest import Ingest


@post("/v1/livekit/webhook", status_code=200, responses=problems(400, 401, 404, 503))
async def webhook(
    request: Request[object, object, State],
    world: Annotated[
        str | None,
        # required in the schema; one left out is still the ingest's to refuse (400), counted
        QueryParameter(pattern=r"^[a-z][a-z0-9-]{0,31}$(?![\s\S])", required=True),
    ] = None,
) -> dict[str, object]:
    """Verify LiveKit's webhook on its raw body and pass it on once."""
    body = await request.body()
    ingest: Ingest = request.app.state.ingest
    stored = await ingest.receive(world, body, request.headers.get("authorization"))
    return {"stored": stored}


ROUTES = [webhook]
