"""The booking example (``examples/booking``) as its README runs it: ``pinecall start app:app``
holding the agent its YAML defines, against a real call-log; both tools answer, a full time is
an error the model can speak around, SIGTERM drains and exits 0."""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import sys
from pathlib import Path

import yaml

from pinecall_testkit import appsocket
from pinecall_testkit.appsocket import ask, define, open_call, service
from pinecall_testkit.call_log import make_keys

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "booking"


async def test_the_booking_example_answers_its_tools_and_drains_on_sigterm(
    database_url: str, nats_url: str, nats_namespace: str
) -> None:
    keys = await make_keys(database_url)
    definition = yaml.safe_load((EXAMPLE / "booking.yaml").read_text())
    serve = appsocket.serving(appsocket.call_log_settings(database_url, nats_url, nats_namespace))
    async with serve() as replica:
        await define(replica, keys, body=definition)  # `agents put booking.yaml`, as the app key
        hub = service(replica).hub
        env = os.environ | {
            "BOOKING_URL": replica.url, "BOOKING_KEY": keys.app, "BOOKING_ORG": "org_acme",
        }  # fmt: skip
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "pinecall", "start", "app:app", "--app-dir", str(EXAMPLE),
            env=env, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            await hub.changes.wait_for(
                lambda: any("booking" in s.agents for s in hub.sockets.values()), 30
            )
            prompt = hashlib.sha256(definition["prompt"].encode()).hexdigest()
            await open_call(replica, keys, agent="booking", prompt_hash=prompt)
            free = await ask(
                replica, keys, id="tc_1", name="check_availability",
                arguments={"time": "19:00", "party": 4},
            )  # fmt: skip
            assert free["result"] == {
                "available": True,
                "times_with_room": ["18:00", "19:00", "20:00", "21:00"],
            }
            booked = await ask(
                replica, keys, id="tc_2", name="book_table",
                arguments={"time": "19:00", "party": 4, "name": "Ada"},
            )  # fmt: skip
            assert booked["result"] == {"reference": "BK-0001", "time": "19:00", "party": 4}
            full = await ask(
                replica, keys, id="tc_3", name="book_table",
                arguments={"time": "19:00", "party": 2, "name": "Grace"},
            )  # fmt: skip
            assert full["error"] == "No table for 2 at 19:00. Times with room: 18:00, 20:00, 21:00."
            process.send_signal(signal.SIGTERM)
            async with asyncio.timeout(30):  # a failure bound, never a pace
                code = await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    assert process.stderr is not None
    said = (await process.stderr.read()).decode()
    assert code == 0, said
    assert "booked BK-0001" in said
