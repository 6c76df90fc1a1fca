"""The relay when call-log's answer is not one it can read (a proxy's page, a count that does not
match): no writer is told its batch was written, each is asked for alone, and a relay that failed
is not stuck (issue 20). The relay against real replicas is ``services/call-log/tests/test_relay.py``."""

from __future__ import annotations

import asyncio
import datetime as dt

import httpx
import pytest

from pinecall_clients.calllog import CallLogClient
from pinecall_clients.errors import CallLogUnavailable
from pinecall_clients.relay import BatchRelay
from pinecall_contracts.base import encode
from pinecall_contracts.calls import BatchWritten, Entry, EntryBatch

BATCH = EntryBatch(
    after=0, entries=[Entry(kind="transcript.user", ts=dt.datetime.now(dt.UTC), data={"n": 0})]
)


def server(combined: httpx.Response) -> tuple[httpx.MockTransport, list[str]]:
    """A call-log that answers ``POST /v1/entries`` with ``combined`` and each call's own route
    with its batch written."""
    asked: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        if request.url.path == "/v1/entries":
            return combined
        return httpx.Response(200, content=encode(BatchWritten(seqs=[2], written=1)))

    return httpx.MockTransport(answer), asked


async def test_an_answer_that_is_not_the_logs_is_unavailable_and_the_relay_goes_on() -> None:
    transport, asked = server(httpx.Response(200, text="<html>a proxy's page</html>"))
    async with CallLogClient("http://call-log.test", "k", transport=transport) as log:
        relay = BatchRelay(log)
        try:
            with pytest.raises(CallLogUnavailable, match="the relay failed"):
                await relay.write_batch("call_a", BATCH, within_s=5)  # its writer sends again
            assert asked == ["/v1/entries"]
            said = {"answers": [{"call": "call_a", "written": {"seqs": [2], "written": 1}}]}
            transport.handler = lambda _: httpx.Response(200, json=said)
            again = await relay.write_batch("call_a", BATCH, within_s=5)
        finally:
            await relay.aclose()
    assert again.written == 1


@pytest.mark.parametrize(
    "combined",
    [
        httpx.Response(200, json={"answers": []}),  # fewer answers than batches
        httpx.Response(404, json={"title": "Not found", "status": 404}),
        httpx.Response(405, json={"title": "Method not allowed", "status": 405}),
    ],
    ids=["answers-missing", "404", "405"],
)
async def test_a_combined_answer_not_the_batches_own_sends_each_batch_on_its_own_route(
    combined: httpx.Response,
) -> None:
    """Fewer answers than batches, or an older call-log behind the same address (or a route an
    ingress does not pass): its 404 is not the batches' own, so no writer hears ``CallUnknown``
    and stops writing its call."""
    transport, asked = server(combined)
    async with CallLogClient("http://call-log.test", "k", transport=transport) as log:
        relay = BatchRelay(log)
        try:
            written = await relay.write_batch("call_a", BATCH, within_s=5)
        finally:
            await relay.aclose()
    assert written.written == 1
    assert asked == ["/v1/entries", "/v1/calls/call_a/entries"]


async def test_closing_answers_the_batches_in_flight_and_takes_no_more() -> None:
    sent, never = asyncio.Event(), asyncio.Event()

    async def hang(_: httpx.Request) -> httpx.Response:
        sent.set()
        await never.wait()  # a call-log that never answers
        raise AssertionError("unreachable")

    async with CallLogClient(
        "http://call-log.test", "k", transport=httpx.MockTransport(hang)
    ) as log:
        relay = BatchRelay(log)
        flying = asyncio.create_task(relay.write_batch("call_a", BATCH, within_s=None))
        await sent.wait()
        await relay.aclose()
        with pytest.raises(CallLogUnavailable, match="the worker's relay closed"):
            await flying
        with pytest.raises(CallLogUnavailable, match="the worker's relay is closed"):
            await relay.write_batch("call_b", BATCH, within_s=None)


async def test_a_traceparent_no_w3c_header_could_be_is_not_sent_on() -> None:
    seen: list[bytes] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.content)
        said = {"answers": [{"call": "call_a", "written": {"seqs": [2], "written": 1}}]}
        return httpx.Response(200, json=said)

    async with CallLogClient(
        "http://call-log.test", "k", transport=httpx.MockTransport(answer)
    ) as log:
        relay = BatchRelay(log)
        try:
            await relay.write_batch("call_a", BATCH, within_s=5, traceparent="0" * 600)
        finally:
            await relay.aclose()
    (body,) = seen
    assert b'"traceparent":null' in body


async def test_a_batch_asked_alone_goes_in_its_writers_trace() -> None:
    """A batch the combined request did not settle is sent on its own route with its writer's
    ``traceparent``, not the context of whichever writer started the relay's task: call-log
    writes it in its call's trace, as through the relay."""
    writer = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    traces: dict[str, str | None] = {}

    def answer(request: httpx.Request) -> httpx.Response:
        traces[request.url.path] = request.headers.get("traceparent")
        if request.url.path == "/v1/entries":  # an older call-log: each batch goes alone
            return httpx.Response(404, json={"title": "Not found", "status": 404})
        return httpx.Response(200, content=encode(BatchWritten(seqs=[2], written=1)))

    transport = httpx.MockTransport(answer)
    async with CallLogClient("http://call-log.test", "k", transport=transport) as log:
        relay = BatchRelay(log)
        try:
            await relay.write_batch("call_a", BATCH, within_s=5, traceparent=writer)
        finally:
            await relay.aclose()
    alone = traces["/v1/calls/call_a/entries"]
    assert alone is not None
    assert alone.split("-")[1] == writer.split("-")[1]
