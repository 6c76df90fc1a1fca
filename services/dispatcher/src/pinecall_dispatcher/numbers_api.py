"""Phone numbers on the dispatcher's HTTP (issue 18), beside :mod:`.api`'s routes.

=======================================  ==============  ========================================
route                                    key             answer
=======================================  ==============  ========================================
PUT    /v1/phone-numbers/{number}?org=   app, operator   PhoneNumber (PhoneNumberPut): the
                                                         number rings the agent; 409
                                                         ``number_taken``, 422
                                                         ``invalid_number`` / ``unknown_agent``
GET    /v1/phone-numbers?org=            app, operator   PhoneNumberList
GET    /v1/phone-numbers/{number}?org=   app, operator   PhoneNumber; 404 for a number the org
                                                         does not hold there
DELETE /v1/phone-numbers/{number}?org=   app, operator   PhoneNumber (as it was): its trunk and
                                                         rule are gone from LiveKit
=======================================  ==============  ========================================

As call-log's agents (``pinecall_call_log.definitions``): a key carries no org, so every request
names it (``?org=``, 422 without); an app key acts in its own environment (another named is 403),
an operator names one (``?environment=``, 422 without). What a refusal means and what is undone
is :mod:`pinecall_dispatcher.numbers`'s.
"""

from __future__ import annotations

from typing import Annotated

from litestar import delete, get, put
from litestar.params import FromPath, FromQuery, JSONBody, QueryParameter

from pinecall_contracts.ids import ENVIRONMENTS, ORG_PATTERN
from pinecall_contracts.keys import KeyInfo
from pinecall_contracts.phones import PhoneNumber, PhoneNumberList, PhoneNumberPut
from pinecall_dispatcher.api import AnyRequest, _key, _service
from pinecall_dispatcher.numbers import Numbers
from pinecall_servicekit.errors import Forbidden, Unprocessable
from pinecall_servicekit.http import problems

OrgQuery = Annotated[str | None, QueryParameter(pattern=ORG_PATTERN)]


def _scope(key: KeyInfo, org: str | None, environment: str | None) -> tuple[str, str]:
    """The org and environment a request acts for (the module docstring says which)."""
    if org is None:
        raise Unprocessable(
            "name the number's org: ?org=<org> (a key carries no org)",
            errors=[{"message": "required", "key": "org", "source": "query"}],
        )
    if key.kind == "operator":
        if environment not in ENVIRONMENTS:
            said = "required" if environment is None else f"no environment {environment!r}"
            raise Unprocessable(
                f"an operator key names the environment: ?environment="
                f"{' or ?environment='.join(ENVIRONMENTS)}",
                errors=[{"message": said, "key": "environment", "source": "query"}],
            )
        return org, environment
    if key.environment is None or (environment and environment != key.environment):
        raise Forbidden(f"a key of {key.environment} cannot act for {environment}")
    return org, key.environment


async def _numbers(
    request: AnyRequest, org: str | None, environment: str | None, agent: str | None = None
) -> tuple[Numbers, str, str]:
    org_, env = _scope(await _key(request, agent=agent), org, environment)
    return _service(request).numbers, org_, env


@put("/v1/phone-numbers/{number:str}", status_code=200,
     responses=problems(400, 401, 403, 409, 422, 503))  # fmt: skip
async def put_number(
    request: AnyRequest,
    number: FromPath[str],
    data: JSONBody[PhoneNumberPut],
    org: OrgQuery = None,
    environment: FromQuery[str | None] = None,
) -> PhoneNumber:
    """Tie the number to the org's agent: its trunk and dispatch rule on the environment's
    LiveKit. The same put again answers the number and makes nothing."""
    numbers, org_, env = await _numbers(request, org, environment, data.agent)
    return await numbers.put(number, org_, env, data.agent)


@get("/v1/phone-numbers", responses=problems(400, 401, 403, 422, 503))
async def list_numbers(
    request: AnyRequest, org: OrgQuery = None, environment: FromQuery[str | None] = None
) -> PhoneNumberList:
    """The org's numbers in the environment, by number."""
    numbers, org_, env = await _numbers(request, org, environment)
    return await numbers.of_org(org_, env)


@get("/v1/phone-numbers/{number:str}", responses=problems(400, 401, 403, 404, 422, 503))
async def show_number(
    request: AnyRequest,
    number: FromPath[str],
    org: OrgQuery = None,
    environment: FromQuery[str | None] = None,
) -> PhoneNumber:
    """One of the org's numbers; 404 for one it does not hold in the environment."""
    numbers, org_, env = await _numbers(request, org, environment)
    return await numbers.get(number, org_, env)


@delete("/v1/phone-numbers/{number:str}", status_code=200,
        responses=problems(400, 401, 403, 404, 422, 503))  # fmt: skip
async def remove_number(
    request: AnyRequest,
    number: FromPath[str],
    org: OrgQuery = None,
    environment: FromQuery[str | None] = None,
) -> PhoneNumber:
    """Remove the number: its dispatch rule and trunk from LiveKit, then the number."""
    numbers, org_, env = await _numbers(request, org, environment)
    return await numbers.remove(number, org_, env)


ROUTES = [put_number, list_numbers, show_number, remove_number]
