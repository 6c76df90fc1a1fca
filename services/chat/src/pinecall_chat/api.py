"""The chat service's HTTP API.

==========================  =======  ===========================================
route                       key      answer
==========================  =======  ===========================================
POST /v1/chat/tokens        app      ChatToken (ChatTokenRequest)
WS   /v1/chat?token=&call=  token    the web chat (:mod:`pinecall_chat.socket`)
==========================  =======  ===========================================

A chat token is minted for the app key's environment; a request naming another environment's
call is refused when the page dials (the token says whose call it may take up).
"""

from __future__ import annotations

import datetime as dt

from litestar import Request, post
from litestar.datastructures import State
from litestar.params import JSONBody

from pinecall_chat import tokens
from pinecall_chat.service import ChatService
from pinecall_contracts.chat import ChatToken, ChatTokenRequest
from pinecall_contracts.keys import KeyKind
from pinecall_servicekit.http import problems, request_key

AnyRequest = Request[object, object, State]
APP: tuple[KeyKind, ...] = ("app",)


def service_of(request: AnyRequest) -> ChatService:
    service: ChatService = request.app.state.chat
    return service


@post("/v1/chat/tokens", status_code=200, responses=problems(400, 401, 403, 422, 503))
async def chat_token(request: AnyRequest, data: JSONBody[ChatTokenRequest]) -> ChatToken:
    """A visitor's chat token (minted by the page's server with its app key): scoped to
    ``agent`` of ``org`` in the key's environment and, given ``call``, to that call."""
    service = service_of(request)
    key = await request_key(request, service.keyring, APP)
    assert key.environment is not None  # an app key is one environment's
    settings = service.settings
    claims = tokens.Claims(
        agent=data.agent,
        org=data.org,
        environment=key.environment,
        call=data.call,
        visitor=data.visitor,
        exp=tokens.expiry(settings.chat_token_ttl_s),
    )
    return ChatToken(
        token=tokens.mint(settings.chat_token_secret, claims),
        agent=data.agent,
        org=data.org,
        environment=key.environment,
        call=data.call,
        expires_at=dt.datetime.fromtimestamp(claims.exp, dt.UTC),
    )


ROUTES = [chat_token]
