"""WhatsApp numbers on HTTP (issue 17, "WhatsApp"), beside :mod:`.definitions`' agents.

=================================================  ==============  ==============================
route                                              key             answer
=================================================  ==============  ==============================
PUT  /v1/whatsapp/numbers/{phone_number_id}?org=   app, operator   WhatsAppNumber
                                                                   (WhatsAppNumberPut)
GET  /v1/whatsapp/numbers?org=                     app, operator   WhatsAppNumberList
GET  /v1/whatsapp/numbers/{phone_number_id}?org=   app, operator   WhatsAppNumber
GET  /v1/whatsapp/numbers/{phone_number_id}/secrets  service       WhatsAppNumberSecrets
POST /v1/whatsapp/verify                           service         WhatsAppNumber (WhatsAppVerify)
=================================================  ==============  ==============================

Scoped as agents are (:func:`pinecall_call_log.definitions._scope`): every request names the
org (``?org=``, 422 without); an app key acts in its own environment, an operator's names it. A
number is tied to an agent the org defines in that environment (422 otherwise) and is one org's:
its ``display_phone_number`` is taken in E.164 as Meta shows it (``+1 555-078-3881``) and kept as
its digits (422 unless 5 to 20);
a put of a number another org or environment holds is 409 and writes nothing; a read of one is
404, as of one that does not exist. No read answers a secret: the verify token is kept as its
SHA-256, and the app secret and access token go only to the chat service (its service key),
which verifies the number's webhooks and sends its replies with them.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from litestar import get, post, put
from litestar.params import FromQuery, JSONBody, PathParameter

from pinecall_call_log.access import AnyRequest, key_of, service_of
from pinecall_call_log.definitions import OrgQuery, _scope
from pinecall_contracts.whatsapp import (
    PHONE_NUMBER_ID_PATTERN,
    WhatsAppNumber,
    WhatsAppNumberList,
    WhatsAppNumberPut,
    WhatsAppNumberSecrets,
    WhatsAppVerify,
    display_digits,
)
from pinecall_servicekit.db import utcnow
from pinecall_servicekit.errors import Conflict, NotFound, Unprocessable
from pinecall_servicekit.http import problems

"""The chat service: the only reader of a number's secrets."""
NumberPath = Annotated[str, PathParameter(pattern=PHONE_NUMBER_ID_PATTERN)]


@put(
    "/v1/whatsapp/numbers/{phone_number_id:str}",
    status_code=200,
    responses=problems(400, 401, 403, 409, 422, 503),
)
async def put_number(
    request: AnyRequest,
    phone_number_id: NumberPath,
    data: JSONBody[WhatsAppNumberPut],
    org: OrgQuery = None,
    environment: FromQuery[str | None] = None,
) -> WhatsAppNumber:
    """Tie the number to the org's agent with its secrets (the same put again writes nothing)."""
    org_, env = _scope(await key_of(request), org, environment)
    try:  # E.164 as Meta shows it, kept as its digits
        data = msgspec.structs.replace(
            data, display_phone_number=display_digits(data.display_phone_number)
        )
    except ValueError as exc:
        raise Unprocessable(
            str(exc),
            errors=[{"message": str(exc), "key": "display_phone_number", "source": "body"}],
        ) from None
    store = service_of(request).store
    if await store.definitions.get(org_, env, data.agent) is None:
        raise Unprocessable(
            f"no agent {data.agent} of {org_} in {env}: put the agent first",
            errors=[{"message": "no such agent", "key": "agent", "source": "body"}],
        )
    stored = await store.numbers.put(phone_number_id, org_, env, data, utcnow())
    if stored is None:
        raise Conflict(f"WhatsApp number {phone_number_id} is held by another org or environment")
    return stored


@get("/v1/whatsapp/numbers", responses=problems(400, 401, 403, 422, 503))
async def list_numbers(
    request: AnyRequest, org: OrgQuery = None, environment: FromQuery[str | None] = None
) -> WhatsAppNumberList:
    """The org's numbers in the environment, by id; no secret in them."""
    org_, env = _scope(await key_of(request), org, environment)
    numbers = await service_of(request).store.numbers.of_org(org_, env)
    return WhatsAppNumberList(org=org_, environment=env, numbers=numbers)


@get("/v1/whatsapp/numbers/{phone_number_id:str}", responses=problems(400, 401, 403, 404, 422, 503))
async def show_number(
    request: AnyRequest,
    phone_number_id: NumberPath,
    org: OrgQuery = None,
    environment: FromQuery[str | None] = None,
) -> WhatsAppNumber:
    """The number, when it is the org's in the environment (404 otherwise); no secret in it."""
    org_, env = _scope(await key_of(request), org, environment)
    found = await service_of(request).store.numbers.get(phone_number_id)
    if found is None or (found.org, found.environment) != (org_, env):
        raise NotFound(f"no WhatsApp number {phone_number_id} of {org_} in {env}")
    return found


@get(
    "/v1/whatsapp/numbers/{phone_number_id:str}/secrets",
    responses=problems(400, 401, 403, 404, 503),
)
async def number_secrets(request: AnyRequest, phone_number_id: NumberPath) -> WhatsAppNumberSecrets:
    """The number with its app secret and access token: the chat service's, with the service
    key (any other key is 403)."""
    await key_of(request)
    found = await service_of(request).store.numbers.secrets(phone_number_id)
    if found is None:
        raise NotFound(f"no WhatsApp number {phone_number_id}")
    return found


@post("/v1/whatsapp/verify", status_code=200, responses=problems(400, 401, 403, 404, 503))
async def verify_token(request: AnyRequest, data: JSONBody[WhatsAppVerify]) -> WhatsAppNumber:
    """A number whose verify token Meta's handshake carried (404: none has it); the chat
    service's, with the service key."""
    await key_of(request)
    found = await service_of(request).store.numbers.by_verify_token(data.verify_token)
    if not found:
        raise NotFound("no WhatsApp number has this verify token")
    return found[0]


ROUTES = [put_number, list_numbers, show_number, number_secrets, verify_token]
