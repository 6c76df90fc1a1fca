"""The retry rule of ``shared/DESIGN.md`` on a mock transport: silence and 5xx are retried,
unchanged; a 4xx is an answer; the retries stop at their bound."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import httpx
import pytest
import stamina

from pinecall_clients.calllog import Backoff, CallLogClient
from pinecall_clients.errors import BatchRefused, CallLogRefused, CallLogUnavailable
from pinecall_contracts.calls import CallEnd, CallOpen, CallRecord
from pinecall_servicekit.retries import POLL, say_retries

QUICK = Backoff(first=0.001, most=0.002, jitter=0.0)
RECORD = (
    b'{"call": "c1", "agent": "a", "org": "o", "environment": "production", "room": "r",'
    b' "worker": "w", "state": "sealed", "written": 0, "last_seq": 3,'
    b' "opened_at": "2026-11-30T06:49:19+00:00"}'
)


def scripted(*answers: int | Exception) -> tuple[httpx.MockTransport, list[bytes]]:
    bodies: list[bytes] = []
    script = list(answers)

    def handle(request: httpx.Request) -> httpx.Response:
        bodies.append(request.content)
        answer = script.pop(0)
        if isinstance(answer, Exception):
            raise answer
        if answer == 200:
            return httpx.Response(200, content=RECORD)
        problem = {"title": "no", "status": answer}
        if answer == 409:
            problem["errors"] = [{"path": "$.after", "written": 4, "after": 2}]  # type: ignore[assignment]
        return httpx.Response(answer, json=problem)

    return httpx.MockTransport(handle), bodies


async def seal(transport: httpx.MockTransport, within_s: float | None = 5.0) -> CallRecord:
    async with CallLogClient("http://x", "k", transport=transport, backoff=QUICK) as client:
        return await client.request(
            "/v1/calls/c1/seal", CallEnd(outcome="completed"), CallRecord, within_s=within_s
        )


async def test_silence_and_5xx_are_retried_with_the_same_body() -> None:
    transport, bodies = scripted(
        httpx.ConnectError("down"), 503, httpx.ReadTimeout("slow"), 500, 200
    )
    record = await seal(transport)
    assert record.state == "sealed"
    assert len(bodies) == 5
    assert len(set(bodies)) == 1


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_a_4xx_is_an_answer_and_is_not_retried(status: int) -> None:
    transport, bodies = scripted(status, 200)
    with pytest.raises(CallLogRefused) as refused:
        await seal(transport)
    assert refused.value.status == status
    assert len(bodies) == 1


async def test_a_409_says_both_counts() -> None:
    transport, _ = scripted(409)
    with pytest.raises(BatchRefused) as refused:
        await seal(transport)
    assert (refused.value.written, refused.value.after) == (4, 2)


async def test_retries_stop_at_their_bound_with_the_last_status() -> None:
    transport, bodies = scripted(*([503] * 10_000))
    with pytest.raises(CallLogUnavailable) as unavailable:
        await seal(transport, within_s=0.05)
    assert unavailable.value.status == 503
    assert 1 < len(bodies) < 10_000


@pytest.fixture
def retries_said() -> Iterator[None]:
    """stamina's retries logged as a service logs them (``configure_logging`` installs it)."""
    say_retries()
    yield
    stamina.instrumentation.set_on_retry_hooks(None)


async def test_each_retry_says_the_request_its_call_the_attempt_the_wait_and_the_cause(
    retries_said: None, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 14 item 13: a retry logged ``WARNING stamina: stamina.retry_scheduled`` and no word of
    what was retried."""
    transport, _ = scripted(httpx.ConnectError("All connection attempts failed"), 503, 200)
    with caplog.at_level(logging.WARNING, logger="stamina"):
        async with CallLogClient("http://x", "k", transport=transport, backoff=QUICK) as client:
            await client.seal("call_7f55", "completed")
    first, second = (r.getMessage() for r in caplog.records)
    assert first.startswith("call-log POST /v1/calls/call_7f55/seal (call=call_7f55): attempt 1 ")
    assert "ConnectError('All connection attempts failed')" in first
    assert " attempt 2 in " in first
    assert " s waited so far" in first
    assert second.startswith("call-log POST /v1/calls/call_7f55/seal (call=call_7f55): attempt 2 ")
    assert "503 from http://x/v1/calls/call_7f55/seal" in second
    fields = caplog.records[0].__dict__  # what the JSON log carries
    assert (fields["call"], fields["attempt"]) == ("call_7f55", 1)


async def test_a_call_opened_names_its_call_though_its_path_does_not(
    retries_said: None, caplog: pytest.LogCaptureFixture
) -> None:
    transport, _ = scripted(httpx.ReadTimeout("slow"), 200)
    opening = CallOpen(
        call="call_00aa", agent="a", org="o", environment="production", room="r", worker="w"
    )
    with caplog.at_level(logging.WARNING, logger="stamina"):
        async with CallLogClient("http://x", "k", transport=transport, backoff=QUICK) as client:
            await client.open(opening)
    [said] = (r.getMessage() for r in caplog.records)
    assert said.startswith(
        "call-log POST /v1/calls (call=call_00aa): attempt 1 failed (ReadTimeout"
    )


async def test_a_poll_of_something_starting_is_no_warning(
    retries_said: None, caplog: pytest.LogCaptureFixture
) -> None:
    """``lab run death`` logged forty WARNINGs a worker process while it waited for it to start."""
    caplog.set_level(logging.DEBUG, logger="stamina")
    async for attempt in stamina.retry_context(
        on=ConnectionError, attempts=2, wait_initial=0.001, wait_jitter=0.0
    ).with_name(f"{POLL}the worker to start: GET", ("http://x/readyz",), {}):
        with attempt:
            if attempt.num == 1:
                raise ConnectionError("refused")
    [said] = caplog.records
    assert said.levelno == logging.DEBUG
    assert said.getMessage().startswith("waiting for the worker to start: GET ('http://x/readyz')")
