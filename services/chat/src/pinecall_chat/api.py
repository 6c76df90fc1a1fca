"""The chat service's HTTP API.

==========================  =======  ===========================================
route                       key      answer
==========================  =======  ===========================================
POST /v1/chat/tokens        app      ChatToken (ChatTokenRequest)
WS   /v1/chat?token=&call=  token    the web chat (:mod:`pinecall_chat.socket`)
==========================  =======  ===========================================

A chat token is minted for the app key's environment, and only for what a page could dial with
it (read on call-log with that environment's fleet key): an agent its org defines there (403
otherwise: keys carry no org today, so an org that defines no such agent is how "another org's"
shows), and, given ``call``, a call that exists (404) and is an open written call of that agent
and org (403; 409 ended). The dial checks again (a token outlives its mint).
"""

from __future__ import annotations

import datetime as dt
import logging

from litestar import Request, post
from litestar.datastructures import State
from litestar.params import JSONBody

from pinecall_chat import domain, tokens
from pinecall_chat.conversation import NoKey
from pinecall_chat.service import ChatService
from pinecall_clients.errors import AgentUnknown, CallLogRefused, CallLogUnavailable, CallUnknown
from pinecall_contracts.chat import ChatToken, ChatTokenRequest
from pinecall_servicekit.errors import Conflict, Forbidden, NotFound, Unavailable
from pinecall_servicekit.http import problems, request_key

AnyRequest = Request[object, object, State]
READ_WITHIN_S = 5.0
"""How long a mint waits for call-log to read its scope (then 503)."""
_log = logging.getLogger(__name__)


def service_of(request: AnyRequest) -> ChatService:
    service: ChatService = request.app.state.chat
    return service


@post("/v1/chat/tokens", status_code=200, responses=problems(400, 401, 403, 404, 409, 503))
async def chat_token(request: AnyRequest, data: JSONBody[ChatTokenRequest]) -> ChatToken:
    """A visitor's chat token (minted by the page's server with its app key): scoped to
    ``agent`` of ``org`` in the key's environment and, given ``call``, to that call. 403 for an
    agent the org does not define there or another's call, 404 no such call, 409 one ended."""
    service = service_of(request)
    key = await request_key(request, service.keyring, org=data.org or None, agent=data.agent)
    assert key.environment is not None  # an app key is one environment's
    await _dialable(service, data, key.environment)
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


async def _dialable(service: ChatService, data: ChatTokenRequest, environment: str) -> None:
    """Refuse a token no dial could use (the module docstring); nothing is written."""
    try:
        log = service.conversations.client(environment)
        if data.call is None:
            await log.agent(data.agent, org=data.org, within_s=READ_WITHIN_S)
            return
        record = await log.record(data.call, within_s=READ_WITHIN_S)
    except NoKey as exc:
        raise Unavailable(str(exc)) from None
    except AgentUnknown:
        raise Forbidden(
            f"{data.org} defines no agent {data.agent} in {environment}: a chat token is for "
            "an agent of the org it names"
        ) from None
    except CallUnknown:
        raise NotFound(f"no call {data.call} in {environment}") from None
    except CallLogRefused as exc:
        if exc.status == 403:  # the key's environment is not the call's
            raise Forbidden(f"call {data.call}: other environment") from None
        _log.error("call-log refused a chat token's read: %s", exc)
        raise Unavailable("call-log refused to read the token's scope") from None
    except CallLogUnavailable:
        raise Unavailable("call-log did not answer: try again") from None
    why = domain.may_take_up(record, agent=data.agent, org=data.org, environment=environment)
    if why == "not_open":
        raise Conflict(f"call {data.call} ended: mint a token without call for a new one")
    if why is not None:
        raise Forbidden(f"call {data.call}: {why.replace('_', ' ')}")


ROUTES = [chat_token]
