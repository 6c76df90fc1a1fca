"""Litestar's refusals of a parameter, as problem details that say the method and path and never
echo more than :data:`pinecall_servicekit.http.ECHOED` characters of what was sent."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Literal

import pytest
from litestar import get
from litestar.params import PathParameter, QueryParameter
from litestar.testing import AsyncTestClient
from prometheus_client import CollectorRegistry

from pinecall_servicekit.http import ECHOED, service_app


@get("/v1/calls/{call:str}/entries")
async def entries(
    call: Annotated[str, PathParameter()], after: Annotated[int, QueryParameter()] = 0
) -> dict[str, int]:
    return {"after": after}


@get("/v1/rooms")
async def rooms(
    phase: Annotated[Literal["ringing", "talking"], QueryParameter()],
) -> dict[str, str]:
    return {"phase": phase}


@pytest.fixture
async def client() -> AsyncIterator[AsyncTestClient]:
    app = service_app(
        service="test",
        version="0",
        route_handlers=[entries, rooms],
        lifespan=[],
        registry=CollectorRegistry(),
    )
    async with AsyncTestClient(app) as c:
        yield c


async def test_a_5000_digit_query_parameter_is_refused_without_being_echoed(
    client: AsyncTestClient,
) -> None:
    r = await client.get("/v1/calls/call_1/entries", params={"after": "9" * 5000})
    assert r.status_code == 400
    assert r.headers["content-type"].startswith("application/problem+json")
    problem = r.json()
    assert problem["detail"] == "Validation failed for GET /v1/calls/call_1/entries"
    assert problem["errors"] == [
        {"message": "Integer value out of range", "key": "after", "source": "query"}
    ]
    assert len(r.content) < 1000
    ok = await client.get("/v1/calls/call_1/entries", params={"after": "7"})
    assert (ok.status_code, ok.json()) == (200, {"after": 7})


async def test_a_long_value_a_message_quotes_is_cut_to_what_a_refusal_echoes(
    client: AsyncTestClient,
) -> None:
    r = await client.get("/v1/rooms", params={"phase": "x" * 5000})
    assert r.status_code == 400
    [error] = r.json()["errors"]
    assert (error["key"], error["source"]) == ("phase", "query")
    # Litestar's message quotes the value whole: "Invalid enum value 'xxx…'"
    assert error["message"].startswith("Invalid enum value 'xxx")
    assert error["message"].endswith("… (5021 characters)")
    assert len(error["message"]) == ECHOED + len("… (5021 characters)")
