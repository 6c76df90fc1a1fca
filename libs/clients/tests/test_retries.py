"""The retry rule of ``shared/DESIGN.md`` on a mock transport: silence and 5xx are retried,
unchanged; a 4xx is an answer; the retries stop at their bound."""

from __future__ import annotations

import httpx
import pytest

from pinecall_clients.calllog import Backoff, CallLogClient
from pinecall_clients.errors import BatchRefused, CallLogRefused, CallLogUnavailable
from pinecall_contracts.calls import CallEnd, CallRecord

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
