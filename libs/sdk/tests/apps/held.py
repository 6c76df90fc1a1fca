"""The app ``pinecall start held:app`` runs in the SDK's tests: the booking agent, its tools
answering at once. Its URL, key, org and instance come from the test (the environment)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pinecall

app = pinecall.App(
    os.environ["HELD_URL"],
    os.environ["HELD_KEY"],
    org="org_acme",
    instance=os.environ.get("HELD_INSTANCE", "held-1"),
)
booking = app.agent("booking", definition=Path(__file__).with_name("booking.yaml"))


@booking.tool("check_availability")
def check_availability(arguments: dict[str, Any], context: pinecall.ToolContext) -> Any:
    return {"available": True, "time": arguments["time"]}


@booking.tool("book_table")
async def book_table(arguments: dict[str, Any], context: pinecall.ToolContext) -> Any:
    return {"reference": f"BK-{context.id}"}
