"""The reaper's written-call rule (issue 17, acceptance 5): a chat quiet five minutes and a
WhatsApp thread quiet two hours are ended ``timeout`` and sealed, on a clock the test moves;
neither has a room, and a voice call's 30-minute ceiling is not theirs."""

from __future__ import annotations

import datetime as dt

from pinecall_reaper.reaper import Reaper
from pinecall_testkit.call_log import Keys, Replica, bearer, opening


async def open_written(call_log: Replica, keys: Keys, call: str, channel: str) -> dt.datetime:
    body = opening(call, room=f"{channel}-{call}", worker="chat/replica-a", channel=channel)
    r = await call_log.post("/v1/calls", json=body, headers=bearer(keys.production))
    assert r.status_code == 200, r.text
    return dt.datetime.fromisoformat(r.json()["opened_at"])


async def state(call_log: Replica, keys: Keys, call: str) -> tuple[str, str | None]:
    record = (await call_log.get(f"/v1/calls/{call}", headers=bearer(keys.service))).json()
    return record["state"], record["outcome"]


async def test_a_quiet_chat_and_a_quiet_thread_end_timeout_and_are_sealed(
    reaper: Reaper, call_log: Replica, keys: Keys
) -> None:
    opened = await open_written(call_log, keys, "call_chat", "chat")
    await open_written(call_log, keys, "call_thread", "whatsapp")
    minutes = lambda m: opened + dt.timedelta(minutes=m)  # noqa: E731
    assert (await reaper.reap(minutes(4))).reaped == []
    reaped = await reaper.reap(minutes(6))
    assert [(v.call, v.why, v.outcome, v.take_room) for v in reaped.reaped] == [
        ("call_chat", "written_quiet", "timeout", False)
    ]
    assert reaped.failed == []
    assert await state(call_log, keys, "call_chat") == ("sealed", "timeout")
    # an hour quiet (past a voice call's 30-minute ceiling) is still a WhatsApp thread
    assert (await reaper.reap(minutes(61))).reaped == []
    assert await state(call_log, keys, "call_thread") == ("open", None)
    reaped = await reaper.reap(minutes(121))
    assert [(v.call, v.outcome) for v in reaped.reaped] == [("call_thread", "timeout")]
    assert await state(call_log, keys, "call_thread") == ("sealed", "timeout")
    assert reaper.totals["reaped_written_quiet"] == 2
