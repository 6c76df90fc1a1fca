"""A parameter Litestar refuses is named in the problem details as the request names it
(``pinecall_servicekit.refusals._validation_error``), not as the handler does."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from litestar import get
from litestar.params import QueryParameter
from litestar.testing import AsyncTestClient
from prometheus_client import CollectorRegistry

from pinecall_servicekit.http import service_app


@get("/things")
async def things(
    wanted: Annotated[list[Literal["open", "ended"]] | None, QueryParameter(name="state")] = None,
    limit: Annotated[int, QueryParameter(ge=1, le=10)] = 1,
) -> dict[str, Any]:
    return {"state": wanted, "limit": limit}


def app() -> Any:
    return service_app(
        service="test",
        version="0",
        route_handlers=[things],
        lifespan=[],
        registry=CollectorRegistry(),
    )


async def test_a_renamed_query_parameter_is_refused_by_its_query_name() -> None:
    async with AsyncTestClient(app()) as client:
        good = await client.get("/things", params={"state": ["open", "ended"], "limit": 2})
        assert good.json() == {"state": ["open", "ended"], "limit": 2}
        r = await client.get("/things", params={"state": "sealed"})
        assert r.status_code == 400
        assert [e["key"] for e in r.json()["errors"]] == ["state"]
        r = await client.get("/things", params={"limit": 0})  # named alike: as it was
        assert r.status_code == 400
        assert [e["key"] for e in r.json()["errors"]] == ["limit"]
