"""A command the session refuses is an error entry on the call's log (issue 16, "The worker runs
the call's agent"): the job's real recorder and writer against a real call-log replica process;
the session is one that is closing, as livekit-agents 1.8.9 says it (``AgentSession.say`` raises
``RuntimeError``), which no call reaches on cue."""

from __future__ import annotations

import datetime as dt
from typing import Any, cast

from pinecall_clients.calllog import CallLogClient
from pinecall_contracts.calls import CallCommandEntry
from pinecall_contracts.dispatch import JobOffer
from pinecall_testkit.call_log import Process
from pinecall_testkit.roster import Keys
from pinecall_testkit.worker import of_kind, read_log
from pinecall_worker.call.record import Recorder
from pinecall_worker.call.steer import Steering


class ClosingSession:
    def say(self, text: str, **_: Any) -> None:
        raise RuntimeError("AgentSession is closing, cannot use say()")


async def test_a_command_the_session_refuses_is_an_error_entry_on_the_log(
    call_log: Process, keys: Keys
) -> None:
    offer = JobOffer(
        call="call_steer",
        fleet="pinecall",
        environment="production",
        room="call-steer",
        attempt=1,
        agent="support-bot",
        org="org_acme",
        arrived_at=dt.datetime.now(dt.UTC),
    )
    async with CallLogClient(call_log.url, keys.production) as client:
        recorder = Recorder(client, offer, worker="pinecall/worker-a.1791067258", measures=None)
        recorder.start()
        assert await recorder.open_settled()
        steering = Steering(cast(Any, None), cast(Any, ClosingSession()), recorder, client)
        await steering.run(CallCommandEntry(seq=2, id="cmd_say", kind="say", text="One moment."))
        await steering.run(CallCommandEntry(seq=3, id="cmd_new", kind="transfer", text=None))
        await recorder.finish("completed")
    log = await read_log(call_log.url, keys.production, "call_steer")
    errors = of_kind(log, "call.error")
    assert [(e["source"], e["id"], e["kind"], e["recoverable"]) for e in errors] == [
        ("command", "cmd_say", "say", True),
        ("command", "cmd_new", "transfer", True),
    ]
    assert "closing" in errors[0]["what"]
    assert of_kind(log, "call.ended") == [{"outcome": "completed"}]
