"""A request body is decoded once, strictly, and its route's OpenAPI still names its schema
(issue 15, item 7; ``pinecall_servicekit.body``)."""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec
import pytest
from litestar import Request, post
from litestar.params import JSONBody
from litestar.testing import AsyncTestClient
from prometheus_client import CollectorRegistry

from pinecall_servicekit.body import StrictBody
from pinecall_servicekit.errors import BadRequest, PinecallError, Unprocessable
from pinecall_servicekit.http import service_app


class Order(msgspec.Struct, frozen=True, kw_only=True):
    """A body that counts how often it is made: once per decoding."""

    seats: int
    made: ClassVar[int] = 0

    def __post_init__(self) -> None:
        type(self).made += 1


class _NoSevens(StrictBody):
    @classmethod
    def refused(cls, body: bytes, problem: BadRequest) -> PinecallError:
        return Unprocessable("seven is said in words") if b"7" in body else problem


@post("/orders", status_code=200)
async def order(data: JSONBody[Order]) -> dict[str, int]:
    return {"seats": data.seats}


@post("/maybe", status_code=200)
async def maybe(data: JSONBody[Order | None] = None) -> dict[str, int | None]:
    return {"seats": None if data is None else data.seats}


class Note(msgspec.Struct, frozen=True, kw_only=True):
    text: str
    tags: list[str] = []
    extra: dict[str, Any] = {}


NOTED: list[Note] = []
"""The notes the handler was given: a refused body never reaches it."""


@post("/notes", status_code=200)
async def note(data: JSONBody[Note]) -> dict[str, str]:
    NOTED.append(data)
    return {"text": data.text}


@post("/sevens", status_code=200, dto=_NoSevens)
async def sevens(data: JSONBody[Order]) -> dict[str, int]:
    return {"seats": data.seats}


def app() -> Any:
    return service_app(
        service="test",
        version="0",
        route_handlers=[order, maybe, sevens, note],
        lifespan=[],
        registry=CollectorRegistry(),
    )


async def test_a_body_is_decoded_once_from_its_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Litestar's own parse (``Request.json``, then a lenient conversion) is never called, and
    the Struct is made once a request: the old way made it twice and parsed the JSON twice."""

    async def litestar_parses(self: Request[Any, Any, Any]) -> Any:
        raise AssertionError("Litestar parsed the body")

    monkeypatch.setattr(Request, "json", litestar_parses)
    monkeypatch.setattr(Order, "made", 0)
    async with AsyncTestClient(app()) as client:
        r = await client.post("/orders", json={"seats": 3})
        assert (r.status_code, r.json()) == (200, {"seats": 3})
        assert Order.made == 1
        r = await client.post("/maybe", json={"seats": 4})
        assert (r.status_code, r.json()) == (200, {"seats": 4})
        assert Order.made == 2


@pytest.mark.parametrize(
    ("path", "body", "status", "detail"),
    [
        (
            "/orders",
            b'{"seats": "3"}',
            400,
            "not a Order: Expected `int`, got `str` - at `$.seats`",
        ),
        ("/orders", b'{"seats": 3', 400, "malformed JSON: Input data was truncated"),
        ("/orders", b"[" * 100_000, 400, "not a Order: Expected `object`, got `array`"),
        ("/maybe", b"null", 400, "not a Order: Expected `object`, got `null`"),
        (
            "/orders",
            b'{"seats": 3.0',
            400,
            "not a Order: Expected `int`, got `float` - at `$.seats`",
        ),
        ("/sevens", b'{"seats": "7"}', 422, "seven is said in words"),
        (
            "/sevens",
            b'{"seats": "8"}',
            400,
            "not a Order: Expected `int`, got `str` - at `$.seats`",
        ),
    ],
)
async def test_a_body_that_does_not_decode_strictly_is_a_problem(
    path: str, body: bytes, status: int, detail: str
) -> None:
    async with AsyncTestClient(app()) as client:
        r = await client.post(path, content=body, headers={"content-type": "application/json"})
    assert r.status_code == status
    assert r.headers["content-type"].startswith("application/problem+json")
    assert (r.json()["status"], r.json()["detail"]) == (status, detail)


@pytest.mark.parametrize(("body", "status"), [(b'{"seats": 3.0}', 200), (b'{"seats": 3e0}', 200),
                                              (b'{"seats": 3.5}', 400)])  # fmt: skip
async def test_an_integer_written_with_a_fraction_of_zero_is_one(body: bytes, status: int) -> None:
    """JSON Schema's ``integer`` (the OpenAPI's) counts 3.0 one; 3.5 is not."""
    async with AsyncTestClient(app()) as client:
        r = await client.post("/orders", content=body, headers={"content-type": "application/json"})
    assert r.status_code == status, r.text
    if status == 200:
        assert r.json() == {"seats": 3}


async def test_a_method_a_route_does_not_take_says_those_it_does_in_allow() -> None:
    """RFC 9110: a 405 names the route's methods in ``Allow``, and so does ``OPTIONS``."""
    async with AsyncTestClient(app()) as client:
        refused = await client.put("/orders", json={"seats": 1})
        options = await client.options("/orders")
    assert (refused.status_code, refused.json()["code"]) == (405, "method_not_allowed")
    assert set(refused.headers["allow"].replace(" ", "").split(",")) >= {"POST"}
    assert options.status_code == 204
    assert set(options.headers["allow"].replace(" ", "").split(",")) == {"OPTIONS", "POST"}


async def test_a_body_left_out_is_the_default_or_refused() -> None:
    async with AsyncTestClient(app()) as client:
        left_out = await client.post("/maybe")
        assert (left_out.status_code, left_out.json()) == (200, {"seats": None})
        required = await client.post("/orders")
        assert (required.status_code, required.json()["code"]) == (400, "bad_request")
        # Litestar's own words were the missing key alone: "'data'"
        assert required.json()["errors"][0]["message"] == "a JSON body is required"


@pytest.mark.parametrize(
    ("body", "at"),
    [
        (b'{"text": "a\\u0000b"}', "$.text"),
        (b'{"text": "ok", "tags": ["x", "\\u0000"]}', "$.tags[1]"),
        (b'{"text": "ok", "extra": {"deep": [{"k": "\\u0000"}]}}', "$.extra.deep[0].k"),
        (b'{"text": "ok", "extra": {"a\\u0000": 1}}', "$.extra"),
    ],
)
async def test_a_nul_character_is_refused_before_the_handler_runs(body: bytes, at: str) -> None:
    """Postgres stores no NUL: refused at decoding (422, where), so nothing a handler does
    before its write (an eval's whole call) is done for a body that cannot be kept."""
    NOTED.clear()
    async with AsyncTestClient(app()) as client:
        r = await client.post("/notes", content=body, headers={"content-type": "application/json"})
    assert (r.status_code, r.json()["code"]) == (422, "unprocessable"), r.text
    assert r.json()["detail"] == f"a NUL character (\\u0000) cannot be stored - at `{at}`"
    assert NOTED == []


async def test_an_escaped_backslash_before_u0000_is_text_not_a_nul() -> None:
    """``\\\\u0000`` in JSON is a backslash and "u0000": looked through, and taken."""
    NOTED.clear()
    async with AsyncTestClient(app()) as client:
        r = await client.post(
            "/notes",
            content=b'{"text": "C:\\\\u0000"}',
            headers={"content-type": "application/json"},
        )
    assert (r.status_code, r.json()) == (200, {"text": "C:\\u0000"}), r.text
    assert len(NOTED) == 1


def test_the_openapi_names_each_routes_body_schema() -> None:
    """The decoding is the DTO's, the schema still the Struct's, as without a DTO; an optional
    body is left out, never ``null`` (``pinecall_servicekit.openapi``)."""
    schema = app().openapi_schema.to_schema()
    body = {
        path: (ops["post"]["requestBody"]["content"]["application/json"]["schema"],
               ops["post"]["requestBody"].get("required", False))
        for path, ops in schema["paths"].items() if "post" in ops
    }  # fmt: skip
    assert body == {
        "/orders": ({"$ref": "#/components/schemas/Order"}, True),
        "/maybe": ({"$ref": "#/components/schemas/Order"}, False),
        "/sevens": ({"$ref": "#/components/schemas/Order"}, True),
        "/notes": ({"$ref": "#/components/schemas/Note"}, True),
    }
    assert {"/healthz", "/readyz", "/metrics"} <= set(schema["paths"])
    assert schema["components"]["schemas"]["Order"]["properties"] == {"seats": {"type": "integer"}}
