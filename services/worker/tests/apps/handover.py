"""The app ``pinecall start handover:app`` runs in the handover test (``test_handover.py``): it
holds the agent ``booking`` and answers its tool ``book_table``, telling the test on its stdout
each call attached to it (``attached <instance> <call> <why>``) and each run of the tool it
starts and finishes (``start <instance> <call> <id>``, ``done …``): the app's own count of the
tool's runs. A run whose arguments say ``hang`` with this process's
instance never finishes: the process is killed while the tool waits in it.

Its URL, key and instance come from the test (``HANDOVER_URL``, ``HANDOVER_KEY``,
``HANDOVER_INSTANCE``); the agent's definition is the test's (``HANDOVER_AGENT``, JSON)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from typing import Any

import pinecall

app = pinecall.App(
    os.environ["HANDOVER_URL"],
    os.environ["HANDOVER_KEY"],
    org="org_acme",
    instance=os.environ["HANDOVER_INSTANCE"],
)
booking = app.agent("booking", definition=json.loads(os.environ["HANDOVER_AGENT"]))


_TELLING = threading.Lock()
"""One line at a time: the sync ``attached`` hook runs on a thread of its own, and two prints
at once interleave their words (a CI run read ``attached start app-3 …`` as one line)."""


def _tell(what: str, call: pinecall.Call, about: str) -> None:
    with _TELLING:
        sys.stdout.write(f"{what} {app.instance} {call.id} {about}\n")
        sys.stdout.flush()


@booking.on_call("attached")
def attached(call: pinecall.Call) -> None:
    _tell("attached", call, call.why)


@booking.tool("book_table")
async def book_table(arguments: dict[str, Any], context: pinecall.ToolContext) -> Any:
    _tell("start", context.call, context.id)
    if arguments.get("hang") == app.instance:
        await asyncio.Event().wait()  # until the process is killed
    _tell("done", context.call, context.id)
    return {"booked": arguments["day"], "by": app.instance}
