"""Litestar's refusals of a parameter, as problem details that say the method and path and never
echo more than :data:`pinecall_servicekit.http.ECHOED` characters of what was sent."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Literal

import msgspec
import pytest
from litestar import get, post
from litestar.params import JSONBody, PathParameter, QueryParameter
from litestar.testing import AsyncTestClient
from prometheus_client import CollectorRegistry

from pinecall_servicekit.errors import ECHOED
from pinecall_servicekit.http import service_app


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


class Ending(msgspec.Struct, frozen=True, kw_only=True):
    outcome: Literal["completed", "drained"]


@post("/v1/ends", status_code=200)
async def ends(data: JSONBody[Ending]) -> dict[str, str]:
    return {"outcome": data.outcome}


@pytest.fixture
async def client() -> AsyncIterator[AsyncTestClient]:
    app = service_app(
        service="test",
        version="0",
        route_handlers=[entries, rooms, ends],
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
    # Litestar's message quotes the value whole
    assert error["message"] == f"Invalid enum value '{'x' * ECHOED}… (5000 characters)'"


async def test_a_long_path_and_a_long_value_in_a_body_are_not_echoed_whole(
    client: AsyncTestClient,
) -> None:
    long = "A" * 5000
    for r in (
        await client.get(f"/v1/calls/{long}/entries", params={"after": "x"}),
        await client.get(f"/v1/{long}"),  # no such route: Litestar's 404
        await client.post("/v1/ends", json={"outcome": long}),
    ):
        assert 400 <= r.status_code < 500, r.text
        assert r.headers["content-type"].startswith("application/problem+json")
        assert "A" * (ECHOED + 1) not in r.text
        assert len(r.content) < 1000
    assert r.json()["detail"] == (
        f"not a Ending: Invalid enum value '{'A' * ECHOED}… (5000 characters)' - at `$.outcome`"
    )
